"""A client that disconnects cancels its running ``resources/list`` (``mcp_resources.cancellation``).

Two fronts are driven in-process as ASGI applications:

- ``default``: the project's own ``testproject.asgi.application``. Channels' router sends ``/mcp`` to
  :class:`~mcp_resources.transport.asgi.MCPEndpoint`, which hands the request to Django's ASGI handler (middleware
  on) with the request's :class:`~mcp_resources.cancellation.CancellationToken` in its scope; Django routes it through
  ``ROOT_URLCONF`` (set here to an ``MCPView`` over the test's registry).
- ``fast``: ``MCPEndpoint(middleware=False)`` over the test's registry, the opt-in front that runs the view in one
  thread hop of the event loop's default executor.

The client's ``receive`` first yields the POST body of a 2026-07-28 ``resources/list`` with a valid bearer token,
then waits until the test lets the client go, and yields ``http.disconnect``. Each test runs its own event loop with
``asyncio.run``. The sources are real templates over a real registry; nothing under test is mocked.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import json
import logging
import threading
import time
import types
import warnings
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar

import pytest
from django.core import signals
from django.db import connection, connections
from django.db.models import QuerySet
from django.http import HttpRequest
from django.test import Client
from django.urls import path

from mcp_resources.cancellation import CancellationToken, is_cancelled, token_for
from mcp_resources.exceptions import RequestCancelled
from mcp_resources.server import MCPServer
from mcp_resources.transport import MCPEndpoint, MCPView
from testproject.library.models import Document
from tests.conftest import RESOURCE
from tests.listing_support import DocumentSource, GenericSource, configure, server_for, source
from tests.stream_support import application, meta, scope, until

pytestmark = pytest.mark.django_db(transaction=True)

LIST_BODY = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "resources/list", "params": {"_meta": meta()}}).encode()
WAIT_FOR_CANCEL = 10.0  # how long the blocking source polls is_cancelled() before giving up
PROMPTLY = 5.0  # a bound, not a measure: only catches a view that kept working after the disconnect
SLEEP_SQL = "(SELECT 1 FROM pg_sleep(30)) = 1"  # one 30 s statement
FRONTS = ["default", "fast"]


def list_headers(token: str) -> dict[str, str]:
    return {
        "content-type": "application/json",
        "accept": "application/json",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "resources/list",
        "authorization": f"Bearer {token}",
    }


@pytest.fixture(autouse=True)
def mcp_settings(settings: Any) -> None:
    # A deadline far beyond the tests' bounds: what stops the work here is the disconnect, never the deadline.
    configure(settings, RESOURCE_URI=RESOURCE, LIST_DEADLINE_SECONDS=120)


@pytest.fixture
def token(alice: Any, make_token: Callable[..., str]) -> str:
    return make_token(alice)


def default_front(settings: Any, server: MCPServer) -> Any:
    """The project's ASGI application, with ``ROOT_URLCONF`` serving ``server`` at ``/mcp``."""
    urls = types.ModuleType(f"tests.test_cancellation_urls_{id(server)}")
    urls.urlpatterns = [path("mcp", MCPView.as_view(server=server))]  # type: ignore[attr-defined]
    settings.ROOT_URLCONF = urls
    return application()


def fast_front(server: MCPServer) -> MCPEndpoint:
    """``MCPEndpoint(middleware=False)`` serving ``server`` (it takes no Django application: it serves MCP requests
    without Django's handler)."""
    return MCPEndpoint.as_asgi(middleware=False, server=server)


@pytest.fixture
def front(settings: Any, request: pytest.FixtureRequest) -> Callable[[MCPServer], Any]:
    """``front(server)``: the ASGI application serving ``server`` at ``/mcp`` in the parametrized deployment."""
    if request.param == "fast":
        return fast_front
    return functools.partial(default_front, settings)


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


async def finished(task: asyncio.Task[None], timeout: float) -> None:
    """Wait for the application to return (it must not raise); fail after ``timeout`` seconds."""
    await asyncio.wait({task}, timeout=timeout)
    assert task.done(), f"the application was still running {timeout}s later"
    task.result()


def no_other_tasks() -> None:
    current = asyncio.current_task()
    assert [t for t in asyncio.all_tasks() if t is not current] == []


def run(main: Callable[[], Awaitable[None]]) -> None:
    """Run ``main`` in a fresh event loop; no coroutine may be left unawaited and no resource unclosed."""
    gc.collect()  # what earlier tests left for the collector is not this test's (CI saw another's psycopg connection)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asyncio.run(main())
    bad = [w for w in caught if issubclass(w.category, RuntimeWarning | ResourceWarning)]
    assert bad == [], [str(w.message) for w in bad]


def start(app: Any, client: ASGIClient) -> asyncio.Task[None]:
    return asyncio.create_task(app(client.scope, client.receive, client.send))


