"""HTTP transport tests against a real threaded server on loopback (pytest-django's ``live_server``).

The live server is Django's own WSGI handler, so every MCP request passes through the project's middleware stack,
as under ``testproject.wsgi`` (the last section checks that). Every request is built byte by byte with
``http.client``, so each header (including ``Host``) and the body are exactly what the test says. Tokens are real
django-oauth-toolkit rows bound (RFC 8707) to the endpoint URL. Expected statuses and JSON-RPC codes follow the
2026-07-28 error map (docs: mcp-protocol.md section 1.7 and the checklist in section 10); sessions of 2025-11-25 /
2025-06-18 follow the 2025 transport.
"""

from __future__ import annotations

import base64
import http.client
import json
import re
import secrets
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pytest
from django.core.signals import got_request_exception
from django.core.wsgi import get_wsgi_application
from django.utils import timezone
from oauth2_provider.models import get_access_token_model

from mcp_resources.auth.tokens import issue_access_token
from mcp_resources.models import StaticResource
from mcp_resources.protocol.versions import V2026_07_28
from testproject.library.models import Document, Note
from tests.listing_support import INVALID_CURSOR_DATA, handbook_uris
from tests.urls_extra import MIDDLEWARE_LOG, SECRET_DETAIL, STATIC_CODE_URIS

pytestmark = pytest.mark.django_db(transaction=True)

PROTOCOL_VERSION_META = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_META = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO_META = "io.modelcontextprotocol/clientInfo"
SERVER_INFO_META = "io.modelcontextprotocol/serverInfo"

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
NOT_FOUND_2025_11_25 = -32002
HEADER_MISMATCH = -32020
UNSUPPORTED_VERSION = -32022

DEFAULT = object()


# Raw HTTP -----------------------------------------------------------------------------------------------


@dataclass
class Reply:
    status: int
    headers: http.client.HTTPMessage
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def error(self) -> dict[str, Any]:
        payload = self.json
        assert "result" not in payload, payload
        return payload["error"]

    @property
    def result(self) -> dict[str, Any]:
        payload = self.json
        assert "error" not in payload, payload
        return payload["result"]


def raw_request(
    url: str, method: str = "POST", body: bytes = b"", headers: list[tuple[str, str | bytes]] | None = None
) -> Reply:
    """Send exactly one request; ``Host`` is added only when ``headers`` has none."""
    parts = urlsplit(url)
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    headers = list(headers or [])
    names = {name.lower() for name, _ in headers}
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        conn.putrequest(method, target, skip_host="host" in names, skip_accept_encoding=True)
        for name, value in headers:
            conn.putheader(name, value)
        if method in ("POST", "PUT") and "content-length" not in names:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body or None)
        response = conn.getresponse()
        return Reply(response.status, response.headers, response.read())
    finally:
        conn.close()


def encode_name(value: str) -> str:
    """An ``Mcp-Name`` value: plain when safe visible ASCII, else the ``=?base64?...?=`` form."""
    safe = re.fullmatch(r"[\x21-\x7e](?:[\x20-\x7e\t]*[\x21-\x7e])?", value) is not None
    if safe and not (value.startswith("=?base64?") and value.endswith("?=")):
        return value
    return "=?base64?" + base64.b64encode(value.encode("utf-8")).decode("ascii") + "?="


def request_meta(version: str = V2026_07_28) -> dict[str, Any]:
    return {
        PROTOCOL_VERSION_META: version,
        CLIENT_CAPABILITIES_META: {},
        CLIENT_INFO_META: {"name": "pytest", "version": "0"},
    }


class Endpoint:
    """The MCP endpoint of the live server, spoken to with hand-built requests."""

    def __init__(self, url: str) -> None:
        self.url = url

    def post(
        self,
        body: bytes | dict[str, Any] | list[Any],
        headers: dict[str, str | bytes | None] | None = None,
        *,
        token: str | None = None,
        query: str = "",
    ) -> Reply:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        merged: dict[str, str | bytes | None] = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        if token is not None:
            merged["Authorization"] = f"Bearer {token}"
        merged.update(headers or {})
        pairs = [(name, value) for name, value in merged.items() if value is not None]
        return raw_request(self.url + query, "POST", data, pairs)

    def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        id: Any = 1,
        token: str | None = None,
        version: str = V2026_07_28,
        meta: Any = DEFAULT,
        headers: dict[str, str | bytes | None] | None = None,
        query: str = "",
    ) -> Reply:
        """A well-formed 2026-07-28 request; ``meta``/``headers`` override parts of it (``None`` removes)."""
        params = dict(params or {})
        if meta is DEFAULT:
            params["_meta"] = request_meta(version)
        elif meta is not None:
            params["_meta"] = meta
        body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
        if id is not None:
            body["id"] = id
        request_headers: dict[str, str | bytes | None] = {"MCP-Protocol-Version": version, "Mcp-Method": method}
        if method == "resources/read" and isinstance(params.get("uri"), str):
            request_headers["Mcp-Name"] = encode_name(params["uri"])
        request_headers.update(headers or {})
        return self.post(body, request_headers, token=token, query=query)

    def read(self, uri: str, **kwargs: Any) -> Reply:
        return self.call("resources/read", {"uri": uri}, **kwargs)

    # Sessions of 2025-11-25 ------------------------------------------------------------------------------

    def initialize(self, version: str = "2025-11-25", *, token: str | None = None) -> Reply:
        body = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": version,
                "capabilities": {},
                "clientInfo": {"name": "pytest", "version": "0"},
            },
        }
        return self.post(body, token=token)

    def session(self, version: str = "2025-11-25", *, token: str | None = None) -> tuple[str, str]:
        reply = self.initialize(version, token=token)
        assert reply.status == 200, reply.body
        return reply.headers["Mcp-Session-Id"], reply.result["protocolVersion"]

    def session_message(
        self,
        session: str,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        id: Any = 1,
        token: str | None = None,
        version: str = "2025-11-25",
    ) -> Reply:
        body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            body["params"] = params
        if id is not None:
            body["id"] = id
        headers: dict[str, str | bytes | None] = {"Mcp-Session-Id": session, "MCP-Protocol-Version": version}
        return self.post(body, headers, token=token)


# Fixtures -----------------------------------------------------------------------------------------------


@pytest.fixture
def endpoint(live_server: Any, settings: Any) -> Endpoint:
    """The live endpoint; its canonical resource URI (the tokens' audience) is its own URL."""
    url = live_server.url + "/mcp"
    set_mcp(settings, RESOURCE_URI=url)
    return Endpoint(url)


@dataclass
class People:
    alice: Any
    bob: Any
    alice_docs: list[Document]
    bob_docs: list[Document]


@pytest.fixture
def people(alice: Any, bob: Any) -> People:
    alice_docs = [Document.objects.create(owner=alice, title=f"A{i}", body=f"alice body {i}") for i in range(3)]
    bob_docs = [Document.objects.create(owner=bob, title=f"B{i}", body=f"bob body {i}") for i in range(2)]
    return People(alice, bob, alice_docs, bob_docs)


@pytest.fixture
def token_for(make_token: Callable[..., str], endpoint: Endpoint) -> Callable[..., str]:
    """conftest's ``make_token``, bound by default to the live endpoint's URL (its canonical resource URI)."""

    def make(user: Any, scope: str = "documents:read", *, resource: str | None = None, expires_in: int = 3600) -> str:
        return make_token(user, scope, resource=endpoint.url if resource is None else resource, expires_in=expires_in)

    return make


@pytest.fixture
def alice_token(people: People, token_for: Any) -> str:
    return token_for(people.alice)


@pytest.fixture
def bob_token(people: People, token_for: Any) -> str:
    return token_for(people.bob)


@pytest.fixture
def extra(settings: Any) -> None:
    """Serve ``tests/urls_extra.py`` (a separate registry) at ``/mcp``."""
    settings.ROOT_URLCONF = "tests.urls_extra"


