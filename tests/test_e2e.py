"""End to end: the official MCP python SDK client against live servers of the demo project, in both deployments.

- ASGI: ``demo_server``, uvicorn serving ``testproject.asgi`` (Channels' routers, ``MCPEndpoint`` at ``/mcp``,
  every MCP request but the streams through Django's ASGI handler and its middleware);
- WSGI: gunicorn serving ``testproject.wsgi`` (Django's WSGI handler, middleware on), under its ``gthread`` worker
  (no streams: a session's GET is answered 405, which the 2025-11-25 transport allows) and under its ``gevent``
  worker (with Django's pool on PostgreSQL, streams too), the deployment docs/deployment.md advises.

Both serve the same project (``demo_project``: one fresh database with ``load_demo_data``, SQLite or PostgreSQL
with ``MCP_TEST_DB=postgres``); tokens come from ``manage.py mcp_token`` bound to each server's endpoint. Every
protocol mode of the client is exercised on both: ``auto`` (discover, 2026-07-28), ``legacy`` (initialize,
2025-11-25) and the pinned ``2026-07-28``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.types import BlobResourceContents, ResourceTemplateReference, TextResourceContents

from tests import live
from tests.listing_support import handbook_uris

pytestmark = pytest.mark.e2e

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

MODES = ["auto", "legacy", "2026-07-28"]
NEGOTIATED = {"auto": "2026-07-28", "legacy": "2025-11-25", "2026-07-28": "2026-07-28"}
NOT_FOUND_CODE = {"auto": -32602, "legacy": -32002, "2026-07-28": -32602}
DEPLOYMENTS = ["asgi", "wsgi", "gevent"]

T = TypeVar("T")


@dataclass
class Demo:
    """The primary keys of the demo data's documents, notes and bookmarks, per user."""

    documents: dict[str, list[int]]
    notes: dict[str, list[int]]
    bookmarks: dict[str, list[str]]


@pytest.fixture(scope="module")
def demo(demo_project: live.Project) -> Demo:
    code = (
        "from testproject.library.models import Bookmark; import json; "
        "print(json.dumps({u: sorted(Bookmark.objects.filter(owner__username=u).values_list('slug', flat=True)) "
        "for u in ('alice', 'bob')}))"
    )
    return Demo(
        documents=demo_project.ids_by_user("Document"),
        notes=demo_project.ids_by_user("Note"),
        bookmarks=json.loads(demo_project.shell(code)),
    )


@pytest.fixture(scope="module")
def wsgi_server(demo_project: live.Project) -> Iterator[live.Server]:
    """The demo project under gunicorn (``testproject.wsgi``), on the same database as ``demo_server``."""
    server = live.Server(demo_project, name="gunicorn", kind="gunicorn", env={"MCP_LOG_LEVEL": "INFO"}).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=DEPLOYMENTS)
def server(request: pytest.FixtureRequest) -> live.Server:
    """Each deployment in turn: uvicorn (ASGI), gunicorn's gthread worker (WSGI) and its gevent worker."""
    fixture = {"asgi": "demo_server", "wsgi": "wsgi_server", "gevent": "gevent_server"}[request.param]
    result: live.Server = request.getfixturevalue(fixture)
    result.tokens("alice", "bob")  # made together, once
    return result


def with_client(
    server: live.Server,
    mode: str,
    body: Callable[[Client], Awaitable[T]],
    user: str | None = "alice",
    on_response: Callable[[httpx2.Response], Awaitable[None]] | None = None,
) -> T:
    """Connect the official client in ``mode`` with a bearer token of ``user`` (none when ``None``) and run
    ``body`` against it; ``on_response`` sees every HTTP response of the client."""

    async def main() -> T:
        headers = {"Authorization": f"Bearer {server.token(user)}"} if user else {}
        hooks = {"response": [on_response]} if on_response else {}
        async with (
            httpx2.AsyncClient(
                headers=headers,
                timeout=httpx2.Timeout(30.0, read=300.0),
                follow_redirects=True,
                event_hooks=hooks,
            ) as http,
            Client(streamable_http_client(server.url, http_client=http), mode=mode) as client,
        ):
            return await body(client)

    return anyio.run(main)


