"""Several workers, end to end: the official MCP Python SDK and the TypeScript SDK walk every page of an inventory
of 2,000+ records from two gunicorn workers (``gthread`` and ``gevent``) and from two uvicorn workers
(``uvicorn --workers 2``), each page on a new HTTP connection.

- With one ``CURSOR_KEYS`` secret shared by the workers, every page succeeds, in both of the Python SDK's modes
  (2026-07-28 and 2025-11-25 sessions) and with the TypeScript SDK (2025-11-25 sessions, shared by the workers through
  Redis; ``tests/ts/client.mjs`` sends each request with ``Connection: close``), although the pages are served by
  both workers in turn (each response names its worker: ``tests/settings_workers.py``).
- Without it (the default, a random key per process) the walk fails exactly where a page lands on the other worker,
  with ``-32602 "Invalid cursor"`` and the data telling the client to list again; and ``manage.py check --deploy``
  warns (``mcp_resources.W010``). So the walk with the key proves something.

The servers come from the ``two_workers`` fixture (``tests/conftest.py``), which other clients can walk as well.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from tests import live
from tests.conftest import CURSOR_KEY
from tests.listing_support import INVALID_CURSOR_DATA
from tests.settings_workers import CLIENT_PORT_HEADER, WORKER_HEADER

sys.path.insert(0, str(Path(__file__).resolve().parent / "ts"))
import ts_driver

pytestmark = pytest.mark.e2e

KINDS = ["gunicorn", "gevent", "uvicorn"]
MODES = {"auto": "2026-07-28", "legacy": "2025-11-25", "typescript": "2025-11-25"}
"""The clients that walk, and the protocol version each negotiates: the Python SDK's two modes, the TypeScript SDK."""
WALKS = 5
"""Walks tried until the pages of one have been served by both workers (each walk is about 41 pages)."""


@dataclass
class Page:
    """One ``resources/list`` answer as the client saw it: the worker that served it and the client's port."""

    worker: str
    client_port: str
    status: int


@dataclass
class Walk:
    """A walk through every page: the URIs listed, each page's answer, and the error that ended it, if any."""

    protocol_version: str = ""
    uris: list[str] = field(default_factory=list)
    pages: list[Page] = field(default_factory=list)
    error: MCPError | ts_driver.TSError | None = None

    @property
    def workers(self) -> list[str]:
        return [page.worker for page in self.pages]

    @property
    def hops(self) -> int:
        """How many pages were served by another worker than the page before (which sealed their cursor)."""
        return sum(1 for before, after in zip(self.workers, self.workers[1:], strict=False) if before != after)


def walk(server: live.Server, mode: str, token: str) -> Walk:
    """The client of ``mode`` lists every page, each request on a new connection (no keep-alive)."""
    if mode == "typescript":
        return ts_walk(server, token)
    result = Walk()

    async def record(response: httpx2.Response) -> None:
        request = response.request
        if request.method == "POST" and json.loads(request.content or b"{}").get("method") == "resources/list":
            headers = response.headers
            result.pages.append(
                Page(headers.get(WORKER_HEADER, ""), headers.get(CLIENT_PORT_HEADER, ""), response.status_code)
            )

    async def main() -> None:
        async with (
            httpx2.AsyncClient(
                headers={"Authorization": f"Bearer {token}", "Connection": "close"},
                limits=httpx2.Limits(max_keepalive_connections=0),
                timeout=httpx2.Timeout(30.0, read=120.0),
                event_hooks={"response": [record]},
            ) as http,
            Client(streamable_http_client(server.url, http_client=http), mode=mode) as client,
        ):
            result.protocol_version = client.protocol_version
            cursor = None
            while True:
                try:
                    page = await client.list_resources(cursor=cursor)
                except MCPError as exc:
                    result.error = exc
                    return
                result.uris.extend(resource.uri for resource in page.resources)
                if page.next_cursor is None:
                    return
                cursor = page.next_cursor

    anyio.run(main)
    return result