def set_mcp(settings: Any, **values: Any) -> None:
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, **values}


def doc_uri(doc: Document | int) -> str:
    return f"learn://documents/{doc if isinstance(doc, int) else doc.pk}"


def assert_error(reply: Reply, status: int, code: int, request_id: Any = 1) -> dict[str, Any]:
    assert reply.status == status, (reply.status, reply.body)
    assert reply.headers.get_content_type() == "application/json"
    payload = reply.json
    assert payload["jsonrpc"] == "2.0"
    assert "result" not in payload
    assert payload["id"] == request_id
    assert payload["error"]["code"] == code, payload
    assert isinstance(payload["error"]["message"], str)
    assert payload["error"]["message"]
    return payload["error"]


def walk(endpoint: Endpoint, method: str, key: str, **kwargs: Any) -> tuple[list[dict[str, Any]], int]:
    """Follow ``nextCursor`` to the end; return every item and the number of pages."""
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    pages = 0
    while True:
        params = {} if cursor is None else {"cursor": cursor}
        reply = endpoint.call(method, params, **kwargs)
        assert reply.status == 200, reply.body
        result = reply.result
        items.extend(result[key])
        pages += 1
        assert pages < 100, "cursor loop does not end"
        if "nextCursor" not in result:
            return items, pages
        cursor = result["nextCursor"]
        assert isinstance(cursor, str)


def first_cursor(endpoint: Endpoint, method: str, **kwargs: Any) -> str:
    reply = endpoint.call(method, **kwargs)
    assert reply.status == 200, reply.body
    return reply.result["nextCursor"]


@pytest.mark.django_db
def test_endpoint_is_exempt_from_csrf_through_the_whole_middleware_stack() -> None:
    from django.test import Client

    from tests.stream_support import meta

    body = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta()}}
    response = Client(enforce_csrf_checks=True).post(
        "/mcp",
        json.dumps(body),
        content_type="application/json",
        headers={"Mcp-Protocol-Version": V2026_07_28, "Mcp-Method": "server/discover"},
    )
    assert response.status_code == 200, response.content[:300]
    assert response.json()["result"]["supportedVersions"][0] == V2026_07_28


# server/discover and result envelope --------------------------------------------------------------------


def test_discover_shape(endpoint: Endpoint) -> None:
    reply = endpoint.call("server/discover", id="d-1")
    assert reply.status == 200
    assert reply.headers.get_content_type() == "application/json"
    payload = reply.json
    assert payload["jsonrpc"] == "2.0"
    assert payload["id"] == "d-1"
    result = payload["result"]
    assert result["resultType"] == "complete"
    assert V2026_07_28 in result["supportedVersions"]
    assert all(isinstance(v, str) for v in result["supportedVersions"])
    assert isinstance(result["capabilities"]["resources"], dict)
    assert isinstance(result["ttlMs"], int)
    assert result["ttlMs"] >= 0
    assert result["cacheScope"] in ("public", "private")
    server_info = result["_meta"][SERVER_INFO_META]
    assert isinstance(server_info["name"], str)
    assert server_info["name"]
    assert isinstance(server_info["version"], str)
    assert server_info["version"]


@pytest.mark.parametrize(("method", "scope"), [("resources/list", "private"), ("resources/templates/list", "public")])
def test_list_results_carry_2026_envelope(endpoint: Endpoint, alice_token: str, method: str, scope: str) -> None:
    result = endpoint.call(method, token=alice_token).result
    assert result["resultType"] == "complete"
    assert isinstance(result["ttlMs"], int)
    assert result["ttlMs"] >= 0
    assert result["cacheScope"] == scope
    assert SERVER_INFO_META in result["_meta"]


def test_list_without_token_is_401_when_inventories_exist(endpoint: Endpoint) -> None:
    challenge = assert_challenge(endpoint.call("resources/list"))
    assert 'scope="documents:read"' in challenge


def test_read_text_and_blob(endpoint: Endpoint) -> None:
    result = endpoint.read("test://static-text").result
    assert result["resultType"] == "complete"
    assert result["cacheScope"] == "public"
    assert result["contents"] == [
        {
            "uri": "test://static-text",
            "mimeType": "text/plain",
            "text": "This is the content of the static text resource.",
        }
    ]
    blob = endpoint.read("test://static-binary").result["contents"][0]
    assert blob["mimeType"] == "image/png"
    assert base64.b64decode(blob["blob"]).startswith(b"\x89PNG\r\n\x1a\n")


# Required _meta (400 / -32602) --------------------------------------------------------------------------


def test_missing_meta(endpoint: Endpoint) -> None:
    assert_error(endpoint.call("resources/list", meta=None), 400, INVALID_PARAMS)


def test_missing_params_entirely(endpoint: Endpoint) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "resources/list"}
    reply = endpoint.post(body, {"MCP-Protocol-Version": V2026_07_28, "Mcp-Method": "resources/list"})
    assert_error(reply, 400, INVALID_PARAMS)


@pytest.mark.parametrize("missing", [PROTOCOL_VERSION_META, CLIENT_CAPABILITIES_META])
def test_missing_required_meta_key(endpoint: Endpoint, missing: str) -> None:
    meta = request_meta()
    del meta[missing]
    assert_error(endpoint.call("resources/list", meta=meta), 400, INVALID_PARAMS)


def test_meta_not_an_object(endpoint: Endpoint) -> None:
    assert_error(endpoint.call("server/discover", meta="2026-07-28"), 400, INVALID_PARAMS)


def test_client_capabilities_not_an_object(endpoint: Endpoint) -> None:
    meta = {**request_meta(), CLIENT_CAPABILITIES_META: "all"}
    assert_error(endpoint.call("server/discover", meta=meta), 400, INVALID_PARAMS)


# Request-metadata headers (400 / -32020) ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "headers"),
    [
        ("resources/list", {"MCP-Protocol-Version": None}),
        ("resources/list", {"MCP-Protocol-Version": "2025-11-25"}),
        ("resources/list", {"Mcp-Method": None}),
        ("resources/list", {"Mcp-Method": "resources/templates/list"}),
        ("resources/list", {"Mcp-Method": "Resources/List"}),
        ("server/discover", {"Mcp-Method": "resources/list"}),
    ],
    ids=[
        "version-missing",
        "version-mismatch",
        "method-missing",
        "method-mismatch",
        "method-case",
        "method-other",
    ],
)
def test_header_mismatch(endpoint: Endpoint, method: str, headers: dict[str, str | None]) -> None:
    assert_error(endpoint.call(method, headers=headers), 400, HEADER_MISMATCH)


@pytest.mark.parametrize(
    "name",
    [
        None,
        "test://static-binary",
        "TEST://static-text",
        "=?base64?dGVzdDovL3N0YXRpYy10ZXh0?",  # truncated sentinel
        "=?base64?dGVzdDovL3N0YXRpYy10ZXh0!!?=",  # not base64
        "=?base64?dGVzdDovL3N0YXRpYy10ZXh?=",  # bad padding
        "=?BASE64?dGVzdDovL3N0YXRpYy10ZXh0?=",  # markers are case-sensitive
        "=?base64?" + base64.b64encode(b"test://static-binary").decode() + "?=",  # decodes to another URI
        "=?base64?" + base64.b64encode(b"\xff\xfe").decode() + "?=",  # not UTF-8
    ],
    ids=[
        "missing",
        "other-uri",
        "case",
        "truncated-sentinel",
        "not-base64",
        "bad-padding",
        "uppercase-markers",
        "decodes-to-other",
        "not-utf8",
    ],
)
def test_mcp_name_mismatch(endpoint: Endpoint, name: str | None) -> None:
    reply = endpoint.read("test://static-text", headers={"Mcp-Name": name})
    assert_error(reply, 400, HEADER_MISMATCH)


