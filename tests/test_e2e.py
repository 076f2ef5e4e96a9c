"""End to end: the official MCP python SDK client against a live uvicorn server of the demo project.

The server runs as a subprocess on a free loopback port with its own fresh database (a temporary SQLite file,
or a dedicated PostgreSQL database when ``MCP_TEST_DB=postgres``), loaded with ``load_demo_data``; the tokens
come from ``manage.py mcp_token`` bound to the endpoint URL. Every protocol mode of the client is exercised:
``auto`` (discover, 2026-07-28), ``legacy`` (initialize, 2025-11-25) and the pinned ``2026-07-28``.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.types import BlobResourceContents, TextResourceContents

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
MANAGE = ROOT / "testproject" / "manage.py"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

MODES = ["auto", "legacy", "2026-07-28"]
NEGOTIATED = {"auto": "2026-07-28", "legacy": "2025-11-25", "2026-07-28": "2026-07-28"}
NOT_FOUND_CODE = {"auto": -32602, "legacy": -32002, "2026-07-28": -32602}

T = TypeVar("T")


@dataclass
class LiveMCP:
    url: str
    alice_token: str
    bob_token: str
    documents: dict[str, list[int]]
    notes: dict[str, list[int]]
    log: Path


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _manage(env: dict[str, str], *args: str) -> str:
    completed = subprocess.run(
        [sys.executable, str(MANAGE), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"manage.py {args[0]} failed:\n{completed.stdout}\n{completed.stderr}")
    return completed.stdout


@contextlib.contextmanager
def _postgres_database(name: str) -> Iterator[None]:
    import psycopg
    from psycopg import sql

    def admin() -> psycopg.Connection[Any]:
        return psycopg.connect("host=127.0.0.1 port=5432 dbname=postgres user=postgres", autocommit=True)

    with admin() as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield
    finally:
        with admin() as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path, timeout: float = 60.0) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "server/discover",
        "params": {
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            }
        },
    }
    headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"uvicorn exited with {process.returncode}:\n{log.read_text(errors='replace')}")
        try:
            response = httpx2.post(url, json=body, headers=headers, timeout=2.0)
        except httpx2.TransportError:
            time.sleep(0.1)
            continue
        if response.status_code == 200:
            return
        time.sleep(0.1)
    raise RuntimeError(f"uvicorn did not become ready:\n{log.read_text(errors='replace')}")


@pytest.fixture(scope="module")
def live_mcp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveMCP]:
    port = _free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    workdir = tmp_path_factory.mktemp("e2e")
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("MCP_TEST_DB", "PGDATABASE", "MCP_DEMO_DB", "DJANGO_SETTINGS_MODULE", "DJANGO_DEBUG")
    }
    env.update(
        DJANGO_SETTINGS_MODULE="testproject.settings",
        MCP_RESOURCE_URI=url,
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
    )
    with contextlib.ExitStack() as stack:
        if os.environ.get("MCP_TEST_DB") == "postgres":
            database = f"mcp_e2e_{os.getpid()}"
            stack.enter_context(_postgres_database(database))
            env.update(MCP_TEST_DB="postgres", PGDATABASE=database)
        else:
            env["MCP_DEMO_DB"] = str(workdir / "e2e.sqlite3")
        _manage(env, "migrate", "--verbosity", "0")
        _manage(env, "load_demo_data")
        tokens = {
            user: _manage(env, "mcp_token", "--user", user, "--scope", "documents:read", "--resource", url).strip()
            for user in ("alice", "bob")
        }
        script = (
            "import json\n"
            "from testproject.library.models import Document, Note\n"
            "ids = lambda m, u: list(m.objects.filter(owner__username=u).order_by('pk').values_list('pk', flat=True))\n"
            "print(json.dumps({u: [ids(Document, u), ids(Note, u)] for u in ('alice', 'bob')}))\n"
        )
        ids = json.loads(_manage(env, "shell", "--no-imports", "-c", script).strip().splitlines()[-1])

        log = workdir / "uvicorn.log"
        log_file = stack.enter_context(log.open("wb"))
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "testproject.asgi:application",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--log-level",
                "warning",
            ],
            cwd=ROOT,
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
        try:
            _wait_ready(url, process, log)
            yield LiveMCP(
                url=url,
                alice_token=tokens["alice"],
                bob_token=tokens["bob"],
                documents={user: pair[0] for user, pair in ids.items()},
                notes={user: pair[1] for user, pair in ids.items()},
                log=log,
            )
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=15)


def with_client(live: LiveMCP, mode: str, body: Callable[[Client], Awaitable[T]], token: str | None = None) -> T:
    """Connect the official client in ``mode`` with a bearer token and run ``body`` against it."""

    async def main() -> T:
        async with (
            httpx2.AsyncClient(
                headers={"Authorization": f"Bearer {token or live.alice_token}"},
                timeout=httpx2.Timeout(30.0, read=300.0),
                follow_redirects=True,
            ) as http,
            Client(streamable_http_client(live.url, http_client=http), mode=mode) as client,
        ):
            return await body(client)

    return anyio.run(main)


def doc_uri(pk: int) -> str:
    return f"learn://documents/{pk}"


# Tests ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_negotiated_protocol_version(live_mcp: LiveMCP, mode: str) -> None:
    async def body(client: Client) -> tuple[str, Any]:
        return client.protocol_version, client.server_capabilities.resources

    version, resources = with_client(live_mcp, mode, body)
    assert version == NEGOTIATED[mode]
    if mode != "2026-07-28":
        # A pinned client skips server/discover and knows no server capabilities.
        assert resources is not None


@pytest.mark.parametrize("mode", MODES)
def test_list_every_page(live_mcp: LiveMCP, mode: str) -> None:
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

    uris, pages, scopes = with_client(live_mcp, mode, body)
    assert len(uris) == len(set(uris)), "a resource was listed twice"
    statics = {
        "learn://about",
        "learn://logo.png",
        "test://static-text",
        "test://static-binary",
        "test://watched-resource",
    }
    assert statics <= set(uris)
    alice_docs = [doc_uri(pk) for pk in live_mcp.documents["alice"]]
    alice_notes = {f"learn://notes/{pk}" for pk in live_mcp.notes["alice"]}
    assert len(alice_docs) == 120
    # Documents are listed in their keyset order (created, id), which is creation order in the demo data.
    assert [uri for uri in uris if uri.startswith("learn://documents/")] == alice_docs
    assert {uri for uri in uris if uri.startswith("learn://notes/")} == alice_notes
    assert len(uris) == len(statics) + len(alice_docs) + len(alice_notes)
    bob_uris = {doc_uri(pk) for pk in live_mcp.documents["bob"]} | {
        f"learn://notes/{pk}" for pk in live_mcp.notes["bob"]
    }
    assert not bob_uris & set(uris)
    assert pages >= 3
    if mode != "legacy":
        assert scopes == {"private"}


@pytest.mark.parametrize("mode", MODES)
def test_list_templates(live_mcp: LiveMCP, mode: str) -> None:
    async def body(client: Client) -> list[str]:
        result = await client.list_resource_templates(cache_mode="bypass")
        assert result.next_cursor is None
        return [template.uri_template for template in result.resource_templates]

    templates = with_client(live_mcp, mode, body)
    assert "learn://documents/{id}" in templates
    assert "test://template/{id}/data" in templates


@pytest.mark.parametrize("mode", MODES)
def test_read_text_and_binary(live_mcp: LiveMCP, mode: str) -> None:
    async def body(client: Client) -> tuple[Any, Any]:
        text = await client.read_resource("test://static-text", cache_mode="bypass")
        binary = await client.read_resource("test://static-binary", cache_mode="bypass")
        return text, binary

    text, binary = with_client(live_mcp, mode, body)
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
def test_read_template_resource(live_mcp: LiveMCP, mode: str) -> None:
    async def body(client: Client) -> Any:
        return await client.read_resource("test://template/42/data", cache_mode="bypass")

    result = with_client(live_mcp, mode, body)
    content = result.contents[0]
    assert isinstance(content, TextResourceContents)
    assert json.loads(content.text)["id"] == "42"


@pytest.mark.parametrize("mode", MODES)
def test_read_own_document(live_mcp: LiveMCP, mode: str) -> None:
    first = live_mcp.documents["alice"][0]

    async def body(client: Client) -> Any:
        return await client.read_resource(doc_uri(first), cache_mode="bypass")

    result = with_client(live_mcp, mode, body)
    assert len(result.contents) == 1
    content = result.contents[0]
    assert isinstance(content, TextResourceContents)
    assert content.uri == doc_uri(first)
    assert content.text == "This is document 1 of alice."
    if mode != "legacy":
        assert result.cache_scope == "private"


@pytest.mark.parametrize("mode", MODES)
def test_not_found_is_identical_for_missing_and_foreign(live_mcp: LiveMCP, mode: str) -> None:
    all_ids = live_mcp.documents["alice"] + live_mcp.documents["bob"]
    missing = doc_uri(max(all_ids) + 10_000)
    foreign = doc_uri(live_mcp.documents["bob"][0])

    async def body(client: Client) -> list[MCPError]:
        errors = []
        for uri in (missing, foreign):
            with pytest.raises(MCPError) as info:
                await client.read_resource(uri, cache_mode="bypass")
            errors.append(info.value)
        return errors

    missing_error, foreign_error = with_client(live_mcp, mode, body)
    assert missing_error.code == foreign_error.code == NOT_FOUND_CODE[mode]
    assert missing_error.message == foreign_error.message
    assert missing_error.data == {"uri": missing}
    assert foreign_error.data == {"uri": foreign}


@pytest.mark.parametrize("mode", MODES)
def test_bob_sees_his_own_documents(live_mcp: LiveMCP, mode: str) -> None:
    bob_doc = live_mcp.documents["bob"][0]
    alice_doc = live_mcp.documents["alice"][0]

    async def body(client: Client) -> tuple[Any, MCPError]:
        own = await client.read_resource(doc_uri(bob_doc), cache_mode="bypass")
        with pytest.raises(MCPError) as info:
            await client.read_resource(doc_uri(alice_doc), cache_mode="bypass")
        return own, info.value

    own, error = with_client(live_mcp, mode, body, token=live_mcp.bob_token)
    content = own.contents[0]
    assert isinstance(content, TextResourceContents)
    assert content.text == "This is document 1 of bob."
    assert error.code == NOT_FOUND_CODE[mode]


def test_protected_read_without_token_is_401_challenge(live_mcp: LiveMCP) -> None:
    uri = doc_uri(live_mcp.documents["alice"][0])
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
        anonymous = http.post(live_mcp.url, json=body, headers=headers)
        assert anonymous.status_code == 401
        challenge = anonymous.headers["WWW-Authenticate"]
        assert challenge.startswith("Bearer")
        assert 'scope="documents:read"' in challenge
        assert "This is document" not in anonymous.text

        forged = http.post(live_mcp.url, json=body, headers={**headers, "Authorization": "Bearer forged-token"})
        assert forged.status_code == 401
        assert 'error="invalid_token"' in forged.headers["WWW-Authenticate"]

        authorized = http.post(
            live_mcp.url, json=body, headers={**headers, "Authorization": f"Bearer {live_mcp.alice_token}"}
        )
        assert authorized.status_code == 200
        assert authorized.json()["result"]["contents"][0]["text"] == "This is document 1 of alice."


def test_client_without_token_cannot_list(live_mcp: LiveMCP) -> None:
    async def main() -> None:
        async with (
            httpx2.AsyncClient(timeout=httpx2.Timeout(30.0, read=300.0)) as http,
            Client(streamable_http_client(live_mcp.url, http_client=http), mode="2026-07-28") as client,
        ):
            templates = await client.list_resource_templates(cache_mode="bypass")
            assert templates.resource_templates
            text = await client.read_resource("test://static-text", cache_mode="bypass")
            assert text.contents
            # The listing includes per-user inventories: without a token the server answers 401 (no OAuth
            # provider is configured on this client, so the SDK reports the HTTP error as an MCPError).
            with pytest.raises(MCPError):
                await client.list_resources(cache_mode="bypass")

    anyio.run(main)


def test_oversized_chunked_body_is_413(live_mcp: LiveMCP) -> None:
    """A body without Content-Length (chunked) is still bounded by MAX_REQUEST_BYTES (1 MiB by default)."""

    def chunks() -> Iterator[bytes]:
        yield b'{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"pad":"'
        for _ in range(40):
            yield b"x" * 32_768
        yield b'"}}'

    with httpx2.Client(timeout=30.0) as http:
        response = http.post(live_mcp.url, content=chunks(), headers={"Content-Type": "application/json"})
    assert response.status_code == 413


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
def test_asgi_transport_refusals(live_mcp: LiveMCP, method: str, headers: dict[str, str], status: int) -> None:
    """The same refusals through uvicorn (ASGI) as through the WSGI live server."""
    body = b'{"jsonrpc":"2.0","method":"notifications/initialized"}' if method == "POST" else None
    with httpx2.Client(timeout=30.0) as http:
        response = http.request(method, live_mcp.url, content=body, headers=headers)
    assert response.status_code == status


def test_asgi_notification_is_202(live_mcp: LiveMCP) -> None:
    with httpx2.Client(timeout=30.0) as http:
        response = http.post(live_mcp.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert response.status_code == 202
    assert response.content == b""


def test_server_log_has_no_tracebacks(live_mcp: LiveMCP) -> None:
    """Runs last in this module: nothing above made the server log an unexpected exception."""
    log = live_mcp.log.read_text(errors="replace")
    assert "Traceback" not in log
    assert "Internal Server Error" not in log