def ts_walk(server: live.Server, token: str) -> Walk:
    """The TypeScript SDK lists every page (``list_all``: one client, one session), each request with ``Connection:
    close``; skipped without Node and the SDK (``make ts-install``), except under ``CI``."""
    ts_driver.require_node()
    result = Walk()
    with ts_driver.TSClient() as client:
        session = client.call(
            "connect",
            url=server.url,
            token=token,
            connection_close=True,
            record_headers=[WORKER_HEADER, CLIENT_PORT_HEADER],
        )
        result.protocol_version = session["protocolVersion"]
        try:
            listing = client.call("list_all", timeout=300)
        except ts_driver.TSError as exc:
            result.error = exc
        else:
            result.uris = [resource["uri"] for resource in listing["resources"]]
        for noted in client.call("listings")["listings"]:
            headers = noted["headers"]
            result.pages.append(Page(headers[WORKER_HEADER] or "", headers[CLIENT_PORT_HEADER] or "", noted["status"]))
    return result


@pytest.fixture(scope="module")
def inventory(workers_project: live.Project) -> list[str]:
    """The URIs of alice's records, which every complete walk lists (after the static resources)."""
    documents = [f"learn://documents/{pk}" for pk in workers_project.ids("Document", "alice")]
    notes = [f"learn://notes/{pk}" for pk in workers_project.ids("Note", "alice")]
    assert len(documents) + len(notes) >= 2000
    return documents + notes


def records(uris: list[str]) -> list[str]:
    return [uri for uri in uris if uri.startswith(("learn://documents/", "learn://notes/"))]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", KINDS)
def test_every_page_succeeds_with_a_shared_cursor_key(
    two_workers: Callable[..., live.Server], inventory: list[str], kind: str, mode: str
) -> None:
    server = two_workers(kind, keyed=True)
    token = server.token("alice")
    walks = []
    for _ in range(WALKS):
        result = walk(server, mode, token)
        assert result.error is None, (result.error, result.workers)
        assert result.protocol_version == MODES[mode]
        # Every record once, in order, none of bob's.
        assert records(result.uris) == inventory
        assert len(result.uris) == len(set(result.uris))
        assert len(result.pages) >= 41
        assert {page.status for page in result.pages} == {200}
        # Every page came on a new connection: each from another client port than the page before (a kept-alive
        # connection would repeat it). The kernel may hand a closed connection's port to a later one, so ports need
        # not be unique over the whole walk (CI once saw 39 ports for 41 pages).
        ports = [page.client_port for page in result.pages]
        assert all(ports)
        assert all(before != after for before, after in itertools.pairwise(ports)), ports
        walks.append(result)
        if result.hops:
            break
    # The pages were served by both workers, a cursor sealed by one opened by the other.
    assert any(result.hops for result in walks), [result.workers for result in walks]
    assert len({worker for result in walks for worker in result.workers}) == 2
    server.assert_log_clean()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", KINDS)
def test_without_cursor_keys_the_walk_fails_on_the_other_worker(
    two_workers: Callable[..., live.Server], inventory: list[str], kind: str, mode: str
) -> None:
    server = two_workers(kind, keyed=False)
    token = server.token("alice")
    failed = []
    for _ in range(WALKS):
        result = walk(server, mode, token)
        if result.error is None:
            # Only a walk whose every page one worker served can end: then it is complete.
            assert len(set(result.workers)) == 1, result.workers
            assert records(result.uris) == inventory
            continue
        # The walk failed on the first page served by the other worker, which cannot open the first one's cursors.
        workers = result.workers
        assert len(set(workers[:-1])) == 1, workers
        assert workers[-1] != workers[0], workers
        assert result.error.code == -32602
        # The TypeScript SDK's McpError prefixes the JSON-RPC message with the code.
        assert result.error.message.removeprefix("MCP error -32602: ") == "Invalid cursor"
        assert result.error.data == INVALID_CURSOR_DATA
        failed.append(result)
        break
    assert failed, f"no walk of {WALKS} reached the second worker"
    server.assert_log_clean()


def check_deploy(project: live.Project, **env: str) -> str:
    """The output of ``manage.py check --deploy`` in ``project``'s environment with ``env``."""
    completed = subprocess.run(
        [sys.executable, str(live.MANAGE), "check", "--deploy"],
        cwd=live.ROOT,
        env={**project.env, **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return completed.stdout + completed.stderr


def test_the_deploy_check_warns_without_cursor_keys(workers_project: live.Project) -> None:
    # The deployment the walks above ran: Redis shares the sessions and the notifications (no W011, W012).
    unkeyed = check_deploy(workers_project)
    assert "mcp_resources.W010" in unkeyed
    assert "mcp_resources.W011" not in unkeyed
    assert "mcp_resources.W012" not in unkeyed
    keyed = check_deploy(workers_project, MCP_CURSOR_KEYS=CURSOR_KEY)
    assert "mcp_resources." not in keyed