def test_mcp_name_base64_of_ascii_uri_matches(endpoint: Endpoint) -> None:
    encoded = "=?base64?" + base64.b64encode(b"test://static-text").decode() + "?="
    reply = endpoint.read("test://static-text", headers={"Mcp-Name": encoded})
    assert reply.status == 200
    assert reply.result["contents"][0]["text"].startswith("This is the content")


def test_mcp_name_non_ascii_uri_base64_passes_routing(endpoint: Endpoint) -> None:
    # A template spells non-ASCII values percent-encoded (one URI per record); a static resource's URI is its own.
    uri = "test://café-日本"
    StaticResource.objects.create(uri=uri, name="café", text="café-日本 content")
    header = encode_name(uri)
    assert header.startswith("=?base64?")
    reply = endpoint.read(uri)
    assert reply.status == 200, reply.body
    contents = reply.result["contents"]
    assert contents[0]["uri"] == uri
    assert "café-日本" in contents[0]["text"]


def test_mcp_name_non_ascii_raw_header_is_rejected(endpoint: Endpoint) -> None:
    uri = "test://template/café/data"
    reply = endpoint.read(uri, headers={"Mcp-Name": uri.encode("utf-8")})
    assert_error(reply, 400, HEADER_MISMATCH)


def test_mcp_name_is_ignored_where_not_required(endpoint: Endpoint) -> None:
    reply = endpoint.call("resources/templates/list", headers={"Mcp-Name": "anything"})
    assert reply.status == 200


# Protocol version (400 / -32022) ------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["2099-01-01", "2025-03-26", "2025-11-25"])
def test_unsupported_version(endpoint: Endpoint, version: str) -> None:
    error = assert_error(endpoint.call("resources/list", version=version), 400, UNSUPPORTED_VERSION)
    assert V2026_07_28 in error["data"]["supported"]
    assert error["data"]["requested"] == version


# Methods, framing and parse errors ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "method", ["tools/list", "resources/subscribe", "resources/unsubscribe", "ping", "initialized", "x" * 300]
)
def test_unknown_method_is_404(endpoint: Endpoint, method: str) -> None:
    params = {"uri": "test://static-text"} if method.startswith("resources/") else {}
    error = assert_error(endpoint.call(method, params), 404, METHOD_NOT_FOUND)
    assert len(error["message"]) <= 300


@pytest.mark.parametrize("method", ["notifications/initialized", "notifications/cancelled", "notifications/x"])
def test_notification_is_202_empty(endpoint: Endpoint, method: str) -> None:
    reply = endpoint.call(method, id=None)
    assert reply.status == 202
    assert reply.body == b""


def test_bare_notification_without_headers_is_202(endpoint: Endpoint) -> None:
    reply = endpoint.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert reply.status == 202
    assert reply.body == b""


def test_batch_is_rejected(endpoint: Endpoint) -> None:
    one = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": request_meta()}}
    reply = endpoint.post([one, {**one, "id": 2}], {"MCP-Protocol-Version": V2026_07_28})
    assert_error(reply, 400, INVALID_REQUEST, request_id=None)


@pytest.mark.parametrize(
    "body",
    [b"{", b"", b"not json", b'{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}', b"\xff\xfe{}", b"[" * 100_000],
    ids=["truncated", "empty", "text", "duplicate-key", "not-utf8", "deep-nesting"],
)
def test_parse_error(endpoint: Endpoint, body: bytes) -> None:
    reply = endpoint.post(body, {"MCP-Protocol-Version": V2026_07_28, "Mcp-Method": "ping"})
    error = assert_error(reply, 400, PARSE_ERROR, request_id=None)
    assert "Traceback" not in error["message"]


@pytest.mark.parametrize(
    ("body", "request_id"),
    [
        ({"jsonrpc": "1.0", "id": 5, "method": "server/discover"}, 5),
        ({"id": "no-version", "method": "server/discover"}, "no-version"),
        ({"jsonrpc": "2.0", "id": 6}, 6),
        ({"jsonrpc": "2.0", "id": 7, "method": 12}, 7),
        ({"jsonrpc": "2.0", "id": None, "method": "server/discover"}, None),
        ({"jsonrpc": "2.0", "id": 1.5, "method": "server/discover"}, None),
        ({"jsonrpc": "2.0", "id": True, "method": "server/discover"}, None),
        ({"jsonrpc": "2.0", "id": 8, "method": "server/discover", "extra": 1}, 8),
        ("just a string", None),
    ],
    ids=[
        "jsonrpc-1.0",
        "no-jsonrpc",
        "no-method",
        "method-not-string",
        "null-id",
        "float-id",
        "bool-id",
        "extra",
        "str",
    ],
)
def test_invalid_request(endpoint: Endpoint, body: Any, request_id: Any) -> None:
    reply = endpoint.post(body, {"MCP-Protocol-Version": V2026_07_28, "Mcp-Method": "server/discover"})
    assert_error(reply, 400, INVALID_REQUEST, request_id=request_id)


def test_params_not_an_object(endpoint: Endpoint) -> None:
    body = {"jsonrpc": "2.0", "id": "p", "method": "server/discover", "params": [1]}
    reply = endpoint.post(body, {"MCP-Protocol-Version": V2026_07_28, "Mcp-Method": "server/discover"})
    assert_error(reply, 400, INVALID_PARAMS, request_id="p")


@pytest.mark.parametrize(
    ("kwargs", "status", "code"),
    [
        ({"meta": None}, 400, INVALID_PARAMS),
        ({"headers": {"Mcp-Method": "nope"}}, 400, HEADER_MISMATCH),
        ({"version": "2099-01-01"}, 400, UNSUPPORTED_VERSION),
    ],
    ids=["meta", "header", "version"],
)
@pytest.mark.parametrize("request_id", ["req-7", 0, 2**53, "", "ü"])
def test_id_is_echoed_in_errors(
    endpoint: Endpoint, kwargs: dict[str, Any], status: int, code: int, request_id: Any
) -> None:
    reply = endpoint.call("resources/list", id=request_id, **kwargs)
    assert_error(reply, status, code, request_id=request_id)


def test_id_is_echoed_for_unknown_method(endpoint: Endpoint) -> None:
    assert_error(endpoint.call("nope/nope", id="u-1"), 404, METHOD_NOT_FOUND, request_id="u-1")


def test_lone_surrogate_id_is_echoed(endpoint: Endpoint) -> None:
    body = (
        b'{"jsonrpc":"2.0","id":"\\ud800","method":"nope/nope","params":{"_meta":'
        + json.dumps(request_meta()).encode()
        + b"}}"
    )
    reply = endpoint.post(body, {"MCP-Protocol-Version": V2026_07_28, "Mcp-Method": "nope/nope"})
    assert_error(reply, 404, METHOD_NOT_FOUND, request_id="\ud800")


def test_client_response_is_rejected(endpoint: Endpoint) -> None:
    reply = endpoint.post({"jsonrpc": "2.0", "id": 1, "result": {}}, {"MCP-Protocol-Version": V2026_07_28})
    assert reply.status == 400
    assert reply.json["error"]["code"] == INVALID_REQUEST


# Body size ----------------------------------------------------------------------------------------------


def test_body_over_limit_is_413(endpoint: Endpoint, settings: Any) -> None:
    set_mcp(settings, MAX_REQUEST_BYTES=1024)
    padding = "x" * 2048
    reply = endpoint.call("server/discover", {"padding": padding})
    assert reply.status == 413
    assert reply.json["error"]["code"] == INVALID_REQUEST
    assert endpoint.call("server/discover", {"padding": "x" * 100}).status == 200


def test_declared_length_over_limit_is_413(endpoint: Endpoint, settings: Any) -> None:
    set_mcp(settings, MAX_REQUEST_BYTES=1024)
    body = b'{"jsonrpc":"2.0","id":1,"method":"server/discover"}'
    reply = raw_request(
        endpoint.url,
        body=body,
        headers=[("Content-Type", "application/json"), ("Content-Length", "999999999")],
    )
    assert reply.status == 413


