"""Every MCP request passes through the project's middleware, streams included, under WSGI (gunicorn, its gthread
and its gevent workers) and under ASGI (uvicorn with Channels' routers and ``MCPEndpoint``, as docs/deployment.md
sets it up), unless the project opts out explicitly.

``teams_site.middleware.RequestRecorder`` (a stand-in for Sentry or OpenTelemetry, first in ``MIDDLEWARE``) writes
one line per request it sees; the official MCP Python SDK's HTTP client records one per request it sends. The two
must agree.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

import live

Sent = list[tuple[str, str | None, int]]


def run_session(server: live.Server, mode: str) -> Sent:
    """A session of the SDK (list every page, templates, a read); what it sent to the endpoint:
    ``(method, Mcp-Method header, status)`` per request."""
    sent: Sent = []

    async def record(response: httpx2.Response) -> None:
        request = response.request
        if request.url.path == "/mcp":
            sent.append((request.method, request.headers.get("mcp-method"), response.status_code))

    async def main() -> None:
        headers = {"Authorization": f"Bearer {server.token('ann')}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30, event_hooks={"response": [record]}) as http,
            Client(streamable_http_client(server.url, http_client=http), mode=mode) as client,
        ):
            cursor = None
            while True:
                page = await client.list_resources(cursor=cursor, cache_mode="bypass")
                cursor = page.next_cursor
                if cursor is None:
                    break
            await client.list_resource_templates()
            await client.read_resource("teams://about")
            if mode == "legacy":  # the SDK opens the session's GET stream in the background: wait for its answer
                with anyio.fail_after(10):
                    while not any(method == "GET" for method, _, _ in sent):
                        await anyio.sleep(0.01)

    anyio.run(main)
    return sent


def recorded(server: live.Server) -> Sent:
    return [(r["method"], r["mcp_method"], r["status"]) for r in server.recorded() if r["path"] == "/mcp"]


SERVERS = {
    "wsgi": {"kind": "gunicorn"},
    "wsgi-gevent": {"kind": "gevent"},
    "asgi": {"kind": "uvicorn"},
}


@pytest.fixture(scope="module", params=sorted(SERVERS))
def server(request: pytest.FixtureRequest, project: live.Project) -> Iterator[live.Server]:
    with live.serving(project, name=request.param, **SERVERS[request.param]) as served:
        yield served


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_every_mcp_request_passes_through_the_middleware(server: live.Server, mode: str) -> None:
    server.requests_log.unlink(missing_ok=True)
    sent = run_session(server, mode)
    seen = recorded(server)
    streams = [request for request in sent if request[0] == "GET"]
    assert len(sent) >= 4
    assert Counter(seen) == Counter(sent)
    # Under uvicorn too the middleware runs synchronously: MCPEndpoint runs Django's handler in one worker thread.
    assert {r["mode"] for r in server.recorded()} == {"sync"}
    if mode == "legacy" and server.kind == "gunicorn":
        assert streams == [("GET", None, 405)]  # a sync or gthread worker offers no stream; the middleware saw it
    if mode == "legacy" and server.kind == "gevent":
        assert streams == [("GET", None, 200)]  # the gevent worker serves the session's stream, middleware included


def test_stream_requests_pass_through_the_middleware_under_asgi(project: live.Project) -> None:
    with live.serving(project, name="asgi-streams") as server:
        sent = run_session(server, "legacy")
        assert ("GET", None, 200) in sent  # the session's stream was opened
        assert Counter(recorded(server)) == Counter(sent)


def test_opting_out_is_explicit_and_visible(project: live.Project) -> None:
    """``MCPEndpoint.as_asgi(..., middleware=False)``: the recorder sees none of the MCP requests, and still sees the
    project's other paths; so the tests above can tell the difference."""
    with live.serving(project, name="opt-out", app="teams_site.asgi_without_middleware:application") as server:
        sent = run_session(server, "2026-07-28")
        assert len(sent) >= 4
        assert recorded(server) == []
        httpx2.get(server.base + "/.well-known/oauth-protected-resource/mcp", timeout=30).raise_for_status()
        paths = [r["path"] for r in server.recorded()]
        assert paths == ["/.well-known/oauth-protected-resource/mcp"]


def test_server_logs_are_clean(project: live.Project) -> None:
    for log in project.workdir.glob("*.log"):
        output: Any = log.read_text(errors="replace")
        assert "Traceback" not in output, f"{log.name}:\n{output[-3000:]}"
