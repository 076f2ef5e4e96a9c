"""A client that disconnects cancels a running ``resources/list`` (``MCPApplication``, ``mcp_resources.cancellation``).

``MCPApplication`` is driven in-process as an ASGI application: ``receive`` first yields the POST body of a 2026-07-28
``resources/list`` with a valid bearer token, then waits until the test lets the client go, and yields
``http.disconnect``. Each test runs its own event loop with ``asyncio.run``; the PostgreSQL test sets
``ASGI_THREADS`` to 1, so every request's view runs in the same worker thread (and on its database connection). The
sources are real templates over a real registry; nothing under test is mocked.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
import warnings
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

import pytest
from django.contrib.auth import get_user_model
from django.core import signals
from django.core.asgi import get_asgi_application
from django.db import connection, connections
from django.db.models import QuerySet
from django.http import HttpRequest
from django.test import Client
from django.urls import path

from mcp_resources.asgi import MCPApplication, request_executor
from mcp_resources.cancellation import CancellationToken, RequestCancelled, is_cancelled, token_for
from mcp_resources.server import MCPServer
from mcp_resources.transport import MCPView
from testproject.library.models import Document
from tests.listing_support import DocumentSource, GenericSource, configure, server_for, source
from tests.stream_support import MODERN, RESOURCE, make_token, meta, scope

pytestmark = pytest.mark.django_db(transaction=True)

LIST_BODY = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "resources/list", "params": {"_meta": meta()}}).encode()
WAIT_FOR_CANCEL = 10.0  # how long the blocking source polls is_cancelled() before giving up
PROMPTLY = 5.0  # generous: only catches a view that kept working after the disconnect
SLEEP_SQL = "(SELECT 1 FROM pg_sleep(30)) = 1"  # one 30 s statement


def list_headers(token: str) -> dict[str, str]:
    return {
        "content-type": "application/json",
        "accept": "application/json",
        "mcp-protocol-version": MODERN,
        "mcp-method": "resources/list",
        "authorization": f"Bearer {token}",
    }


@pytest.fixture(autouse=True)
def mcp_settings(settings: Any) -> None:
    # A deadline far beyond the tests' bounds: what stops the work here is the disconnect, never the deadline.
    configure(settings, RESOURCE_URI=RESOURCE, LIST_DEADLINE_SECONDS=120)


@pytest.fixture
def alice(transactional_db: None) -> Any:
    return get_user_model().objects.create_user("alice")


@pytest.fixture
def token(alice: Any) -> str:
    return make_token(alice)


# The client ---------------------------------------------------------------------------------------------------


class ASGIClient:
    """The client side of one ``resources/list`` exchange: the POST body first, then ``http.disconnect`` once
    :meth:`leave` is called. Sends after the disconnect raise ``OSError``, as the ASGI spec lets a server do.
    """

    def __init__(self, token: str) -> None:
        self.scope = scope("POST", list_headers(token))
        self.body = LIST_BODY
        self.gone = asyncio.Event()
        self.disconnect_delivered = False
        self.sent: list[dict[str, Any]] = []
        self.receive_calls = 0
        self.receive_cancelled = 0

    async def receive(self) -> dict[str, Any]:
        self.receive_calls += 1
        if self.receive_calls == 1:
            return {"type": "http.request", "body": self.body, "more_body": False}
        try:
            await self.gone.wait()
        except asyncio.CancelledError:
            self.receive_cancelled += 1
            raise
        self.disconnect_delivered = True
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        if self.disconnect_delivered:
            raise OSError("the client has disconnected")
        self.sent.append(message)

    def leave(self) -> None:
        self.gone.set()

    def response(self) -> tuple[int, Any]:
        assert [m["type"] for m in self.sent] == ["http.response.start", "http.response.body"], self.sent
        return self.sent[0]["status"], json.loads(self.sent[1]["body"])


async def until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Wait (without blocking the loop) until ``condition()`` holds; fail after ``timeout`` seconds."""
    limit = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < limit, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