@pytest.mark.parametrize("length", ["abc", "-1", "1e3"])
def test_invalid_content_length_is_400(endpoint: Endpoint, length: str) -> None:
    reply = raw_request(endpoint.url, body=b"{}", headers=[("Content-Length", length)])
    assert reply.status == 400


# GET / DELETE -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_get_and_delete_without_session_are_405(endpoint: Endpoint, method: str) -> None:
    reply = raw_request(endpoint.url, method, headers=[("Accept", "text/event-stream")])
    assert reply.status == 405
    assert reply.headers["Allow"] == "POST, DELETE"


@pytest.mark.parametrize("method", ["PUT", "PATCH"])
def test_other_methods_are_405(endpoint: Endpoint, method: str) -> None:
    reply = raw_request(endpoint.url, method, body=b"{}", headers=[("Content-Length", "2")])
    assert reply.status == 405
    assert reply.headers["Allow"] == "POST, DELETE"


def test_get_with_a_session_is_405_under_wsgi(endpoint: Endpoint, alice_token: str) -> None:
    session, _ = endpoint.session(token=alice_token)
    headers = [("Mcp-Session-Id", session), ("Accept", "text/event-stream"), ("Authorization", f"Bearer {alice_token}")]
    reply = raw_request(endpoint.url, "GET", headers=headers)
    assert reply.status == 405


# Origin and Host ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "origin",
    ["http://evil.example", "null", "http://localhost:1", "https://localhost", "file://", "http://localhost.evil.com"],
)
def test_foreign_origin_is_403(endpoint: Endpoint, origin: str) -> None:
    reply = endpoint.call("server/discover", headers={"Origin": origin})
    assert reply.status == 403
    assert "result" not in reply.json


def test_same_origin_localhost_is_allowed(endpoint: Endpoint, live_server: Any) -> None:
    reply = endpoint.call("server/discover", headers={"Origin": live_server.url})
    assert reply.status == 200
    assert reply.result["resultType"] == "complete"


def test_no_origin_is_allowed(endpoint: Endpoint) -> None:
    assert endpoint.call("server/discover", headers={"Origin": None}).status == 200


def test_allowed_origins_setting(endpoint: Endpoint, settings: Any) -> None:
    set_mcp(settings, ALLOWED_ORIGINS=["https://app.example.com", "https://*.example.org"])
    for origin in ("https://app.example.com", "https://tools.example.org"):
        assert endpoint.call("server/discover", headers={"Origin": origin}).status == 200, origin
    for origin in ("http://app.example.com", "https://app.example.com.evil.net", "https://example.org.evil.net"):
        assert endpoint.call("server/discover", headers={"Origin": origin}).status == 403, origin


def test_origin_check_precedes_auth(endpoint: Endpoint, people: People) -> None:
    reply = endpoint.read(doc_uri(people.alice_docs[0]), headers={"Origin": "http://evil.example"})
    assert reply.status == 403


@pytest.mark.parametrize("host", ["evil.example", "evil.example:80", "127.0.0.1.nip.io"])
def test_host_not_allowed_is_400(endpoint: Endpoint, host: str) -> None:
    reply = endpoint.call("server/discover", headers={"Host": host})
    assert reply.status == 400
    assert b"resultType" not in reply.body


# Sessions of 2025-11-25 / 2025-06-18 --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("requested", "negotiated"),
    [("2025-11-25", "2025-11-25"), ("2025-06-18", "2025-06-18"), ("2024-11-05", "2025-11-25"), ("x", "2025-11-25")],
)
def test_initialize(endpoint: Endpoint, requested: str, negotiated: str, alice_token: str) -> None:
    reply = endpoint.initialize(requested, token=alice_token)
    assert reply.status == 200
    result = reply.result
    assert result["protocolVersion"] == negotiated
    assert isinstance(result["capabilities"]["resources"], dict)
    assert result["serverInfo"]["name"]
    session = reply.headers["Mcp-Session-Id"]
    # >= 128 bits of randomness: at least 22 base64url characters, visible ASCII only.
    assert re.fullmatch(r"[\x21-\x7e]{22,}", session)
    assert len(session) >= 22


def test_no_subscriptions_are_offered_where_no_stream_can_be_served(
    endpoint: Endpoint, people: People, alice_token: str
) -> None:
    """Django's handler alone (here its WSGI handler) cannot hold a stream: subscriptions are neither announced nor
    accepted (``MCPEndpoint`` serves them under ASGI, tests/test_streams.py), in both protocol eras."""
    assert endpoint.initialize(token=alice_token).result["capabilities"]["resources"] == {}
    discovered = endpoint.call("server/discover").json["result"]
    assert discovered["capabilities"]["resources"] == {}
    session, version = endpoint.session("2025-11-25", token=alice_token)
    doc = Document.objects.filter(owner=people.alice).first()
    assert doc is not None
    refused = endpoint.session_message(
        session,
        "resources/subscribe",
        params={"uri": f"learn://documents/{doc.pk}"},
        version=version,
        token=alice_token,
    )
    assert refused.status == 200
    assert refused.json["error"]["code"] == METHOD_NOT_FOUND


def test_session_ids_are_unique(endpoint: Endpoint, alice_token: str) -> None:
    ids = {endpoint.initialize(token=alice_token).headers["Mcp-Session-Id"] for _ in range(5)}
    assert len(ids) == 5


def test_initialize_without_protocol_version(endpoint: Endpoint) -> None:
    body = {"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {"capabilities": {}}}
    reply = endpoint.post(body)
    assert_error(reply, 400, INVALID_PARAMS, request_id=3)
    assert "Mcp-Session-Id" not in reply.headers


def test_session_flow(endpoint: Endpoint, people: People, alice_token: str) -> None:
    session, version = endpoint.session("2025-06-18", token=alice_token)
    assert version == "2025-06-18"
    kwargs: dict[str, Any] = {"version": version, "token": alice_token}
    notified = endpoint.session_message(session, "notifications/initialized", id=None, **kwargs)
    assert notified.status == 202
    assert notified.body == b""
    pong = endpoint.session_message(session, "ping", id="p", **kwargs)
    assert pong.status == 200
    assert pong.json == {"jsonrpc": "2.0", "id": "p", "result": {}}
    listed = endpoint.session_message(session, "resources/list", {}, **kwargs)
    assert listed.status == 200
    uris = [r["uri"] for r in listed.result["resources"]]
    assert "test://static-text" in uris
    assert doc_uri(people.alice_docs[0]) in uris
    assert doc_uri(people.bob_docs[0]) not in uris
    templates = endpoint.session_message(session, "resources/templates/list", **kwargs)
    assert "learn://documents/{id}" in [t["uriTemplate"] for t in templates.result["resourceTemplates"]]
    read = endpoint.session_message(session, "resources/read", {"uri": doc_uri(people.alice_docs[0])}, **kwargs)
    assert read.result["contents"][0]["text"] == "alice body 0"
    static = endpoint.session_message(session, "resources/read", {"uri": "test://static-text"}, **kwargs)
    assert static.result["contents"][0]["text"].startswith("This is the content")


def test_an_anonymous_session_reads_public_resources_and_is_claimed_by_its_first_token(
    endpoint: Endpoint, people: People, alice_token: str, bob_token: str
) -> None:
    """Over HTTP, one answer for both eras (issue 26): an anonymous 2025-11-25 client opens a session where things
    are protected and reads the public static resource as an anonymous 2026-07-28 client does; what needs a token is
    answered 401 with the challenge, and the same request with alice's token, on the same session, claims it. It is
    hers from then on, never anonymous again, never bob's."""
    session, _ = endpoint.session()
    read = endpoint.session_message(session, "resources/read", {"uri": "test://static-text"})
    assert read.result["contents"] == endpoint.read("test://static-text").result["contents"]
    protected = {"uri": doc_uri(people.alice_docs[0])}
    challenge = assert_challenge(endpoint.session_message(session, "resources/read", protected))
    assert 'scope="documents:read"' in challenge
    assert "resource_metadata=" in challenge
    assert_challenge(endpoint.session_message(session, "resources/list"))
    claimed = endpoint.session_message(session, "resources/read", protected, token=alice_token)
    assert claimed.result["contents"][0]["text"] == "alice body 0"
    assert endpoint.session_message(session, "ping", token=alice_token).result == {}
    assert endpoint.session_message(session, "ping").status == 404
    assert endpoint.session_message(session, "ping", token=bob_token).status == 404


def test_initialize_on_the_2026_wire_is_404(endpoint: Endpoint) -> None:
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "0"}}
    reply = endpoint.call("initialize", params)
    assert_error(reply, 404, METHOD_NOT_FOUND)
    assert "Mcp-Session-Id" not in reply.headers