def doc_uri(pk: int) -> str:
    return f"learn://documents/{pk}"


# The SDK client, in every mode, on both deployments ---------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_negotiated_protocol_version(server: live.Server, mode: str) -> None:
    async def body(client: Client) -> tuple[str, Any]:
        return client.protocol_version, client.server_capabilities.resources

    version, resources = with_client(server, mode, body)
    assert version == NEGOTIATED[mode]
    if mode != "2026-07-28":
        # A pinned client skips server/discover and knows no server capabilities.
        assert resources is not None


@pytest.mark.parametrize("mode", MODES)
def test_list_every_page(server: live.Server, demo: Demo, mode: str) -> None:
    async def body(client: Client) -> tuple[list[str], int, set[Any]]:
        uris: list[str] = []
        pages = 0
        scopes: set[Any] = set()
        cursor: str | None = None
        while True:
            page = await client.list_resources(cursor=cursor, cache_mode="bypass")
            pages += 1
            uris.extend(resource.uri for resource in page.resources)
            scopes.add(getattr(page, "cache_scope", None))
            if page.next_cursor is None:
                return uris, pages, scopes
            cursor = page.next_cursor
            assert pages < 100

    uris, pages, scopes = with_client(server, mode, body)
    assert len(uris) == len(set(uris)), "a resource was listed twice"
    statics = {
        "learn://about",
        "learn://logo.png",
        "test://static-text",
        "test://static-binary",
        "test://watched-resource",
    }
    assert statics <= set(uris)
    alice_docs = [doc_uri(pk) for pk in demo.documents["alice"]]
    alice_notes = {f"learn://notes/{pk}" for pk in demo.notes["alice"]}
    alice_bookmarks = [f"learn://bookmarks/{slug}" for slug in demo.bookmarks["alice"]]
    assert len(alice_docs) == 120
    # Documents are listed in their keyset order (created, id), which is creation order in the demo data.
    assert [uri for uri in uris if uri.startswith("learn://documents/")] == alice_docs
    assert {uri for uri in uris if uri.startswith("learn://notes/")} == alice_notes
    # Bookmarks in slug order (ASCII slugs: byte order is the sorted order).
    assert [uri for uri in uris if uri.startswith("learn://bookmarks/")] == alice_bookmarks
    # The handbook (a repository paged by its own opaque token) comes last, in the pager's order.
    assert uris[-len(handbook_uris()) :] == handbook_uris()
    assert len(uris) == len(statics) + len(alice_docs) + len(alice_notes) + len(alice_bookmarks) + len(handbook_uris())
    bob_uris = {doc_uri(pk) for pk in demo.documents["bob"]} | {f"learn://notes/{pk}" for pk in demo.notes["bob"]}
    bob_uris |= {f"learn://bookmarks/{slug}" for slug in demo.bookmarks["bob"]}
    assert not bob_uris & set(uris)
    assert pages >= 3
    if mode != "legacy":
        assert scopes == {"private"}


@pytest.mark.parametrize("mode", MODES)
def test_list_templates(server: live.Server, mode: str) -> None:
    async def body(client: Client) -> list[str]:
        result = await client.list_resource_templates(cache_mode="bypass")
        assert result.next_cursor is None
        return [template.uri_template for template in result.resource_templates]

    templates = with_client(server, mode, body)
    assert "learn://documents/{id}" in templates
    assert "test://template/{id}/data" in templates


@pytest.mark.parametrize("mode", MODES)
def test_read_text_and_binary(server: live.Server, mode: str) -> None:
    async def body(client: Client) -> tuple[Any, Any]:
        text = await client.read_resource("test://static-text", cache_mode="bypass")
        binary = await client.read_resource("test://static-binary", cache_mode="bypass")
        return text, binary

    text, binary = with_client(server, mode, body)
    assert len(text.contents) == 1
    content = text.contents[0]
    assert isinstance(content, TextResourceContents)
    assert content.uri == "test://static-text"
    assert content.mime_type == "text/plain"
    assert content.text == "This is the content of the static text resource."
    assert len(binary.contents) == 1
    blob = binary.contents[0]
    assert isinstance(blob, BlobResourceContents)
    assert blob.mime_type == "image/png"
    assert base64.b64decode(blob.blob).startswith(PNG_SIGNATURE)
    if mode != "legacy":
        assert text.cache_scope == "public"
        assert text.ttl_ms >= 0


