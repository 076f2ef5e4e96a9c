"""Fan-out across processes through Redis (a Redis stream as the log), and the Redis log under a stream's keep-alives.

Two uvicorn processes of the demo project (``testproject.asgi``), A (``demo_server``) and B, share one Redis
(``MCP_REDIS_URL``: the log of change notifications and 2025-11-25 sessions, in a Redis database of this module's
own) and one database (this module's ``demo_project``: SQLite, or PostgreSQL with ``MCP_TEST_DB=postgres``). Each
process has its own canonical resource URI, so each gets its own tokens. Changes
are made outside both servers, as a worker or a shell would make them: ``manage.py shell -c`` for a document, and
the test process itself (the ORM on the shared database, with its log pointed at the same Redis) for an admin
``StaticResource`` row.

Nothing waits for a message that must not arrive: a stream delivers the log's events in the order they were
published, so a message published after a change (a marker) proves that nothing the change caused is still on its
way. The in-process tests at the end drive the project's ASGI application (``testproject.asgi``) on the Redis log.

Without Redis on 127.0.0.1:6379 the module is skipped; with env ``CI`` set it fails instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import logging
import queue
import secrets
import signal
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from mcp_resources.protocol.versions import V2025_11_25, V2026_07_28
from tests import live
from tests.stream_support import (
    ACKNOWLEDGED,
    EVENT_ID,
    RESOURCE,
    SUBSCRIPTION_ID,
    Exchange,
    application,
    final_result,
    in_thread,
    list_changed,
    listen_body,
    listen_headers,
    meta,
    scope,
    updated,
)

pytestmark = pytest.mark.e2e

MARKER = "test://static-text"  # a public resource of the demo: a marker every caller may subscribe to


# Processes -------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo_project(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[live.Project]:
    """The demo project (alice 4 documents, bob 3, a note each) on this module's Redis database; both servers
    serve it."""
    demo_data = ("--alice", "4", "--bob", "3", "--notes", "1")
    with live.project(tmp_path_factory.mktemp("fanout"), redis_url=redis_url, demo_data=demo_data) as project:
        yield project


@pytest.fixture(scope="module")
def server_b(demo_project: live.Project) -> Iterator[live.Server]:
    server = live.Server(demo_project, name="uvicorn-B", env={"MCP_LOG_LEVEL": "INFO"}).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def cluster(demo_server: live.Server, server_b: live.Server) -> Iterator[tuple[live.Server, live.Server]]:
    """Servers A (``demo_server``) and B on one database and one Redis; their logs must stay clean."""
    for server in (demo_server, server_b):
        server.tokens("alice", "bob")
    yield demo_server, server_b
    for server in (demo_server, server_b):
        server.assert_log_clean()


@pytest.fixture(scope="module")
def documents(demo_project: live.Project) -> dict[str, list[int]]:
    return demo_project.ids_by_user("Document")


def touch(project: live.Project, *pks: int) -> None:
    """Save each document (one commit each, in this order) in a separate process."""
    project.shell(
        "from testproject.library.models import Document\n"
        f"for pk in {list(pks)!r}:\n"
        "    d = Document.objects.get(pk=pk); d.body += '!'; d.save()\n"
        "print('ok')"
    )


# An SSE client over a real socket -------------------------------------------------------------------------------------


class SSE:
    """One HTTP request whose response is read on a thread; events (JSON) land in a queue, in arrival order."""

    def __init__(self, url: str, method: str, headers: dict[str, str], body: bytes = b"") -> None:
        host, port = url.split("/")[2].split(":")
        self.conn = http.client.HTTPConnection(host, int(port), timeout=60)
        self.conn.request(method, "/" + url.split("/", 3)[3], body=body or None, headers=headers)
        self.response = self.conn.getresponse()
        self.status = self.response.status
        self.headers = {k.lower(): v for k, v in self.response.getheaders()}
        self.messages: queue.Queue[Any] = queue.Queue()
        self.seen: list[Any] = []
        self.event_ids: list[str] = []
        self.ack: Any = None
        self.closed = threading.Event()
        if self.headers.get("content-type", "").startswith("text/event-stream"):
            threading.Thread(target=self._read, daemon=True).start()
            self.body = b""
        else:
            self.body = self.response.read()
            self.closed.set()

    def _read(self) -> None:
        data: list[str] = []
        try:
            while True:
                # The response's own readline decodes the chunked body and ends with it (the connection stays open).
                raw = self.response.readline()
                if not raw:
                    break
                line = raw.decode("utf-8").rstrip("\r\n")
                if line == "":
                    if data:
                        message = json.loads("\n".join(data))
                        (message.get("params") or {}).get("_meta", {}).pop(EVENT_ID, None)  # compared without it
                        self.seen.append(message)
                        self.messages.put(message)
                    data = []
                elif line.startswith("data: "):
                    data.append(line[6:])
                elif line.startswith("id: "):
                    self.event_ids.append(line[4:])
        except (OSError, ValueError, http.client.HTTPException):
            pass
        finally:
            self.closed.set()
            self.messages.put(None)

    def next(self, timeout: float = 30) -> Any:
        try:
            message = self.messages.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no message within {timeout}s (received so far: {self.seen})") from None
        if message is None:
            self.messages.put(None)
            raise EOFError("the stream closed")
        return message

    def close(self) -> None:
        """Cut the connection; the reading thread ends before the response is closed under it."""
        with contextlib.suppress(OSError):
            self.conn.sock and self.conn.sock.shutdown(socket.SHUT_RDWR)
        self.closed.wait(10)
        self.conn.close()


def listen(server: live.Server, user: str, request_id: Any, notifications: dict[str, Any]) -> SSE:
    """A ``subscriptions/listen`` stream of ``user`` on ``server``, read up to its acknowledgement."""
    stream = SSE(server.url, "POST", listen_headers(server.token(user)), listen_body(request_id, notifications))
    assert stream.status == 200, stream.body
    ack = stream.next()
    assert ack["method"] == ACKNOWLEDGED
    assert ack["params"]["_meta"] == {SUBSCRIPTION_ID: request_id}
    stream.ack = ack
    return stream


def post(server: live.Server, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, str], Any]:
    reply = SSE(server.url, "POST", {"content-type": "application/json", **headers}, json.dumps(body).encode())
    return reply.status, reply.headers, json.loads(reply.body) if reply.body else None


def doc_uri(pk: int) -> str:
    return f"learn://documents/{pk}"


# Across processes ---------------------------------------------------------------------------------------------------


def test_a_listener_resumes_on_the_other_process_with_its_last_event_id(
    cluster: tuple[live.Server, live.Server], demo_project: live.Project, documents: dict[str, list[int]]
) -> None:
    """The worker a client listened on goes away (a deploy, a crash): the client listens on the other with the id
    of the last notification it received, and receives what it missed meanwhile, from the shared log."""
    a, b = cluster
    first, second = documents["alice"][0], documents["alice"][1]
    wanted = {"resourceSubscriptions": [doc_uri(first), doc_uri(second)]}
    on_a = listen(a, "alice", "resume-a", wanted)
    try:
        touch(demo_project, first)
        assert on_a.next() == updated(doc_uri(first), "resume-a")
        last_seen = on_a.event_ids[-1]
    finally:
        on_a.close()
    touch(demo_project, second)  # while the client is away
    body = json.loads(listen_body("resume-b", wanted))
    body["params"]["_meta"][EVENT_ID] = last_seen
    on_b = SSE(b.url, "POST", listen_headers(b.token("alice")), json.dumps(body).encode())
    try:
        assert on_b.status == 200
        assert on_b.next()["method"] == ACKNOWLEDGED
        assert on_b.next() == updated(doc_uri(second), "resume-b")
    finally:
        on_b.close()


def test_a_change_made_elsewhere_reaches_listeners_on_both_processes(
    cluster: tuple[live.Server, live.Server], demo_project: live.Project, documents: dict[str, list[int]]
) -> None:
    a, b = cluster
    target, other = documents["alice"][0], documents["alice"][1]
    on_b = listen(b, "alice", "on-b", {"resourceSubscriptions": [doc_uri(target)]})
    on_a = listen(a, "alice", 1, {"resourceSubscriptions": [doc_uri(target)]})
    try:
        assert on_b.ack["params"]["notifications"]["resourceSubscriptions"] == [doc_uri(target)]
        touch(demo_project, other, target)  # ``other`` is not subscribed: had it come, it would come first
        assert on_b.next() == updated(doc_uri(target), "on-b")
        assert on_a.next() == updated(doc_uri(target), 1)
    finally:
        on_a.close()
        on_b.close()


def test_a_process_that_starts_announces_no_list_change(
    cluster: tuple[live.Server, live.Server], demo_project: live.Project, documents: dict[str, list[int]]
) -> None:
    """Every process of the project registers the same code resources while it starts (autodiscovery): a worker or
    a ``manage.py`` command starting is no change of anyone's list."""
    _, b = cluster
    marker = documents["alice"][3]
    stream = listen(b, "alice", "quiet", {"resourcesListChanged": True, "resourceSubscriptions": [doc_uri(marker)]})
    try:
        assert demo_project.shell("from mcp_resources import registry; print(len(list(registry.iter_resources())))")
        touch(demo_project, marker)  # another process starting, then the marker
        assert stream.next() == updated(doc_uri(marker), "quiet")
        assert stream.seen == [stream.ack, updated(doc_uri(marker), "quiet")]
    finally:
        stream.close()


