"""The ASGI front: the MCP path in one thread hop, everything else through Django's handler."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.testing import ApplicationCommunicator
from django.core import signals
from django.core.asgi import get_asgi_application

from mcp_resources.asgi import MCPApplication, request_executor

DISCOVER = {
    "jsonrpc": "2.0",
    "id": 7,
    "method": "server/discover",
    "params": {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    },
}
MODERN_HEADERS = [
    (b"host", b"127.0.0.1"),
    (b"content-type", b"application/json"),
    (b"mcp-protocol-version", b"2026-07-28"),
    (b"mcp-method", b"server/discover"),
]


def _scope(path: str, method: str = "POST", headers: list[tuple[bytes, bytes]] | None = None) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers or [(b"host", b"127.0.0.1")],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }


async def _call(app: MCPApplication, scope: dict[str, Any], chunks: list[bytes]) -> tuple[int, dict[str, str], bytes]:
    communicator = ApplicationCommunicator(app, scope)
    for index, chunk in enumerate(chunks):
        await communicator.send_input({"type": "http.request", "body": chunk, "more_body": index < len(chunks) - 1})
    start = await communicator.receive_output(10)
    body = await communicator.receive_output(10)
    await communicator.wait(10)
    headers = {k.decode(): v.decode() for k, v in start["headers"]}
    return start["status"], headers, body["body"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def app() -> MCPApplication:
    return MCPApplication(get_asgi_application(), path="/mcp")


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_mcp_path_is_served_by_the_view(app: MCPApplication) -> None:
    status, headers, body = await _call(app, _scope("/mcp", headers=MODERN_HEADERS), [json.dumps(DISCOVER).encode()])
    assert status == 200
    assert headers["content-type"] == "application/json"
    assert int(headers["content-length"]) == len(body)
    result = json.loads(body)
    assert result["id"] == 7
    assert result["result"]["resultType"] == "complete"


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_body_arriving_in_chunks_is_reassembled(app: MCPApplication) -> None:
    raw = json.dumps(DISCOVER).encode()
    status, _, body = await _call(app, _scope("/mcp", headers=MODERN_HEADERS), [raw[:10], raw[10:40], raw[40:]])
    assert status == 200
    assert json.loads(body)["result"]["supportedVersions"][0] == "2026-07-28"


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_oversized_body_is_refused_before_the_view(app: MCPApplication, settings: Any) -> None:
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "MAX_REQUEST_BYTES": 100}
    status, _, body = await _call(app, _scope("/mcp", headers=MODERN_HEADERS), [b"x" * 60, b"x" * 60])
    assert status == 413
    assert json.loads(body)["error"]["code"] == -32600


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_other_paths_go_to_django(app: MCPApplication) -> None:
    status, _headers, body = await _call(app, _scope("/admin/login/", method="GET"), [b""])
    assert status == 200
    assert b"<form" in body


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_get_on_mcp_path_is_405(app: MCPApplication) -> None:
    status, headers, _ = await _call(app, _scope("/mcp", method="GET"), [b""])
    assert status == 405
    assert headers["allow"] == "POST, DELETE"


@pytest.fixture
def request_threads() -> Iterator[list[str]]:
    """The names of the threads in which MCP requests started (Django's request_started signal, sent there)."""
    names: list[str] = []

    def record(**kwargs: Any) -> None:
        names.append(threading.current_thread().name)

    signals.request_started.connect(record, dispatch_uid="test_asgi.request_threads")
    yield names
    signals.request_started.disconnect(dispatch_uid="test_asgi.request_threads")


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("threads", [1, 2])
async def test_requests_run_in_the_apps_own_pool_of_asgi_threads(
    settings: Any, request_threads: list[str], threads: int
) -> None:
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "ASGI_THREADS": threads}
    app = MCPApplication(get_asgi_application(), path="/mcp")
    body = json.dumps(DISCOVER).encode()
    answers = await asyncio.gather(*(_call(app, _scope("/mcp", headers=MODERN_HEADERS), [body]) for _ in range(12)))
    assert [status for status, _, _ in answers] == [200] * 12
    assert len(request_threads) == 12
    assert all(name.startswith("mcp-request") for name in request_threads), request_threads
    assert len(set(request_threads)) <= threads


def test_the_pool_is_replaced_only_when_asgi_threads_changes(settings: Any) -> None:
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "ASGI_THREADS": 3}
    pool = request_executor()
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "PAGE_SIZE": 7}
    assert request_executor() is pool
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "ASGI_THREADS": 1}
    replaced = request_executor()
    assert replaced is not pool
    assert replaced._max_workers == 1