def test_session_without_version_header(endpoint: Endpoint, alice_token: str) -> None:
    session, _ = endpoint.session(token=alice_token)
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    reply = endpoint.post(body, {"Mcp-Session-Id": session}, token=alice_token)
    assert reply.status == 200
    assert reply.result == {}


def test_session_version_header_mismatch(endpoint: Endpoint, alice_token: str) -> None:
    session, _ = endpoint.session("2025-11-25", token=alice_token)
    reply = endpoint.session_message(session, "ping", version="2025-06-18", token=alice_token)
    assert reply.status == 400
    assert reply.json["id"] == 1


def test_unknown_session_is_404(endpoint: Endpoint) -> None:
    for session in (secrets.token_urlsafe(32), "x", "é" * 3, "a" * 1000):
        reply = (
            endpoint.session_message(session, "ping")
            if session.isascii()
            else endpoint.post(
                {"jsonrpc": "2.0", "id": 1, "method": "ping"},
                {"Mcp-Session-Id": session.encode(), "MCP-Protocol-Version": "2025-11-25"},
            )
        )
        assert reply.status == 404, session
        assert "result" not in reply.json


def test_session_of_another_user_is_404(endpoint: Endpoint, alice_token: str, bob_token: str) -> None:
    session, _ = endpoint.session(token=alice_token)
    assert endpoint.session_message(session, "ping", token=alice_token).status == 200
    as_bob = endpoint.session_message(session, "resources/list", {}, token=bob_token)
    unknown = endpoint.session_message(secrets.token_urlsafe(32), "resources/list", {}, token=bob_token)
    assert as_bob.status == unknown.status == 404
    assert as_bob.json == unknown.json
    assert "result" not in as_bob.json
    assert endpoint.session_message(session, "ping", token=None).status == 404
    assert endpoint.session_message(session, "ping", token=alice_token).status == 200


def test_delete_ends_session(endpoint: Endpoint, alice_token: str, bob_token: str) -> None:
    session, _ = endpoint.session(token=alice_token)
    headers = [("Mcp-Session-Id", session), ("MCP-Protocol-Version", "2025-11-25")]
    by_bob = raw_request(endpoint.url, "DELETE", headers=[*headers, ("Authorization", f"Bearer {bob_token}")])
    assert by_bob.status == 404
    assert endpoint.session_message(session, "ping", token=alice_token).status == 200
    deleted = raw_request(endpoint.url, "DELETE", headers=[*headers, ("Authorization", f"Bearer {alice_token}")])
    assert 200 <= deleted.status < 300
    assert endpoint.session_message(session, "ping", token=alice_token).status == 404
    again = raw_request(endpoint.url, "DELETE", headers=[*headers, ("Authorization", f"Bearer {alice_token}")])
    assert again.status == 404


def test_session_unknown_method(endpoint: Endpoint, alice_token: str) -> None:
    session, _ = endpoint.session(token=alice_token)
    for method in ("server/discover", "tools/list"):
        reply = endpoint.session_message(session, method, {}, token=alice_token)
        assert reply.json["error"]["code"] == METHOD_NOT_FOUND
        assert reply.json["id"] == 1


# Not found ----------------------------------------------------------------------------------------------


def test_not_found_2026_07_28(endpoint: Endpoint, alice_token: str) -> None:
    uri = doc_uri(987654)
    error = assert_error(endpoint.read(uri, token=alice_token), 400, INVALID_PARAMS)
    assert error["data"]["uri"] == uri
    assert error["code"] != NOT_FOUND_2025_11_25


def test_not_found_2025_11_25(endpoint: Endpoint, alice_token: str) -> None:
    session, _ = endpoint.session(token=alice_token)
    uri = doc_uri(987654)
    reply = endpoint.session_message(session, "resources/read", {"uri": uri}, token=alice_token)
    payload = reply.json
    assert "result" not in payload
    assert payload["id"] == 1
    assert payload["error"]["code"] == NOT_FOUND_2025_11_25
    assert payload["error"]["data"]["uri"] == uri


@pytest.mark.parametrize("uri", ["test://nothing-here", "nope://x", "test://template/a/b/data"])
def test_unmatched_uri_is_not_found_never_empty(endpoint: Endpoint, uri: str) -> None:
    error = assert_error(endpoint.read(uri), 400, INVALID_PARAMS)
    assert error["data"]["uri"] == uri


@pytest.mark.parametrize("uri", ["", "no scheme", "test://a b", "x" * 5000])
def test_invalid_uri_is_invalid_params(endpoint: Endpoint, uri: str) -> None:
    reply = endpoint.read(uri)
    assert reply.status == 400
    assert reply.json["error"]["code"] in (INVALID_PARAMS, HEADER_MISMATCH)


def test_read_uri_not_a_string(endpoint: Endpoint) -> None:
    reply = endpoint.call("resources/read", {"uri": 5}, headers={"Mcp-Name": "5"})
    assert reply.status == 400
    assert reply.json["error"]["code"] in (INVALID_PARAMS, HEADER_MISMATCH)


def test_read_own_document(endpoint: Endpoint, people: People, alice_token: str) -> None:
    doc = people.alice_docs[1]
    result = endpoint.read(doc_uri(doc), token=alice_token).result
    assert result["cacheScope"] == "private"
    assert result["contents"] == [{"uri": doc_uri(doc), "mimeType": "text/plain", "text": "alice body 1"}]


@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
def test_foreign_document_is_indistinguishable_from_missing(
    endpoint: Endpoint, people: People, bob_token: str, era: str
) -> None:
    foreign = doc_uri(people.alice_docs[0])
    missing = doc_uri(max(d.pk for d in people.alice_docs + people.bob_docs) + 1000)
    if era == "2026-07-28":
        replies = [endpoint.read(uri, token=bob_token) for uri in (foreign, missing)]
    else:
        session, _ = endpoint.session(token=bob_token)
        replies = [
            endpoint.session_message(session, "resources/read", {"uri": u}, token=bob_token) for u in (foreign, missing)
        ]
    assert replies[0].status == replies[1].status
    errors = [reply.error for reply in replies]
    assert errors[0]["code"] == errors[1]["code"] == (INVALID_PARAMS if era == "2026-07-28" else NOT_FOUND_2025_11_25)
    assert errors[0]["message"] == errors[1]["message"]
    assert errors[0]["data"] == {"uri": foreign}
    assert errors[1]["data"] == {"uri": missing}
    assert set(replies[0].json) == set(replies[1].json)
    assert b"alice" not in replies[0].body


def test_soft_deleted_document_is_not_found(endpoint: Endpoint, people: People, alice_token: str) -> None:
    doc = people.alice_docs[2]
    Document.objects.filter(pk=doc.pk).update(deleted_at=timezone.now())
    assert_error(endpoint.read(doc_uri(doc), token=alice_token), 400, INVALID_PARAMS)