def test_a_static_resource_saved_by_the_test_process_is_a_list_change_on_b(
    cluster: tuple[live.Server, live.Server],
    demo_project: live.Project,
    documents: dict[str, list[int]],
    redis_url: str,
    settings: Any,
    django_db_blocker: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from django.db import connections

    from mcp_resources.models import StaticResource

    _, b = cluster
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "DELIVERY_URL": redis_url}
    alias = f"fanout_{secrets.token_hex(3)}"
    connections.settings[alias] = {**connections.settings["default"], **demo_project.database, "TEST": {}}
    uri = f"app://fanout-{secrets.token_hex(4)}"
    marker = doc_uri(documents["alice"][3])
    # ``uri`` does not exist yet: not honoured. The marker (a document of alice's) ends the sequence below.
    stream = listen(b, "alice", "lists", {"resourcesListChanged": True, "resourceSubscriptions": [uri, marker]})
    assert stream.ack["params"]["notifications"] == {"resourcesListChanged": True, "resourceSubscriptions": [marker]}
    subscribed = None
    try:
        with django_db_blocker.unblock():
            row = StaticResource.objects.using(alias).create(uri=uri, name="fanout", text="v1")
            assert stream.next() == list_changed("lists")
            status, _, listing = post(
                b,
                {"jsonrpc": "2.0", "id": 2, "method": "resources/list", "params": {"_meta": meta()}},
                {
                    "mcp-protocol-version": V2026_07_28,
                    "mcp-method": "resources/list",
                    "authorization": f"Bearer {b.token('alice')}",
                },
            )
            assert status == 200
            assert uri in [r["uri"] for r in listing["result"]["resources"]]
            # Subscribed to the row (it exists now): an edit is a list change, then an update.
            subscribed = listen(b, "alice", "row", {"resourceSubscriptions": [uri], "resourcesListChanged": True})
            assert subscribed.ack["params"]["notifications"]["resourceSubscriptions"] == [uri]
            row.text = "v2"
            row.save(using=alias)
            assert subscribed.next() == list_changed("row")
            assert subscribed.next() == updated(uri, "row")
            assert stream.next() == list_changed("lists")
            # Deleted: the row can no longer be read, so its update (published after the list change) is withheld.
            row.delete()
            assert subscribed.next() == list_changed("row")
            assert stream.next() == list_changed("lists")
        touch(demo_project, documents["alice"][3])
        assert stream.next() == updated(marker, "lists")
        # One list change per change of the row, nothing else: the marker came right after them.
        assert stream.seen == [stream.ack, *[list_changed("lists")] * 3, updated(marker, "lists")]
    finally:
        stream.close()
        if subscribed is not None:
            subscribed.close()
        connections[alias].close()
        del connections.settings[alias]