@pytest.mark.parametrize("mode", MODES)
def test_the_handbook_repository_and_its_cache_hint_reach_the_sdk(server: live.Server, mode: str) -> None:
    """The demo's repository source through the official client: its pages (paged by the pager's own token inside
    our cursor) and its reads, whose hint (public, 60 s) the client's cache honours in 2026-07-28: the second read
    is served from the client's cache, no request sent. A 2025-11-25 session carries no hint: both reads are sent."""
    reads: list[str] = []

    async def count(response: httpx2.Response) -> None:
        body = response.request.content
        if body and json.loads(body).get("method") == "resources/read":
            reads.append(json.loads(body)["params"]["uri"])

    async def body(client: Client) -> tuple[Any, Any]:
        first = await client.read_resource("handbook://pages/welcome")
        second = await client.read_resource("handbook://pages/welcome")
        return first, second

    first, second = with_client(server, mode, body, on_response=count)
    assert first.contents[0].text.startswith("# Welcome")
    assert second.contents[0].text == first.contents[0].text
    if mode == "legacy":
        assert reads == ["handbook://pages/welcome"] * 2  # no hint on the wire: the SDK's default, not cached
        assert (first.cache_scope, first.ttl_ms) == ("private", 0)
    else:
        assert (first.cache_scope, first.ttl_ms) == ("public", 60_000)
        assert reads == ["handbook://pages/welcome"]


@pytest.mark.parametrize("mode", MODES)
def test_read_template_resource(server: live.Server, mode: str) -> None:
    async def body(client: Client) -> Any:
        return await client.read_resource("test://template/42/data", cache_mode="bypass")

    result = with_client(server, mode, body)
    content = result.contents[0]
    assert isinstance(content, TextResourceContents)
    assert json.loads(content.text)["id"] == "42"


@pytest.mark.parametrize("mode", MODES)
def test_read_own_document(server: live.Server, demo: Demo, mode: str) -> None:
    first = demo.documents["alice"][0]

    async def body(client: Client) -> Any:
        return await client.read_resource(doc_uri(first), cache_mode="bypass")

    result = with_client(server, mode, body)
    assert len(result.contents) == 1
    content = result.contents[0]
    assert isinstance(content, TextResourceContents)
    assert content.uri == doc_uri(first)
    assert content.text == "This is document 1 of alice."
    if mode != "legacy":
        assert result.cache_scope == "private"


@pytest.mark.parametrize("mode", MODES)
def test_not_found_is_identical_for_missing_and_foreign(server: live.Server, demo: Demo, mode: str) -> None:
    all_ids = demo.documents["alice"] + demo.documents["bob"]
    missing = doc_uri(max(all_ids) + 10_000)
    foreign = doc_uri(demo.documents["bob"][0])

    async def body(client: Client) -> list[MCPError]:
        errors = []
        for uri in (missing, foreign):
            with pytest.raises(MCPError) as info:
                await client.read_resource(uri, cache_mode="bypass")
            errors.append(info.value)
        return errors

    missing_error, foreign_error = with_client(server, mode, body)
    assert missing_error.code == foreign_error.code == NOT_FOUND_CODE[mode]
    assert missing_error.message == foreign_error.message
    assert missing_error.data == {"uri": missing}
    assert foreign_error.data == {"uri": foreign}


