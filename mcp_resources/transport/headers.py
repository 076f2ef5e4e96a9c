"""The 2026-07-28 request-metadata headers: ``MCP-Protocol-Version``, ``Mcp-Method`` and ``Mcp-Name``.

Values in the ``=?base64?...?=`` form are decoded before comparison; a malformed sentinel never matches.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from django.http import HttpRequest

from mcp_resources.exceptions import HeaderMismatch, InvalidParams, UnsupportedProtocolVersion
from mcp_resources.protocol.versions import (
    CLIENT_CAPABILITIES_META,
    PROTOCOL_VERSION_META,
    SUPPORTED_VERSIONS,
    V2026_07_28,
)

NAME_BEARING = {"resources/read": "uri", "tools/call": "name", "prompts/get": "name"}

_SENTINEL = re.compile(r"^=\?base64\?(?P<payload>[A-Za-z0-9+/]*={0,2})\?=$")
_SAFE = re.compile(r"^[\x21-\x7e](?:[\x20-\x7e\t]*[\x21-\x7e])?$")


def header(request: HttpRequest, name: str) -> str | None:
    return request.META.get("HTTP_" + name.upper().replace("-", "_"))


def decode_header_value(value: str | None) -> str | None:
    """Decode a request-metadata header value; ``None`` when absent or invalid."""
    if value is None:
        return None
    match = _SENTINEL.match(value)
    if match is None:
        return value if _SAFE.match(value) else None
    payload = match.group("payload")
    try:
        raw = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        return None
    if base64.b64encode(raw).decode("ascii") != payload:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def check_stateless_request(request: HttpRequest, method: str, params: dict[str, Any]) -> str:
    """Validate a 2026-07-28 request's ``_meta`` and headers; return its protocol version.

    The order is: required ``_meta`` (-32602), then the headers (-32020), then the version (-32022).
    """
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        raise InvalidParams(
            f"params._meta is required and must carry {PROTOCOL_VERSION_META!r} and {CLIENT_CAPABILITIES_META!r}"
        )
    missing = [key for key in (PROTOCOL_VERSION_META, CLIENT_CAPABILITIES_META) if key not in meta]
    if missing:
        raise InvalidParams("params._meta is missing required key(s): " + ", ".join(missing))
    version = meta[PROTOCOL_VERSION_META]
    capabilities = meta[CLIENT_CAPABILITIES_META]
    version_header = header(request, "MCP-Protocol-Version")
    if version_header is None or version_header != version:
        raise HeaderMismatch("Header mismatch: MCP-Protocol-Version header does not match params._meta protocolVersion")
    method_header = header(request, "Mcp-Method")
    if method_header is None or method_header != method:
        raise HeaderMismatch("Header mismatch: Mcp-Method header does not match the request method")
    name_key = NAME_BEARING.get(method)
    if name_key is not None:
        raw_name = header(request, "Mcp-Name")
        if raw_name is None:
            raise HeaderMismatch("Header mismatch: Mcp-Name header is required for " + method)
        if decode_header_value(raw_name) != params.get(name_key):
            raise HeaderMismatch(f"Header mismatch: Mcp-Name header does not match params.{name_key}")
    if not isinstance(version, str) or version != V2026_07_28:
        raise UnsupportedProtocolVersion(
            "Unsupported protocol version",
            data={
                "supported": list(SUPPORTED_VERSIONS),
                "requested": version if isinstance(version, str) else "",
            },
        )
    if not isinstance(capabilities, dict):
        raise InvalidParams("params._meta clientCapabilities must be an object")
    return version