def test_bob_never_receives_anything_about_alices_documents(
    cluster: tuple[live.Server, live.Server], demo_project: live.Project, documents: dict[str, list[int]]
) -> None:
    a, b = cluster
    alice_docs, bob_docs = documents["alice"], documents["bob"]
    asked = [doc_uri(pk) for pk in alice_docs] + [doc_uri(bob_docs[0])]
    bob_b = listen(b, "bob", "bob", {"resourceSubscriptions": asked})
    assert bob_b.ack["params"]["notifications"]["resourceSubscriptions"] == [doc_uri(bob_docs[0])]
    alice_a = listen(a, "alice", "alice", {"resourceSubscriptions": asked})
    assert alice_a.ack["params"]["notifications"]["resourceSubscriptions"] == [doc_uri(pk) for pk in alice_docs]
    # A session of bob's on A, subscribing to alice's document: refused; to his own: accepted.
    session = open_session(a, "bob")
    get = SSE(a.url, "GET", session_headers(a, "bob", session))
    try:
        assert get.status == 200
        status, payload = session_call(a, "bob", session, "resources/subscribe", uri=doc_uri(alice_docs[0]))
        assert payload["error"]["code"] == -32002
        status, payload = session_call(a, "bob", session, "resources/subscribe", uri=doc_uri(bob_docs[0]))
        assert (status, payload["result"]) == (200, {})
        touch(demo_project, *alice_docs)
        assert alice_a.next() == updated(doc_uri(alice_docs[0]), "alice")
        touch(demo_project, bob_docs[0])  # the marker: whatever alice's changes sent bob came before it
        assert bob_b.next() == updated(doc_uri(bob_docs[0]), "bob")
        assert get.next() == updated(doc_uri(bob_docs[0]))
        assert bob_b.seen == [bob_b.ack, updated(doc_uri(bob_docs[0]), "bob")]
        assert get.seen == [updated(doc_uri(bob_docs[0]))]
    finally:
        for stream in (bob_b, alice_a, get):
            stream.close()