@pytest.fixture
def started_requests() -> Iterator[list[str]]:
    """The names of the threads in which requests started (Django's ``request_started`` signal)."""
    names: list[str] = []

    def record(**kwargs: Any) -> None:
        names.append(threading.current_thread().name)

    signals.request_started.connect(record, dispatch_uid="test_cancellation.started_requests")
    yield names
    signals.request_started.disconnect(dispatch_uid="test_cancellation.started_requests")


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


# A generic source ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("front", FRONTS, indirect=True)
def test_disconnect_cancels_a_running_list_callback(
    token: str, front: Callable[[MCPServer], Any], caplog: pytest.LogCaptureFixture
) -> None:
    server = server_for(Blocking, Second)
    blocking, second = source(server, "blocking"), source(server, "second")
    app = front(server)
    client = ASGIClient(token)

    async def main() -> None:
        task = start(app, client)
        await until(blocking.started.is_set, 10, "the first source to start")
        client.leave()
        await finished(task, PROMPTLY)
        assert blocking.returned.is_set()  # the worker thread left the callback before the application returned
        no_other_tasks()

    with caplog.at_level(logging.INFO, logger="mcp_resources"):
        run(main)
    assert blocking.saw_cancel == [True], "list() never saw the request cancelled"
    assert second.calls == [], "a source was called after the client had gone"
    assert client.sent == [], "a response was sent to a client that had gone"
    cancelled = [r for r in caplog.records if r.name == "mcp_resources.listing" and "cancelled" in r.getMessage()]
    assert [r.levelno for r in cancelled] == [logging.INFO]
    assert token not in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


@pytest.mark.parametrize("front", FRONTS, indirect=True)
def test_a_client_that_stays_gets_the_whole_page(
    token: str, front: Callable[[MCPServer], Any], caplog: pytest.LogCaptureFixture
) -> None:
    server = server_for(Patient, Second)
    patient, second = source(server, "blocking"), source(server, "second")
    app = front(server)
    client = ASGIClient(token)

    async def main() -> None:
        await finished(start(app, client), 10)
        no_other_tasks()

    with caplog.at_level(logging.INFO, logger="mcp_resources"):
        run(main)
    status, body = client.response()
    assert status == 200
    assert [r["uri"] for r in body["result"]["resources"]] == ["learn://blocking/a", "learn://second/b"]
    assert patient.saw_cancel == [False]
    assert patient.polled_false
    assert len(second.calls) == 1
    # The front listened for a disconnect while the view ran (a second receive), and stopped when it finished.
    assert (client.receive_calls, client.receive_cancelled) == (2, 1)
    assert "cancelled" not in caplog.text


def test_a_client_that_left_before_its_request_ran_gets_no_work_done(
    token: str, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The default front: the disconnect is already there when Django's handler starts the request."""
    server = server_for(Gate)
    gate = source(server, "gate")
    gate.opened.set()
    app = default_front(settings, server)
    client = ASGIClient(token)
    client.leave()

    async def main() -> None:
        await finished(start(app, client), 10)
        no_other_tasks()

    with caplog.at_level(logging.INFO, logger="mcp_resources"):
        run(main)
    assert gate.calls == [], "a source was called for a client that had gone"
    assert not gate.entered.is_set()
    assert client.sent == []
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


def test_a_request_whose_client_left_while_it_waited_for_a_thread_is_not_run(
    token: str, started_requests: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    """The fast front runs views in the loop's default executor: a request queued there for a thread whose client
    leaves is never run (no ``request_started``, no source, nothing sent)."""
    server = server_for(Gate)
    gate = source(server, "gate")
    app = fast_front(server)

    async def main() -> None:
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(1, thread_name_prefix="only"))
        first, queued = ASGIClient(token), ASGIClient(token)
        first_task = start(app, first)
        await until(gate.entered.is_set, 10, "the first request to hold the only thread")
        queued_task = start(app, queued)
        # The front listens for the disconnect once the view is queued for the thread.
        await until(lambda: queued.receive_calls == 2, 10, "the second request to wait for the thread")
        queued.leave()
        await until(lambda: queued.disconnect_delivered, 10, "the disconnect to be delivered")
        gate.opened.set()
        await finished(first_task, 10)
        await finished(queued_task, 10)
        assert first.response()[0] == 200
        assert queued.sent == []
        no_other_tasks()

    with caplog.at_level(logging.INFO, logger="mcp_resources"):
        run(main)
    assert len(gate.calls) == 1
    assert len(started_requests) == 1, "the view ran for a client that had gone"
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


def backends(watcher: Any, like: str = "%") -> list[int]:
    """The other backends connected to the test database whose current (or last) query matches ``like``."""
    rows = watcher.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        " AND query LIKE %s",
        [like],
    ).fetchall()
    return sorted(row[0] for row in rows)


def sleeping_backends(watcher: Any) -> list[int]:
    rows = watcher.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND state = 'active'"
        " AND query LIKE %s AND pid <> pg_backend_pid()",
        ["%pg_sleep(30)%"],
    ).fetchall()
    return [row[0] for row in rows]