@pytest.mark.parametrize("mode", MODES)
def test_bob_sees_his_own_documents(server: live.Server, demo: Demo, mode: str) -> None:
    bob_doc = demo.documents["bob"][0]
    alice_doc = demo.documents["alice"][0]

    async def body(client: Client) -> tuple[Any, MCPError]:
        own = await client.read_resource(doc_uri(bob_doc), cache_mode="bypass")
        with pytest.raises(MCPError) as info:
            await client.read_resource(doc_uri(alice_doc), cache_mode="bypass")
        return own, info.value

    own, error = with_client(server, mode, body, user="bob")
    content = own.contents[0]
    assert isinstance(content, TextResourceContents)
    assert content.text == "This is document 1 of bob."
    assert error.code == NOT_FOUND_CODE[mode]


BOOKMARKS = ResourceTemplateReference(type="ref/resource", uri="learn://bookmarks/{slug}")


@pytest.mark.parametrize("mode", MODES)
def test_complete_a_template_variable(server: live.Server, demo: Demo, mode: str) -> None:
    """The SDK's ``complete()``: the caller's bookmark slugs that start with the typed value, never bob's; the
    server announces the ``completions`` capability (a pinned client knows no capabilities)."""

    async def body(client: Client) -> tuple[Any, Any, Any, Any]:
        started = await client.complete(BOOKMARKS, {"name": "slug", "value": "alice-d"})
        everything = await client.complete(BOOKMARKS, {"name": "slug", "value": ""})
        foreign = await client.complete(BOOKMARKS, {"name": "slug", "value": "bob-"})
        return client.server_capabilities, started, everything, foreign

    capabilities, started, everything, foreign = with_client(server, mode, body)
    if mode != "2026-07-28":
        assert capabilities.completions is not None
    expected = [slug for slug in demo.bookmarks["alice"] if slug.startswith("alice-d")]
    assert expected
    assert started.completion.values == expected
    assert started.completion.total == len(expected)
    assert started.completion.has_more is False
    assert everything.completion.values == demo.bookmarks["alice"]
    assert foreign.completion.values == []


@pytest.mark.parametrize("mode", MODES)
def test_complete_refusals(server: live.Server, mode: str) -> None:
    """An unknown template is -32602 (invalid params), in both eras; bob completes only his own slugs."""

    async def body(client: Client) -> MCPError:
        with pytest.raises(MCPError) as info:
            await client.complete(
                ResourceTemplateReference(type="ref/resource", uri="learn://nothing/{x}"), {"name": "x", "value": ""}
            )
        return info.value

    assert with_client(server, mode, body).code == -32602

    async def bob(client: Client) -> list[str]:
        return (await client.complete(BOOKMARKS, {"name": "slug", "value": "alice"})).completion.values

    assert with_client(server, mode, bob, user="bob") == []


def test_client_without_token_cannot_list(server: live.Server) -> None:
    async def body(client: Client) -> None:
        templates = await client.list_resource_templates(cache_mode="bypass")
        assert templates.resource_templates
        text = await client.read_resource("test://static-text", cache_mode="bypass")
        assert text.contents
        # The listing includes per-user inventories: without a token the server answers 401 (no OAuth
        # provider is configured on this client, so the SDK reports the HTTP error as an MCPError).
        with pytest.raises(MCPError):
            await client.list_resources(cache_mode="bypass")
        # Completing a protected template's variable needs a caller too, as reading one of its resources does.
        with pytest.raises(MCPError):
            await client.complete(BOOKMARKS, {"name": "slug", "value": ""})

    with_client(server, "2026-07-28", body, user=None)


def test_session_stream_under_each_deployment(server: live.Server, demo: Demo) -> None:
    """A 2025-11-25 session: its GET stream opens under ASGI and under gunicorn's gevent worker; under its gthread
    worker the GET is answered 405 (the transport allows a server without that stream) and the client works on,
    with its session, over POST alone."""
    streams: list[tuple[int, str]] = []
    ended: list[int] = []

    async def record(response: httpx2.Response) -> None:
        if response.request.method == "GET":
            streams.append((response.status_code, response.headers.get("content-type", "")))
        elif response.request.method == "DELETE":
            ended.append(response.status_code)

    async def body(client: Client) -> tuple[str, list[str], str]:
        listed = await client.list_resources(cache_mode="bypass")
        read = await client.read_resource(doc_uri(demo.documents["alice"][0]), cache_mode="bypass")
        # The SDK opens the GET stream in the background after ``notifications/initialized``.
        with anyio.fail_after(20):
            while not streams:
                await anyio.sleep(0.02)
        content = read.contents[0]
        assert isinstance(content, TextResourceContents)
        return client.protocol_version, [resource.uri for resource in listed.resources], content.text

    version, uris, text = with_client(server, "legacy", body, on_response=record)
    assert version == "2025-11-25"
    assert "learn://about" in uris
    assert text == "This is document 1 of alice."
    status, content_type = streams[0]
    if server.kind in ("uvicorn", "gevent"):
        assert (status, content_type) == (200, "text/event-stream")
    else:
        assert status == 405
    assert ended == [204]  # the session existed on either deployment, and was ended by the client