# Sessions (2025-11-25) across processes -------------------------------------------------------------------------------


def session_headers(server: live.Server, user: str, session: str | None = None) -> dict[str, str]:
    headers = {
        "mcp-protocol-version": V2025_11_25,
        "authorization": f"Bearer {server.token(user)}",
        "accept": "text/event-stream",
    }
    if session:
        headers["mcp-session-id"] = session
    return headers


def open_session(server: live.Server, user: str) -> str:
    body = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": V2025_11_25,
            "capabilities": {},
            "clientInfo": {"name": "pytest", "version": "0"},
        },
    }
    status, headers, payload = post(server, body, {"authorization": f"Bearer {server.token(user)}"})
    assert status == 200, payload
    return headers["mcp-session-id"]


def session_call(server: live.Server, user: str, session: str, method: str, **params: Any) -> tuple[int, Any]:
    body = {"jsonrpc": "2.0", "id": 5, "method": method, "params": params}
    status, _, payload = post(server, body, session_headers(server, user, session))
    return status, payload


def test_a_session_made_on_a_streams_on_b(
    cluster: tuple[live.Server, live.Server], demo_project: live.Project, documents: dict[str, list[int]]
) -> None:
    """The session lives in the shared cache; ``resources/subscribe`` on A reaches the GET stream on B."""
    a, b = cluster
    doc = documents["alice"][2]
    session = open_session(a, "alice")
    # The response starts once the stream has joined its session's group: a subscribe made after it reaches it.
    stream = SSE(b.url, "GET", session_headers(b, "alice", session))
    takeover = None
    try:
        assert stream.status == 200
        assert stream.headers["mcp-session-id"] == session
        assert session_call(a, "alice", session, "resources/subscribe", uri=doc_uri(doc))[0] == 200
        touch(demo_project, doc)
        assert stream.next() == updated(doc_uri(doc))
        # Taken over by a GET on A: B's stream ends, A's gets the next update.
        takeover = SSE(a.url, "GET", session_headers(a, "alice", session))
        assert takeover.status == 200
        assert stream.closed.wait(10)
        touch(demo_project, doc)
        assert takeover.next() == updated(doc_uri(doc))
        # Unsubscribed on B, deleted on B: A's stream ends.
        assert session_call(b, "alice", session, "resources/unsubscribe", uri=doc_uri(doc))[0] == 200
        delete = SSE(b.url, "DELETE", session_headers(b, "alice", session))
        assert delete.status == 204
        assert takeover.closed.wait(10)
        assert takeover.seen == [updated(doc_uri(doc))]
    finally:
        stream.close()
        if takeover is not None:
            takeover.close()