def watcher_connection() -> Any:
    import psycopg

    db = connection.settings_dict
    return psycopg.connect(host=db["HOST"], port=db["PORT"], user=db["USER"], dbname=db["NAME"], autocommit=True)


postgresql_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="cancelling a running statement is a PostgreSQL feature"
)


@postgresql_only
def test_disconnect_cancels_a_running_postgresql_query_behind_djangos_handler(
    alice: Any,
    token: str,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    binding: str,
) -> None:
    """The default front: the query stops at once, nothing is sent, and the request's connection is closed at its
    end (Django's ``request_finished``), as after any request: no connection is left behind."""
    Document.objects.create(owner=alice, title="one", body="1")
    Document.objects.create(owner=alice, title="two", body="2")
    # Django's documented setting under ASGI (persistent connections are per thread, and its handler runs each
    # request in a thread of its own): connections close at the end of each request.
    monkeypatch.setitem(connections.settings["default"], "CONN_MAX_AGE", 0)
    connection.close()
    Sleepy.seen, Quick.seen = [], []
    outcome: dict[str, Any] = {}
    slow = ASGIClient(token)

    async def main() -> None:
        watcher = watcher_connection()
        try:
            outcome["before"] = backends(watcher)
            app = default_front(settings, server_for(Sleepy))
            task = start(app, slow)
            await until(lambda: bool(sleeping_backends(watcher)), 10, "the pg_sleep query to run")
            outcome["sleeping"] = sleeping_backends(watcher)
            slow.leave()
            await finished(task, PROMPTLY)  # not the 30 s the statement would take
            await until(lambda: not sleeping_backends(watcher), 5, "the pg_sleep query to end")
            # The next request is answered.
            following = ASGIClient(token)
            await finished(start(default_front(settings, server_for(Quick)), following), 10)
            outcome["following"] = following.response()
            await until(lambda: backends(watcher) == outcome["before"], 5, "the requests' connections to close")
            no_other_tasks()
        finally:
            watcher.close()

    with caplog.at_level(logging.INFO, logger="mcp_resources"):
        run(main)
    [(_, slow_pid)] = Sleepy.seen
    assert outcome["sleeping"] == [slow_pid]
    assert slow.sent == []
    status, body = outcome["following"]
    assert status == 200
    assert len(body["result"]["resources"]) == 2
    assert slow_pid not in outcome["before"]
    assert "resources/list cancelled: the client disconnected" in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


@postgresql_only
def test_disconnect_cancels_a_running_postgresql_query_behind_the_fast_front(
    alice: Any,
    token: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    binding: str,
) -> None:
    """The fast front with persistent connections: the cancelled query leaves its connection usable, and the next
    request, on the same (only) worker thread, is answered on the same connection."""
    Document.objects.create(owner=alice, title="one", body="1")
    Document.objects.create(owner=alice, title="two", body="2")
    monkeypatch.setitem(connections.settings["default"], "CONN_MAX_AGE", None)
    Sleepy.seen, Quick.seen = [], []
    slow_app = fast_front(server_for(Sleepy))
    quick_app = fast_front(server_for(Quick))
    outcome: dict[str, Any] = {}
    slow = ASGIClient(token)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        worker = ThreadPoolExecutor(1, thread_name_prefix="only")
        loop.set_default_executor(worker)
        watcher = watcher_connection()
        try:
            task = start(slow_app, slow)
            await until(lambda: bool(sleeping_backends(watcher)), 10, "the pg_sleep query to run")
            outcome["sleeping"] = sleeping_backends(watcher)
            slow.leave()
            await finished(task, PROMPTLY)  # not the 30 s the statement would take
            await until(lambda: not sleeping_backends(watcher), 5, "the pg_sleep query to end")
            following = ASGIClient(token)
            await finished(start(quick_app, following), 10)
            outcome["following"] = following.response()
            no_other_tasks()
        finally:
            watcher.close()
            await loop.run_in_executor(worker, connections.close_all)

    with caplog.at_level(logging.INFO, logger="mcp_resources"):
        run(main)
    [(slow_thread, slow_pid)] = Sleepy.seen
    assert outcome["sleeping"] == [slow_pid]
    assert slow.sent == []
    status, body = outcome["following"]
    assert status == 200
    assert len(body["result"]["resources"]) == 2
    assert Quick.seen == [(slow_thread, slow_pid)]
    assert "resources/list cancelled: the client disconnected" in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


# Without MCPEndpoint ------------------------------------------------------------------------------------------


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


def test_is_cancelled_is_false_without_mcp_endpoint(token: str, settings: Any) -> None:
    settings.ROOT_URLCONF = __name__
    Recorder.answers = []
    response = Client().post(
        "/mcp",
        LIST_BODY,
        content_type="application/json",
        headers={
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "resources/list",
            "Authorization": f"Bearer {token}",
        },
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