async def finished(task: asyncio.Task[None], timeout: float) -> float:
    """Wait for the application to return (it must not raise); return how long that took."""
    started = time.monotonic()
    await asyncio.wait({task}, timeout=timeout)
    assert task.done(), f"the application was still running {timeout}s later"
    task.result()
    return time.monotonic() - started


def no_other_tasks() -> None:
    current = asyncio.current_task()
    assert [t for t in asyncio.all_tasks() if t is not current] == []


def run(main: Callable[[], Awaitable[None]]) -> None:
    """Run ``main`` in a fresh event loop; no coroutine may be left unawaited and no resource unclosed."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asyncio.run(main())
    bad = [w for w in caught if issubclass(w.category, RuntimeWarning | ResourceWarning)]
    assert bad == [], [str(w.message) for w in bad]


# Templates ----------------------------------------------------------------------------------------------------


class Blocking(GenericSource):
    """A slow backend: ``list()`` polls ``is_cancelled()`` and returns as soon as the request is cancelled."""

    name = "blocking"
    uri_template = "learn://blocking/{id}"
    items = [("a", {"uri": "learn://blocking/a", "name": "Blocking a"})]
    wait: ClassVar[float] = WAIT_FOR_CANCEL

    def __init__(self) -> None:
        super().__init__()
        self.started = threading.Event()
        self.returned = threading.Event()
        self.saw_cancel: list[bool] = []
        self.polled_false = False

    def list(self, request: HttpRequest, *, after: str | None, limit: int, prefix: str, deadline: float) -> Any:
        self.calls.append({"after": after, "at": time.monotonic()})
        self.started.set()
        try:
            until_ = time.monotonic() + self.wait
            cancelled = False
            while time.monotonic() < until_:
                if is_cancelled(request):
                    cancelled = True
                    break
                self.polled_false = True
                time.sleep(0.01)
            self.saw_cancel.append(cancelled)
            return self.produce(after=after, limit=limit, prefix=prefix)
        finally:
            self.returned.set()


class Patient(Blocking):
    """Polls for a while and never sees a cancellation while its client stays connected."""

    wait = 0.3


class Second(GenericSource):
    name = "second"
    uri_template = "learn://second/{id}"
    items = [("b", {"uri": "learn://second/b", "name": "Second b"})]


def application(server: MCPServer) -> MCPApplication:
    return MCPApplication(get_asgi_application(), path="/mcp", server=server)


def start(app: MCPApplication, client: ASGIClient) -> asyncio.Task[None]:
    return asyncio.create_task(app(client.scope, client.receive, client.send))


# A generic source ---------------------------------------------------------------------------------------------


def test_disconnect_cancels_a_running_list_callback(token: str, caplog: pytest.LogCaptureFixture) -> None:
    server = server_for(Blocking, Second)
    blocking, second = source(server, "blocking"), source(server, "second")
    app = application(server)

    async def main() -> None:
        client = ASGIClient(token)
        task = start(app, client)
        await until(blocking.started.is_set, 10, "the first source to start")
        client.leave()
        took = await finished(task, PROMPTLY)
        assert took < PROMPTLY
        assert blocking.returned.is_set()  # the worker thread left the callback
        no_other_tasks()

    with caplog.at_level(logging.INFO, logger="mcp_resources"):
        run(main)
    assert blocking.saw_cancel == [True], "list() never saw the request cancelled"
    assert second.calls == [], "a source was called after the client had gone"
    cancelled = [r for r in caplog.records if r.name == "mcp_resources.inventory" and "cancelled" in r.getMessage()]
    assert [r.levelno for r in cancelled] == [logging.INFO]
    assert token not in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


def test_a_client_that_stays_gets_the_whole_page(token: str, caplog: pytest.LogCaptureFixture) -> None:
    server = server_for(Patient, Second)
    patient, second = source(server, "blocking"), source(server, "second")
    app = application(server)
    outcome: dict[str, Any] = {}

    async def main() -> None:
        client = ASGIClient(token)
        task = start(app, client)
        await finished(task, 10)
        outcome["response"] = client.response()
        # The application listened for a disconnect while the view ran, and stopped listening when it finished.
        outcome["listened"] = (client.receive_calls, client.receive_cancelled)
        no_other_tasks()

    with caplog.at_level(logging.INFO, logger="mcp_resources"):
        run(main)
    status, body = outcome["response"]
    assert status == 200
    assert [r["uri"] for r in body["result"]["resources"]] == ["learn://blocking/a", "learn://second/b"]
    assert patient.saw_cancel == [False]
    assert patient.polled_false
    assert len(second.calls) == 1
    assert outcome["listened"] == (2, 1)
    assert "cancelled" not in caplog.text


class Gate(GenericSource):
    """Holds its request until the test opens the gate."""

    name = "gate"
    uri_template = "learn://gate/{id}"
    items = [("g", {"uri": "learn://gate/g", "name": "Gate g"})]

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.opened = threading.Event()

    def list(self, request: HttpRequest, *, after: str | None, limit: int, prefix: str, deadline: float) -> Any:
        self.entered.set()
        self.opened.wait(WAIT_FOR_CANCEL)
        return super().list(request, after=after, limit=limit, prefix=prefix, deadline=deadline)


def test_a_request_whose_client_left_while_it_waited_for_a_thread_is_not_run(
    token: str, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "ASGI_THREADS": 1}
    server = server_for(Gate)
    gate = source(server, "gate")
    app = application(server)
    started: list[str] = []

    def record(**kwargs: Any) -> None:
        started.append(threading.current_thread().name)

    async def main() -> None:
        first, queued = ASGIClient(token), ASGIClient(token)
        first_task = start(app, first)
        await until(gate.entered.is_set, 10, "the first request to hold the only thread")
        queued_task = start(app, queued)
        await asyncio.sleep(0.05)  # the second request is now waiting for the thread
        queued.leave()
        gate.opened.set()
        await finished(first_task, 10)
        await finished(queued_task, 10)
        assert first.response()[0] == 200
        assert queued.sent == []
        no_other_tasks()

    signals.request_started.connect(record, dispatch_uid="test_cancellation.record")
    try:
        with caplog.at_level(logging.INFO, logger="mcp_resources"):
            run(main)
    finally:
        signals.request_started.disconnect(dispatch_uid="test_cancellation.record")
    assert len(gate.calls) == 1
    assert len(started) == 1, "the view ran for a client that had gone"
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


# PostgreSQL: a running statement is cancelled -----------------------------------------------------------------


class Sleepy(DocumentSource):
    """Documents behind a 30 s statement; records the worker thread and its PostgreSQL backend."""

    seen: ClassVar[list[tuple[int, int]]] = []

    def get_queryset(self, request: HttpRequest) -> QuerySet[Document]:
        record(self.seen)
        return super().get_queryset(request).extra(where=[SLEEP_SQL])


class Quick(DocumentSource):
    seen: ClassVar[list[tuple[int, int]]] = []

    def get_queryset(self, request: HttpRequest) -> QuerySet[Document]:
        record(self.seen)
        return super().get_queryset(request)


def record(seen: list[tuple[int, int]]) -> None:
    connection.ensure_connection()
    seen.append((threading.get_ident(), connection.connection.info.backend_pid))


def sleeping_backends(watcher: Any) -> list[int]:
    rows = watcher.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND state = 'active'"
        " AND query LIKE %s AND pid <> pg_backend_pid()",
        ["%pg_sleep(30)%"],
    ).fetchall()
    return [row[0] for row in rows]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="cancelling a running statement is a PostgreSQL feature")
def test_disconnect_cancels_a_running_postgresql_query(
    alice: Any,
    token: str,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    binding: str,
) -> None:
    import psycopg

    Document.objects.create(owner=alice, title="one", body="1")
    Document.objects.create(owner=alice, title="two", body="2")
    # Keep the worker thread's connection open across requests, so the next request runs on the same connection.
    monkeypatch.setitem(connections.settings["default"], "CONN_MAX_AGE", None)
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "ASGI_THREADS": 1}
    Sleepy.seen, Quick.seen = [], []
    slow_app = application(server_for(Sleepy))
    quick_app = application(server_for(Quick))
    db = connection.settings_dict
    outcome: dict[str, Any] = {}

    async def main() -> None:
        loop = asyncio.get_running_loop()
        watcher = psycopg.connect(host=db["HOST"], port=db["PORT"], user=db["USER"], dbname=db["NAME"], autocommit=True)
        try:
            client = ASGIClient(token)
            task = start(slow_app, client)
            await until(lambda: bool(sleeping_backends(watcher)), 10, "the pg_sleep query to run")
            outcome["sleeping"] = sleeping_backends(watcher)
            client.leave()
            outcome["took"] = await finished(task, 10)
            await until(lambda: not sleeping_backends(watcher), 5, "the pg_sleep query to end")
            # The next request, on the same worker thread and connection, is answered.
            following = ASGIClient(token)
            await finished(start(quick_app, following), 10)
            outcome["following"] = following.response()
            no_other_tasks()
        finally:
            watcher.close()
            await loop.run_in_executor(request_executor(), connections.close_all)

    with caplog.at_level(logging.INFO, logger="mcp_resources"):
        run(main)
    assert outcome["took"] < PROMPTLY  # not the 30 s the statement would take
    [(slow_thread, slow_pid)] = Sleepy.seen
    assert outcome["sleeping"] == [slow_pid]
    status, body = outcome["following"]
    assert status == 200
    assert len(body["result"]["resources"]) == 2
    assert Quick.seen == [(slow_thread, slow_pid)]
    assert "resources/list cancelled: the client disconnected" in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


# Without MCPApplication ---------------------------------------------------------------------------------------


class Recorder(GenericSource):
    """Records what ``is_cancelled()`` says for the requests it serves."""

    name = "recorder"
    uri_template = "learn://recorder/{id}"
    items = [("r", {"uri": "learn://recorder/r", "name": "Recorder r"})]
    answers: ClassVar[list[tuple[bool, bool]]] = []

    def list(self, request: HttpRequest, *, after: str | None, limit: int, prefix: str, deadline: float) -> Any:
        self.answers.append((is_cancelled(request), token_for(request) is None))
        return super().list(request, after=after, limit=limit, prefix=prefix, deadline=deadline)


urlpatterns = [path("mcp", MCPView.as_view(server=server_for(Recorder)))]


def test_is_cancelled_is_false_without_mcp_application(token: str, settings: Any) -> None:
    settings.ROOT_URLCONF = __name__
    Recorder.answers = []
    response = Client().post(
        "/mcp",
        LIST_BODY,
        content_type="application/json",
        headers={"MCP-Protocol-Version": MODERN, "Mcp-Method": "resources/list", "Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 200
    assert [r["uri"] for r in response.json()["result"]["resources"]] == ["learn://recorder/r"]
    assert Recorder.answers == [(False, True)]
    assert is_cancelled(HttpRequest()) is False


# The token ----------------------------------------------------------------------------------------------------


def test_hooks_run_only_while_their_block_runs() -> None:
    token = CancellationToken()
    calls: list[str] = []
    with token.on_cancel(lambda: calls.append("inner")):
        assert token.has_hooks
    assert not token.has_hooks
    with token.on_cancel(lambda: calls.append("running")):
        cancel = threading.Thread(target=token.cancel)
        cancel.start()
        cancel.join(5)
        assert token.wait(0)
    assert calls == ["running"]  # the hook of the block that had ended was not called
    with pytest.raises(RequestCancelled), token.on_cancel(lambda: calls.append("late")):
        pass
    token.run_hooks()
    assert calls == ["running"]