def test_parallel_subscribes_on_both_processes_are_all_kept(
    cluster: tuple[live.Server, live.Server], demo_project: live.Project, documents: dict[str, list[int]]
) -> None:
    """A session's subscriptions live in the shared cache: parallel ``resources/subscribe`` on A and B keep all."""
    a, b = cluster
    docs = documents["alice"]
    session = open_session(a, "alice")
    uris = [doc_uri(pk) for pk in docs] + ["learn://about"]
    with ThreadPoolExecutor(16) as pool:
        calls = [
            pool.submit(session_call, (a, b)[index % 2], "alice", session, "resources/subscribe", uri=uri)
            for index, uri in enumerate(uris * 3)
        ]
        assert all(call.result()[0] == 200 for call in calls)
    stream = SSE(b.url, "GET", session_headers(b, "alice", session))
    try:
        assert stream.status == 200
        touch(demo_project, *docs)
        received = [stream.next() for _ in docs]
        assert {message["params"]["uri"] for message in received} == {doc_uri(pk) for pk in docs}, (
            received,
            b.logged()[-3000:],
        )
    finally:
        stream.close()


def test_shutdown_ends_listeners_with_the_final_result(demo_project: live.Project) -> None:
    """With ``--timeout-graceful-shutdown``, uvicorn cancels open streams: each listener gets the final result."""
    server = live.Server(demo_project, name="uvicorn-C").start("--timeout-graceful-shutdown", "1")
    try:
        stream = listen(server, "alice", "bye", {"resourcesListChanged": True})
        assert server.process is not None
        server.process.send_signal(signal.SIGTERM)
        assert stream.next(10) == final_result("bye")
        assert stream.closed.wait(10)
        assert server.process.wait(15) is not None
    finally:
        server.stop()


def test_concurrent_session_subscription_changes_are_not_lost(redis_url: str, settings: Any) -> None:
    """Workers changing one session's subscription list at once (read, modify, store): every change is kept."""
    from mcp_resources.transport import sessions

    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": redis_url,
            "KEY_PREFIX": f"mcp-test-{secrets.token_hex(4)}",
        }
    }
    session = secrets.token_urlsafe(16)
    uris = [f"app://item/{i}" for i in range(60)]
    with ThreadPoolExecutor(30) as pool:
        assert all(pool.map(lambda uri: sessions.add_subscription(session, uri, 1000), uris))
    assert sorted(sessions.subscriptions_of(session)) == sorted(uris)
    with ThreadPoolExecutor(30) as pool:
        list(pool.map(lambda uri: sessions.remove_subscription(session, uri), uris[::2]))
    assert sorted(sessions.subscriptions_of(session)) == sorted(uris[1::2])
    # The limit holds under concurrency too.
    other = secrets.token_urlsafe(16)
    with ThreadPoolExecutor(30) as pool:
        accepted = list(pool.map(lambda uri: sessions.add_subscription(other, uri, 10), uris))
    assert sum(accepted) == 10
    assert len(sessions.subscriptions_of(other)) == 10


# The Redis log under one process's streams (the project's ASGI application, in-process) -----------------------------


def redis_log(settings: Any, redis_url: str) -> None:
    """Point ``DELIVERY_URL`` at Redis."""
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "DELIVERY_URL": redis_url}


def stream_settings(settings: Any, **values: Any) -> None:
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "RESOURCE_URI": RESOURCE, **values}


async def open_listen(token: str, request_id: Any, *uris: str) -> Exchange:
    """A ``subscriptions/listen`` stream for list changes (and ``uris``) through the project's ASGI application,
    read up to its acknowledgement."""
    stream = Exchange(application(), scope("POST", listen_headers(token)))
    await stream.start(listen_body(request_id, {"resourcesListChanged": True, "resourceSubscriptions": list(uris)}))
    assert stream.status == 200
    ack = await stream.event()
    assert ack["method"] == ACKNOWLEDGED
    assert ack["params"]["notifications"]["resourceSubscriptions"] == list(uris)
    return stream