# Authentication -----------------------------------------------------------------------------------------


def assert_challenge(reply: Reply, status: int = 401) -> str:
    assert reply.status == status, (reply.status, reply.body)
    challenge = reply.headers["WWW-Authenticate"]
    assert challenge is not None
    assert challenge.startswith("Bearer")
    assert b"alice body" not in reply.body
    return challenge


def test_protected_read_without_token_is_401(endpoint: Endpoint, people: People) -> None:
    challenge = assert_challenge(endpoint.read(doc_uri(people.alice_docs[0])))
    assert 'scope="documents:read"' in challenge


def test_protected_read_of_missing_document_without_token_is_401(endpoint: Endpoint, people: People) -> None:
    assert_challenge(endpoint.read(doc_uri(424242)))


@pytest.mark.parametrize(
    "authorization",
    [
        [("Authorization", "Basic YWxpY2U6YWxpY2U=")],
        [("Authorization", "bearer-token")],
        [("Authorization", "Bearer tok1 tok2")],
        [("Authorization", "Bearer tok1"), ("Authorization", "Bearer tok2")],
        [("Authorization", "")],
        [("Authorization", "Bearer ")],
        [("Authorization", "Bearer")],
        [("Authorization", "Bearer " + "a" * 10_240)],
        [("Authorization", "Bearer tök€n".encode())],
        [("Authorization", "Bearer tok\x01en")],
        [("Authorization", "Bearer unknown-token-value")],
    ],
    ids=[
        "basic",
        "no-scheme",
        "two-tokens",
        "two-headers",
        "empty",
        "bearer-empty",
        "bearer-only",
        "10kB",
        "non-ascii",
        "control-char",
        "unknown",
    ],
)
@pytest.mark.parametrize("method", ["server/discover", "resources/read"])
def test_malformed_authorization_is_401(
    endpoint: Endpoint, people: People, authorization: list[tuple[str, str | bytes]], method: str
) -> None:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"_meta": request_meta()}}
    headers: list[tuple[str, str | bytes]] = [
        ("Content-Type", "application/json"),
        ("MCP-Protocol-Version", V2026_07_28),
        ("Mcp-Method", method),
        *authorization,
    ]
    if method == "resources/read":
        uri = doc_uri(people.alice_docs[0])
        body["params"]["uri"] = uri
        headers.append(("Mcp-Name", uri))
    reply = raw_request(endpoint.url, body=json.dumps(body).encode(), headers=headers)
    challenge = assert_challenge(reply)
    assert 'error="invalid_token"' in challenge


@pytest.mark.parametrize("existing", [True, False])
def test_scope_is_checked_before_existence(endpoint: Endpoint, people: People, token_for: Any, existing: bool) -> None:
    """Without the scope, a missing document and an existing one get the same 403 (no existence oracle)."""
    token = token_for(people.alice, scope="profile")
    uri = doc_uri(people.alice_docs[0] if existing else 999_999)
    challenge = assert_challenge(endpoint.read(uri, token=token), 403)
    assert 'error="insufficient_scope"' in challenge


def test_protected_static_resource(endpoint: Endpoint, people: People, token_for: Any) -> None:
    StaticResource.objects.create(
        uri="learn://handbook", name="handbook", text="secret", access="protected", required_scopes="documents:read"
    )
    assert_challenge(endpoint.read("learn://handbook"))
    assert_challenge(endpoint.read("learn://handbook", token=token_for(people.bob, scope="profile")), 403)
    result = endpoint.read("learn://handbook", token=token_for(people.bob)).result
    assert result["contents"][0]["text"] == "secret"
    assert result["cacheScope"] == "private"


def test_token_lacking_scope_is_403(endpoint: Endpoint, people: People, token_for: Any) -> None:
    token = token_for(people.alice, scope="profile")
    challenge = assert_challenge(endpoint.read(doc_uri(people.alice_docs[0]), token=token), 403)
    assert 'error="insufficient_scope"' in challenge
    assert 'scope="documents:read"' in challenge
    # The listing needs the same scope; public methods and resources still work.
    challenge = assert_challenge(endpoint.call("resources/list", token=token), 403)
    assert 'error="insufficient_scope"' in challenge
    assert endpoint.call("resources/templates/list", token=token).status == 200
    assert endpoint.read("test://static-text", token=token).status == 200


def test_expired_token_is_401(endpoint: Endpoint, people: People, token_for: Any) -> None:
    token = token_for(people.alice, expires_in=-60)
    challenge = assert_challenge(endpoint.read(doc_uri(people.alice_docs[0]), token=token))
    assert 'error="invalid_token"' in challenge
    assert_challenge(endpoint.call("server/discover", token=token))


def test_revoked_token_is_401(endpoint: Endpoint, people: People, token_for: Any) -> None:
    token = token_for(people.alice)
    uri = doc_uri(people.alice_docs[0])
    assert endpoint.read(uri, token=token).status == 200
    get_access_token_model().objects.filter(user=people.alice).delete()
    challenge = assert_challenge(endpoint.read(uri, token=token))
    assert 'error="invalid_token"' in challenge


@pytest.mark.parametrize("resource", ["http://other.example/mcp", "http://localhost:1/mcp", "http://localhost/other"])
def test_token_for_another_resource_is_401(endpoint: Endpoint, people: People, token_for: Any, resource: str) -> None:
    token = token_for(people.alice, resource=resource)
    challenge = assert_challenge(endpoint.read(doc_uri(people.alice_docs[0]), token=token))
    assert 'error="invalid_token"' in challenge


def test_token_resource_is_compared_in_canonical_form(
    endpoint: Endpoint, live_server: Any, people: People, token_for: Any
) -> None:
    """Uppercase scheme/host and a trailing slash name the same resource; any one of several resources may match."""
    upper = live_server.url.upper() + "/mcp/"
    uri = doc_uri(people.alice_docs[0])
    assert endpoint.read(uri, token=token_for(people.alice, resource=upper)).status == 200
    several = issue_access_token(
        people.alice, "documents:read", ["http://other.example/mcp", endpoint.url], 60, "tests"
    )
    assert endpoint.read(uri, token=several).status == 200


def test_token_of_inactive_user_is_401(endpoint: Endpoint, people: People, alice_token: str) -> None:
    uri = doc_uri(people.alice_docs[0])
    assert endpoint.read(uri, token=alice_token).status == 200
    type(people.alice).objects.filter(pk=people.alice.pk).update(is_active=False)
    assert_challenge(endpoint.read(uri, token=alice_token))


def test_query_string_token_is_ignored(endpoint: Endpoint, people: People, alice_token: str) -> None:
    uri = doc_uri(people.alice_docs[0])
    challenge = assert_challenge(endpoint.read(uri, query=f"?access_token={alice_token}"))
    assert "invalid_token" not in challenge
    challenge = assert_challenge(endpoint.call("resources/list", query=f"?access_token={alice_token}"))
    assert "invalid_token" not in challenge  # anonymous, not a rejected token
    assert endpoint.call("resources/list", token=alice_token).status == 200


def test_token_in_body_is_ignored(endpoint: Endpoint, people: People, alice_token: str) -> None:
    uri = doc_uri(people.alice_docs[0])
    reply = endpoint.call("resources/read", {"uri": uri, "access_token": alice_token})
    assert_challenge(reply)


# Pagination ---------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("extra")
def test_static_resources_from_code_and_admin_in_uri_order(endpoint: Endpoint) -> None:
    for letter in "ace":
        StaticResource.objects.create(uri=f"extra://static/{letter}", name=letter, text=f"admin {letter}")
    StaticResource.objects.create(uri="extra://static/g", name="g", text="disabled", enabled=False)
    result = endpoint.call("resources/list").result
    uris = [r["uri"] for r in result["resources"]]
    assert uris == [f"extra://static/{letter}" for letter in "abcdef"]
    assert "nextCursor" not in result
    assert endpoint.read("extra://static/c").result["contents"][0]["text"] == "admin c"
    assert endpoint.read("extra://static/d").result["contents"][0]["text"] == "code resource extra://static/d"
    assert_error(endpoint.read("extra://static/g"), 400, INVALID_PARAMS)


