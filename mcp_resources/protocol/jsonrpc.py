"""JSON-RPC 2.0 framing for MCP: strict parsing and serialization.

The parser is deliberately strict: member names are matched exactly (no case folding), duplicate keys are refused,
batches are refused and ``id`` must be a string or an integer. Every failure is an
:class:`~mcp_resources.exceptions.MCPError` carrying the JSON-RPC code, a one-sentence message and, when it could be
read, the request id.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from mcp_resources.exceptions import InvalidParams, InvalidRequest, ParseError

RequestId = str | int


@dataclass(frozen=True)
class Message:
    """One parsed client message: a request (with ``id``), a notification, or a response sent by a client."""

    method: str | None
    params: dict[str, Any] = field(default_factory=dict)
    id: RequestId | None = None
    is_notification: bool = False
    is_response: bool = False


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def _reject_constant(value: str) -> Any:
    raise ValueError(f"non-standard JSON constant {value}")


def loads(data: bytes | str) -> Any:
    """Decode strict JSON: UTF-8, no duplicate keys, no NaN/Infinity."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ParseError() from exc
    try:
        return json.loads(data, object_pairs_hook=_reject_duplicates, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise ParseError() from exc


def dumps(payload: Any) -> bytes:
    """Encode compact UTF-8 JSON."""
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (legal in JSON input as a \u escape, e.g. in an echoed id) has no UTF-8 form: escape
        # it, and only it (it can only stand inside a string), so that every other character keeps its UTF-8
        # size, the size a page's byte accounting measured.
        return _LONE_SURROGATE.sub(_escape_surrogate, text).encode("utf-8")


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape_surrogate(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def dumps_plain(payload: Any) -> bytes:
    """Encode a payload built of strings, integers, booleans and ``None`` (a list page), as :func:`dumps` does.

    orjson encodes such a payload byte for byte as :func:`dumps` (a property test checks it) in a tenth of the time;
    whatever it refuses (a lone surrogate, an integer over 64 bits, a key that is not a string) goes to
    :func:`dumps`. Not for payloads that may hold floats: orjson writes them differently and NaN as ``null``.
    """
    try:
        return orjson.dumps(payload)
    except orjson.JSONEncodeError:
        return dumps(payload)


def _valid_id(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    if isinstance(value, float):
        return False
    return isinstance(value, str)


def parse_message(body: bytes) -> Message:
    """Parse one JSON-RPC message from an HTTP body; raise an :class:`~mcp_resources.exceptions.MCPError` if bad."""
    payload = loads(body)
    if isinstance(payload, list):
        raise InvalidRequest("Batch requests are not supported", request_id=None)
    if not isinstance(payload, dict):
        raise InvalidRequest("The body must be a JSON-RPC object", request_id=None)
    has_id = "id" in payload
    raw_id = payload.get("id")
    request_id: RequestId | None = raw_id if has_id and _valid_id(raw_id) else None
    reply_id: Any = request_id if request_id is not None else None
    if payload.get("jsonrpc") != "2.0":
        raise InvalidRequest('"jsonrpc" must be "2.0"', request_id=reply_id)
    if has_id and not _valid_id(raw_id):
        raise InvalidRequest('"id" must be a string or an integer', request_id=None)
    if "method" not in payload:
        if has_id and ("result" in payload or "error" in payload):
            return Message(method=None, id=request_id, is_response=True)
        raise InvalidRequest('"method" is required', request_id=reply_id)
    method = payload["method"]
    if not isinstance(method, str) or not method:
        raise InvalidRequest('"method" must be a non-empty string', request_id=reply_id)
    params = payload.get("params", {})
    if "params" in payload and not isinstance(params, dict):
        raise InvalidParams('"params" must be an object', request_id=reply_id)
    extra = set(payload) - {"jsonrpc", "id", "method", "params"}
    if extra:
        raise InvalidRequest("Unexpected member in request", request_id=reply_id)
    return Message(method=method, params=params, id=request_id, is_notification=not has_id)


def result_response(request_id: RequestId, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}