def publish_list_changes(count: int, pause: float) -> None:
    from mcp_resources.subscriptions import notify_resource_list_changed

    for _ in range(count):
        notify_resource_list_changed()
        time.sleep(pause)


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_keepalives_lose_no_message_on_redis(redis_url: str, settings: Any, alice: Any, make_token: Any) -> None:
    """Keep-alives written all along while 300 list changes arrive from Redis: every stream has every one."""
    from mcp_resources.subscriptions import notify_resource_updated

    stream_settings(settings, STREAM_KEEPALIVE_SECONDS=0.003)
    redis_log(settings, redis_url)
    token = await in_thread(make_token, alice)
    streams = [await open_listen(token, index, MARKER) for index in range(3)]
    sent = 300
    await in_thread(publish_list_changes, sent, 0.003)
    # A marker sent after the list changes: once a stream has it, it has received everything sent before it.
    await in_thread(notify_resource_updated, MARKER)
    for index, stream in enumerate(streams):
        received = [await stream.event(5) for _ in range(sent + 1)]
        assert received == [list_changed(index)] * sent + [updated(MARKER, index)]
        assert len(stream.comments) > 10  # keep-alives were written all along
    for stream in streams:
        await stream.disconnect()


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_an_idle_stream_survives_redis_socket_timeouts(
    redis_url: str, settings: Any, caplog: pytest.LogCaptureFixture, alice: Any, make_token: Any
) -> None:
    """redis-py aborts a blocking read after its socket timeout (here 0.2 s, shorter than the reader's one-second
    ``XREAD BLOCK``): the process's reader reads again from where it was, and the stream receives what follows."""
    from mcp_resources.subscriptions import notify_resource_list_changed
    from mcp_resources.transport import streams

    stream_settings(settings, STREAM_KEEPALIVE_SECONDS=30)
    redis_log(settings, f"{redis_url}?socket_timeout=0.2")
    stream = await open_listen(await in_thread(make_token, alice), "idle")
    # After the stream opened: building the ASGI application configures LOGGING again (django.setup()).
    caplog.set_level(logging.DEBUG, logger="mcp_resources.subscriptions")

    def aborted_reads() -> int:
        return sum("reading the log failed" in record.getMessage() for record in caplog.records)

    limit = time.monotonic() + 10
    while aborted_reads() < 2:
        assert time.monotonic() < limit, f"the reads were not aborted: {caplog.text}"
        await asyncio.sleep(0.02)
    await in_thread(notify_resource_list_changed)
    assert await stream.event(5) == list_changed("idle")
    await stream.disconnect()
    assert dict(streams._open_streams) == {}


class RedisProxy:
    """A TCP proxy to Redis that can be taken down and brought back (as a Redis restart or a network cut would)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.writers: list[asyncio.StreamWriter] = []
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = int(self.server.sockets[0].getsockname()[1])
        return self.port

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
        self.writers += [writer, upstream_writer]

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError):
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            sink.close()

        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))

    async def down(self) -> None:
        assert self.server is not None
        self.server.close()
        for writer in self.writers:
            writer.transport.abort()
        self.writers.clear()
        await self.server.wait_closed()


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_a_log_that_goes_down_and_comes_back_loses_nothing(
    redis_url: str, settings: Any, alice: Any, make_token: Any
) -> None:
    """Before, a channel layer that failed ended every stream (its messages meanwhile were lost). Now the stream
    stays open while Redis is unreachable (a new listen is a clean JSON-RPC error, not a 500), and once Redis is
    back it receives, from the log, what was published."""
    from urllib.parse import urlsplit

    from mcp_resources.subscriptions import notify_resource_list_changed

    parts = urlsplit(redis_url)
    proxy = RedisProxy((parts.hostname or "127.0.0.1", parts.port or 6379))
    port = await proxy.start()
    stream_settings(settings, STREAM_KEEPALIVE_SECONDS=30)
    redis_log(settings, f"redis://127.0.0.1:{port}{parts.path}")
    token = await in_thread(make_token, alice)
    stream = await open_listen(token, "cut")
    await proxy.down()
    refused = Exchange(application(), scope("POST", listen_headers(token)))
    await refused.start(listen_body("again", {"resourcesListChanged": True}))
    assert refused.status == 200
    assert (await refused.json())["error"]["code"] == -32603
    await proxy.start()  # Redis is back, on the same address
    await in_thread(notify_resource_list_changed)
    assert await stream.event(10) == list_changed("cut")
    await stream.disconnect()