@pytest.mark.usefixtures("extra")
def test_pagination_walks_every_static_resource_once(endpoint: Endpoint, settings: Any) -> None:
    set_mcp(settings, PAGE_SIZE=2)
    for letter in "ace":
        StaticResource.objects.create(uri=f"extra://static/{letter}", name=letter, text=letter)
    items, pages = walk(endpoint, "resources/list", "resources")
    uris = [item["uri"] for item in items]
    assert uris == [f"extra://static/{letter}" for letter in "abcdef"]
    assert pages == 3


@pytest.mark.usefixtures("extra")
@pytest.mark.parametrize("page_size", [1, 2, 4])
def test_pagination_is_in_byte_order(endpoint: Endpoint, settings: Any, page_size: int) -> None:
    """Admin rows and code resources interleave in URI byte order (uppercase < lowercase < non-ASCII)."""
    set_mcp(settings, PAGE_SIZE=page_size)
    admin_uris = [f"extra://static/{suffix}" for suffix in ("é", "Z", "a", "ä/x", "~")]
    for uri in admin_uris:
        StaticResource.objects.create(uri=uri, name=uri.removeprefix("extra://static/"), text=uri[15:])
    items, _ = walk(endpoint, "resources/list", "resources")
    uris = [item["uri"] for item in items]
    expected = sorted([*admin_uris, *STATIC_CODE_URIS], key=str.encode)
    assert uris == expected
    assert endpoint.read("extra://static/ä/x").result["contents"][0]["text"] == "ä/x"