# Raw HTTP, on both deployments ------------------------------------------------------------------------------


def test_protected_read_without_token_is_401_challenge(server: live.Server, demo: Demo) -> None:
    uri = doc_uri(demo.documents["alice"][0])
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "resources/read",
        "params": {
            "uri": uri,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "resources/read",
        "Mcp-Name": uri,
    }
    with httpx2.Client(timeout=30.0) as http:
        anonymous = http.post(server.url, json=body, headers=headers)
        assert anonymous.status_code == 401
        challenge = anonymous.headers["WWW-Authenticate"]
        assert challenge.startswith("Bearer")
        assert 'scope="documents:read"' in challenge
        assert f'resource_metadata="{server.base}/.well-known/oauth-protected-resource/mcp"' in challenge
        assert "This is document" not in anonymous.text

        forged = http.post(server.url, json=body, headers={**headers, "Authorization": "Bearer forged-token"})
        assert forged.status_code == 401
        assert 'error="invalid_token"' in forged.headers["WWW-Authenticate"]

        authorized = http.post(
            server.url, json=body, headers={**headers, "Authorization": f"Bearer {server.token('alice')}"}
        )
        assert authorized.status_code == 200
        assert authorized.json()["result"]["contents"][0]["text"] == "This is document 1 of alice."


def test_oversized_chunked_body_is_refused(server: live.Server) -> None:
    """A body without Content-Length (chunked) is still bounded by MAX_REQUEST_BYTES (1 MiB by default).

    Under ASGI the endpoint counts the chunks and answers 413. Django's WSGI handler reads no body without a
    Content-Length (WSGI has no chunked request bodies): the request is refused as empty, nothing was read.
    """

    def chunks() -> Iterator[bytes]:
        yield b'{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"pad":"'
        for _ in range(40):
            yield b"x" * 32_768
        yield b'"}}'

    with httpx2.Client(timeout=30.0) as http:
        response = http.post(server.url, content=chunks(), headers={"Content-Type": "application/json"})
    if server.kind == "uvicorn":
        assert response.status_code == 413
    else:
        assert response.status_code == 400
        assert response.json()["error"]["code"] == -32700  # parse error: the body Django passed on was empty


@pytest.mark.parametrize(
    ("method", "headers", "status"),
    [
        ("GET", {"Accept": "text/event-stream"}, 405),
        ("DELETE", {}, 405),
        ("POST", {"Origin": "http://evil.example"}, 403),
        ("POST", {"Host": "evil.example"}, 400),
    ],
    ids=["get", "delete", "origin", "host"],
)
def test_transport_refusals(server: live.Server, method: str, headers: dict[str, str], status: int) -> None:
    """The same refusals through uvicorn (ASGI) as through gunicorn (WSGI)."""
    body = b'{"jsonrpc":"2.0","method":"notifications/initialized"}' if method == "POST" else None
    with httpx2.Client(timeout=30.0) as http:
        response = http.request(method, server.url, content=body, headers=headers)
    assert response.status_code == status


def test_notification_is_202(server: live.Server) -> None:
    with httpx2.Client(timeout=30.0) as http:
        response = http.post(server.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert response.status_code == 202
    assert response.content == b""


def test_server_log_has_no_tracebacks(server: live.Server) -> None:
    """Runs last in this module: nothing above made either server log an unexpected exception."""
    server.assert_log_clean()