@pytest.mark.parametrize("page_size", [1, 2, 3, 5, 7, 8, 10, 50])
def test_pagination_on_the_default_registry(
    endpoint: Endpoint, settings: Any, page_size: int, people: People, alice_token: str, bob_token: str
) -> None:
    """Static resources (code, then admin rows, in URI order), then the caller's documents, then notes."""
    set_mcp(settings, PAGE_SIZE=page_size)
    StaticResource.objects.create(uri="learn://about", name="about", text="about")
    StaticResource.objects.create(uri="test://static-text", name="shadowed", text="code wins")
    StaticResource.objects.create(
        uri="learn://private", name="private", text="p", access="protected", required_scopes="documents:read"
    )
    StaticResource.objects.create(
        uri="learn://staff", name="staff", text="s", access="protected", required_scopes="staff:read"
    )
    alice_notes = [Note.objects.create(owner=people.alice, title=t, text=t) for t in ("b-note", "a-note")]
    Note.objects.create(owner=people.bob, title="bob note", text="x")
    statics = [
        "learn://about",
        "learn://private",
        "test://static-binary",
        "test://static-text",
        "test://watched-resource",
    ]
    expected = {
        alice_token: [
            *statics,
            *(doc_uri(d) for d in people.alice_docs),
            *(f"learn://notes/{n.pk}" for n in reversed(alice_notes)),
            *handbook_uris(),
        ],
        bob_token: [
            *statics,
            *(doc_uri(d) for d in people.bob_docs),
            f"learn://notes/{people.bob.notes.get().pk}",
            *handbook_uris(),
        ],
    }
    for token, uris in expected.items():
        items, pages = walk(endpoint, "resources/list", "resources", token=token)
        assert [item["uri"] for item in items] == uris
        assert pages == -(-len(uris) // page_size)
        assert all(item["name"] for item in items)


@pytest.mark.parametrize("max_bytes", [1800, 2500])
def test_pagination_bounded_by_bytes(
    endpoint: Endpoint, settings: Any, people: People, token_for: Any, max_bytes: int
) -> None:
    """Pages cut by MAX_RESPONSE_BYTES (not by count) still walk every resource exactly once, in order."""
    for i in range(12):
        Document.objects.create(owner=people.alice, title=f"Long title {i} " + "t" * 150, body="b")
    token = token_for(people.alice)
    full, _ = walk(endpoint, "resources/list", "resources", token=token)
    set_mcp(settings, MAX_RESPONSE_BYTES=max_bytes)
    items, pages = walk(endpoint, "resources/list", "resources", token=token)
    assert [item["uri"] for item in items] == [item["uri"] for item in full]
    assert pages > 1


def test_traversal_survives_deleting_the_cursor_row(
    endpoint: Endpoint, settings: Any, people: People, alice_token: str
) -> None:
    """Keyset cursors: deleting the last listed row between pages neither fails nor repeats anything."""
    set_mcp(settings, PAGE_SIZE=4)
    first = endpoint.call("resources/list", token=alice_token).result  # the three code resources + doc 0
    assert first["resources"][-1]["uri"] == doc_uri(people.alice_docs[0])
    Document.objects.filter(pk=people.alice_docs[0].pk).delete()
    rest = endpoint.call("resources/list", {"cursor": first["nextCursor"]}, token=alice_token).result
    assert [r["uri"] for r in rest["resources"]] == [doc_uri(d) for d in people.alice_docs[1:]] + handbook_uris()[:2]


@pytest.mark.parametrize("page_size", [1, 2])
def test_templates_pagination(endpoint: Endpoint, settings: Any, page_size: int) -> None:
    set_mcp(settings, PAGE_SIZE=page_size)
    items, pages = walk(endpoint, "resources/templates/list", "resourceTemplates")
    uri_templates = [t["uriTemplate"] for t in items]
    assert sorted(uri_templates) == [
        "handbook://pages/{page}",
        "learn://bookmarks/{slug}",
        "learn://documents/{id}",
        "learn://notes/{id}",
        "test://template/{id}/data",
    ]
    assert pages == -(-5 // page_size)


@pytest.mark.usefixtures("extra")
def test_templates_list_shows_discoverable_only(endpoint: Endpoint) -> None:
    result = endpoint.call("resources/templates/list").result
    names = [t["name"] for t in result["resourceTemplates"]]
    assert names == ["visible", "exploding"]
    assert all("uriTemplate" in t for t in result["resourceTemplates"])
    # A non-discoverable template is still readable.
    assert endpoint.read("extra://hidden/7").result["contents"][0]["text"] == "hidden 7"
    error = assert_error(endpoint.read("extra://visible/missing"), 400, INVALID_PARAMS)
    assert error["data"] == {"uri": "extra://visible/missing"}


def _tamper(cursor: str) -> str:
    middle = len(cursor) // 2
    replacement = "A" if cursor[middle] != "A" else "B"
    return cursor[:middle] + replacement + cursor[middle + 1 :]


@pytest.mark.parametrize("kind", ["tampered", "truncated", "appended", "garbage", "empty", "number", "object", "long"])
def test_invalid_cursor(endpoint: Endpoint, settings: Any, alice_token: str, kind: str) -> None:
    set_mcp(settings, PAGE_SIZE=1)
    cursor = first_cursor(endpoint, "resources/list", token=alice_token)
    bad: Any = {
        "tampered": _tamper(cursor),
        "truncated": cursor[:-4],
        "appended": cursor + "A",
        "garbage": "not-a-cursor",
        "empty": "",
        "number": 3,
        "object": {"pos": "a"},
        "long": "A" * 10_000,
    }[kind]
    reply = endpoint.call("resources/list", {"cursor": bad}, token=alice_token)
    error = assert_error(reply, 400, INVALID_PARAMS)
    # Every refusal says the same: the message, and data telling the client to list again without a cursor.
    assert error == {"code": INVALID_PARAMS, "message": "Invalid cursor", "data": INVALID_CURSOR_DATA}
    assert endpoint.call("resources/list", {"cursor": cursor}, token=alice_token).status == 200


@pytest.mark.usefixtures("extra")
def test_invalid_cursor_on_anonymous_listing(endpoint: Endpoint, settings: Any) -> None:
    set_mcp(settings, PAGE_SIZE=1)
    cursor = first_cursor(endpoint, "resources/list")
    error = assert_error(endpoint.call("resources/list", {"cursor": _tamper(cursor)}), 400, INVALID_PARAMS)
    assert error["message"] == "Invalid cursor"


def test_cursor_of_another_method_is_invalid(endpoint: Endpoint, settings: Any, alice_token: str) -> None:
    set_mcp(settings, PAGE_SIZE=1)
    templates_cursor = first_cursor(endpoint, "resources/templates/list", token=alice_token)
    list_cursor = first_cursor(endpoint, "resources/list", token=alice_token)
    reply = endpoint.call("resources/list", {"cursor": templates_cursor}, token=alice_token)
    assert assert_error(reply, 400, INVALID_PARAMS)["message"] == "Invalid cursor"
    reply = endpoint.call("resources/templates/list", {"cursor": list_cursor}, token=alice_token)
    assert assert_error(reply, 400, INVALID_PARAMS)["message"] == "Invalid cursor"


def test_cursor_of_another_user_is_invalid(
    endpoint: Endpoint, settings: Any, people: People, token_for: Any, alice_token: str, bob_token: str
) -> None:
    set_mcp(settings, PAGE_SIZE=1)
    cursor = first_cursor(endpoint, "resources/list", token=alice_token)
    assert endpoint.call("resources/list", {"cursor": cursor}, token=alice_token).status == 200
    # Another token of alice's with the same grant continues the traversal; bob's never does.
    assert endpoint.call("resources/list", {"cursor": cursor}, token=token_for(people.alice)).status == 200
    reply = endpoint.call("resources/list", {"cursor": cursor}, token=bob_token)
    assert assert_error(reply, 400, INVALID_PARAMS)["message"] == "Invalid cursor"
    assert_challenge(endpoint.call("resources/list", {"cursor": cursor}))
    templates_cursor = first_cursor(endpoint, "resources/templates/list", token=alice_token)
    reply = endpoint.call("resources/templates/list", {"cursor": templates_cursor}, token=bob_token)
    assert assert_error(reply, 400, INVALID_PARAMS)["message"] == "Invalid cursor"


def test_cursor_works_in_a_session(endpoint: Endpoint, settings: Any, people: People, alice_token: str) -> None:
    set_mcp(settings, PAGE_SIZE=2)
    session, _ = endpoint.session(token=alice_token)
    uris: list[str] = []
    cursor = None
    for _ in range(40):
        params = {} if cursor is None else {"cursor": cursor}
        result = endpoint.session_message(session, "resources/list", params, token=alice_token).result
        uris += [r["uri"] for r in result["resources"]]
        cursor = result.get("nextCursor")
        if cursor is None:
            break
    statics = ["test://static-binary", "test://static-text", "test://watched-resource"]
    assert uris == [*statics, *(doc_uri(d) for d in people.alice_docs), *handbook_uris()]
    reply = endpoint.session_message(session, "resources/list", {"cursor": "bogus"}, token=alice_token)
    assert reply.json["error"]["code"] == INVALID_PARAMS


# Internal errors ----------------------------------------------------------------------------------------


@pytest.mark.usefixtures("extra")
@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
def test_unexpected_exception_is_generic_internal_error(endpoint: Endpoint, era: str) -> None:
    if era == "2026-07-28":
        reply = endpoint.read("extra://boom/1", id="boom")
        assert reply.status in (200, 500)
    else:
        session, _ = endpoint.session()
        reply = endpoint.session_message(session, "resources/read", {"uri": "extra://boom/1"}, id="boom")
    payload = reply.json
    assert payload["id"] == "boom"
    assert payload["error"]["code"] == INTERNAL_ERROR
    assert "data" not in payload["error"]
    text = reply.body.decode()
    for leak in (SECRET_DETAIL, "hunter2", "RuntimeError", "Traceback", "urls_extra", 'File "'):
        assert leak not in text


@pytest.mark.usefixtures("extra")
@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
def test_an_unexpected_exception_reaches_djangos_got_request_exception(endpoint: Endpoint, era: str) -> None:
    """Error trackers (Sentry, Rollbar) listen to ``got_request_exception`` while the exception is being handled,
    as for any view that raises: they hear of the template's bug with its request, the client still gets only a
    generic -32603."""
    heard: list[tuple[str, BaseException | None]] = []

    def tracker(sender: Any, request: Any = None, **kwargs: Any) -> None:
        heard.append((request.path, sys.exc_info()[1]))

    got_request_exception.connect(tracker)
    try:
        if era == "2026-07-28":
            reply = endpoint.read("extra://boom/1", id="boom")
        else:
            session, _ = endpoint.session()
            reply = endpoint.session_message(session, "resources/read", {"uri": "extra://boom/1"}, id="boom")
    finally:
        got_request_exception.disconnect(tracker)
    assert reply.json["error"] == {"code": INTERNAL_ERROR, "message": "Internal error"}
    [(path, exc)] = heard
    assert path == "/mcp"
    assert isinstance(exc, RuntimeError)
    assert str(exc) == SECRET_DETAIL


# The middleware stack -----------------------------------------------------------------------------------


def test_mcp_answers_pass_through_the_default_middleware(endpoint: Endpoint) -> None:
    """The live server is Django's WSGI handler: the demo's own middleware acts on MCP answers too."""
    for reply in (endpoint.call("server/discover"), endpoint.call("nope/nope"), endpoint.initialize()):
        assert reply.headers["X-Content-Type-Options"] == "nosniff"  # SecurityMiddleware
        assert reply.headers["X-Frame-Options"] == "DENY"  # XFrameOptionsMiddleware


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def serve_wsgi(application: Any) -> Iterator[str]:
    """Serve a WSGI application on a free loopback port in a thread; yields its base URL."""
    server: WSGIServer = make_server("127.0.0.1", 0, application, handler_class=_QuietHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_mcp_post_passes_through_a_project_middleware_under_wsgi(
    settings: Any, people: People, make_token: Callable[..., str]
) -> None:
    """A middleware the project adds sees each MCP request and the user its token authenticated, and may change
    the answer: the deployment of ``testproject.wsgi`` (Django's WSGI handler), with no front of our own."""
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, "tests.urls_extra.RecordingMiddleware"]
    MIDDLEWARE_LOG.clear()
    application = get_wsgi_application()  # what testproject/wsgi.py serves, built with this MIDDLEWARE
    with serve_wsgi(application) as base:
        endpoint = Endpoint(base + "/mcp")
        set_mcp(settings, RESOURCE_URI=endpoint.url)
        token = make_token(people.alice, resource=endpoint.url)
        read = endpoint.read(doc_uri(people.alice_docs[0]), token=token)
        anonymous = endpoint.call("resources/list")
        session, _ = endpoint.session(token=token)
        pong = endpoint.session_message(session, "ping", token=token)
    assert read.result["contents"][0]["text"] == "alice body 0"
    assert anonymous.status == 401
    assert pong.status == 200
    for reply in (read, anonymous, pong):
        assert reply.headers["X-Recorded-By"] == "RecordingMiddleware"
    assert MIDDLEWARE_LOG == [
        {"method": "POST", "path": "/mcp", "mcp_method": "resources/read", "user": "alice", "status": 200},
        {"method": "POST", "path": "/mcp", "mcp_method": "resources/list", "user": None, "status": 401},
        {"method": "POST", "path": "/mcp", "mcp_method": None, "user": "alice", "status": 200},  # initialize
        {"method": "POST", "path": "/mcp", "mcp_method": None, "user": "alice", "status": 200},  # ping in the session
    ]
