"""Fan-out across processes through Redis (channels-redis), and the Redis layer under a stream's keep-alives.

Two uvicorn processes of the testproject (A and B) share one Redis (``MCP_REDIS_URL``: channel layer and legacy
sessions) and one database: a temporary SQLite file, or a dedicated PostgreSQL database with
``MCP_TEST_DB=postgres``. Each process has its own canonical resource URI, so each gets its own tokens
(``manage.py mcp_token --resource``). Changes are made outside both servers, as a worker or a shell would make
them: ``manage.py shell -c`` for a document, and the test process itself (the ORM on the shared database, with its
channel layer pointed at the same Redis) for an admin ``StaticResource`` row.

Without Redis on 127.0.0.1:6379 the module is skipped; with env ``CI`` set it fails instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import os
import queue
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.stream_support import (
    ACKNOWLEDGED,
    LEGACY,
    MODERN,
    SUBSCRIPTION_ID,
    list_changed,
    listen_body,
    listen_headers,
    meta,
    redis_url_or_skip,
    updated,
)

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
MANAGE = ROOT / "testproject" / "manage.py"
REDIS_DB = int(os.environ.get("MCP_TEST_REDIS_DB", "11"))
POSTGRES = os.environ.get("MCP_TEST_DB") == "postgres"


# Processes -------------------------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    name: str
    port: int
    env: dict[str, str]
    log: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def mcp_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self, *extra: str) -> None:
        with self.log.open("ab") as log_file:
            self.process = subprocess.Popen(
                [
                    *(sys.executable, "-m", "uvicorn", "testproject.asgi:application"),
                    *("--host", "127.0.0.1", "--port", str(self.port), "--log-level", "warning", *extra),
                ],
                cwd=ROOT,
                env=self.env,
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"uvicorn {self.name} exited:\n{self.log.read_text(errors='replace')}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return
            time.sleep(0.1)
        raise RuntimeError(f"uvicorn {self.name} did not start:\n{self.log.read_text(errors='replace')}")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=15)

    def logged(self) -> str:
        return self.log.read_text(errors="replace")


@dataclass
class Cluster:
    env: dict[str, str]
    a: Server
    b: Server
    database: dict[str, str]
    tokens: dict[tuple[str, str], str] = field(default_factory=dict)

    def manage(self, *args: str, env: dict[str, str] | None = None) -> str:
        completed = subprocess.run(
            [sys.executable, str(MANAGE), *args],
            cwd=ROOT,
            env=env or self.env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if completed.returncode != 0:
            raise RuntimeError(f"manage.py {args[0]} failed:\n{completed.stdout}\n{completed.stderr}")
        return completed.stdout

    def shell(self, code: str) -> str:
        """Run ORM code in a separate process (a worker or a shell), with the channel layer on the same Redis."""
        return self.manage("shell", "--no-imports", "-c", code).strip().splitlines()[-1] if code else ""

    def token(self, user: str, server: Server, scope: str = "documents:read") -> str:
        key = (user, server.name)
        if key not in self.tokens:
            self.tokens[key] = self.manage(
                "mcp_token", "--user", user, "--scope", scope, "--resource", server.mcp_url
            ).strip()
        return self.tokens[key]

    def documents(self, user: str) -> list[int]:
        out = self.shell(
            "from testproject.library.models import Document; "
            f"print(list(Document.objects.filter(owner__username={user!r})"
            ".order_by('pk').values_list('pk', flat=True)))"
        )
        return list(json.loads(out))

    def touch(self, *pks: int) -> None:
        """Save each document (one commit each) in a separate process."""
        self.shell(
            "from testproject.library.models import Document\n"
            f"for pk in {list(pks)!r}:\n"
            "    d = Document.objects.get(pk=pk); d.body += '!'; d.save()\n"
            "print('ok')"
        )


def _postgres_database() -> Iterator[str]:
    import psycopg

    name = f"mcp_fanout_{os.getpid()}_{secrets.token_hex(4)}"
    dsn = "host=127.0.0.1 port=5432 dbname=test user=postgres connect_timeout=3"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield name
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def redis_url() -> str:
    return redis_url_or_skip(REDIS_DB)


@pytest.fixture(scope="module")
def cluster(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    workdir = tmp_path_factory.mktemp("fanout")
    base = {
        key: value
        for key, value in os.environ.items()
        if key not in ("MCP_TEST_DB", "PGDATABASE", "MCP_DEMO_DB", "DJANGO_SETTINGS_MODULE", "DJANGO_DEBUG")
    }
    base.update(
        DJANGO_SETTINGS_MODULE="testproject.settings",
        MCP_REDIS_URL=redis_url,
        MCP_LOG_LEVEL="INFO",
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), base.get("PYTHONPATH")])),
    )
    with contextlib.ExitStack() as stack:
        if POSTGRES:
            name = stack.enter_context(contextlib.contextmanager(_postgres_database)())
            base.update(MCP_TEST_DB="postgres", PGDATABASE=name)
            database = {"ENGINE": "django.db.backends.postgresql", "NAME": name}
        else:
            path = str(workdir / "shared.sqlite3")
            base.update(MCP_DEMO_DB=path)
            database = {"ENGINE": "django.db.backends.sqlite3", "NAME": path}
        servers = []
        for name in ("A", "B"):
            port = _free_port()
            env = {**base, "MCP_RESOURCE_URI": f"http://127.0.0.1:{port}/mcp"}
            servers.append(Server(name, port, env, workdir / f"uvicorn-{name}.log"))
        cluster = Cluster(base, servers[0], servers[1], database)
        cluster.manage("migrate", "--verbosity", "0")
        cluster.manage("load_demo_data", "--alice", "4", "--bob", "3", "--notes", "1")
        for server in servers:
            stack.callback(server.stop)
            server.start()
        yield cluster
        for server in servers:
            server.stop()
            assert "Traceback" not in server.logged(), server.logged()


# An SSE client over a real socket -------------------------------------------------------------------------------------


class SSE:
    """One HTTP request whose response is read on a thread; events (JSON) and comments land in a queue."""

    def __init__(self, url: str, method: str, headers: dict[str, str], body: bytes = b"") -> None:
        host_port = url.split("/")[2]
        host, port = host_port.split(":")
        self.conn = http.client.HTTPConnection(host, int(port), timeout=60)
        self.conn.request(method, "/" + url.split("/", 3)[3], body=body or None, headers=headers)
        self.response = self.conn.getresponse()
        self.status = self.response.status
        self.headers = {k.lower(): v for k, v in self.response.getheaders()}
        self.messages: queue.Queue[Any] = queue.Queue()
        self.seen: list[Any] = []
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
                raw = self.response.fp.readline()
                if not raw:
                    break
                line = raw.decode("utf-8").rstrip("\r\n")
                if line == "":
                    if data:
                        message = json.loads("\n".join(data))
                        self.seen.append(message)
                        self.messages.put(message)
                    data = []
                elif line.startswith("data: "):
                    data.append(line[6:])
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

    def silent(self, seconds: float) -> None:
        with contextlib.suppress(queue.Empty):
            message = self.messages.get(timeout=seconds)
            if message is not None:
                raise AssertionError(f"unexpected message: {message}")
            self.messages.put(None)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.sock and self.conn.sock.shutdown(socket.SHUT_RDWR)
        self.conn.close()


def listen(server: Server, token: str, request_id: Any, notifications: dict[str, Any]) -> SSE:
    stream = SSE(server.mcp_url, "POST", listen_headers(token), listen_body(request_id, notifications))
    assert stream.status == 200, stream.body
    ack = stream.next()
    assert ack["method"] == ACKNOWLEDGED
    assert ack["params"]["_meta"] == {SUBSCRIPTION_ID: request_id}
    stream.ack = ack  # type: ignore[attr-defined]
    return stream


def post(server: Server, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, str], Any]:
    reply = SSE(server.mcp_url, "POST", {"content-type": "application/json", **headers}, json.dumps(body).encode())
    return reply.status, reply.headers, json.loads(reply.body) if reply.body else None


def doc_uri(pk: int) -> str:
    return f"learn://documents/{pk}"


def wait_for_count(predicate: Any, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


# Across processes ---------------------------------------------------------------------------------------------------


def test_a_change_made_elsewhere_reaches_listeners_on_both_processes(cluster: Cluster) -> None:
    alice_docs = cluster.documents("alice")
    target, other = alice_docs[0], alice_docs[1]
    on_b = listen(cluster.b, cluster.token("alice", cluster.b), "on-b", {"resourceSubscriptions": [doc_uri(target)]})
    on_a = listen(cluster.a, cluster.token("alice", cluster.a), 1, {"resourceSubscriptions": [doc_uri(target)]})
    try:
        assert on_b.ack["params"]["notifications"]["resourceSubscriptions"] == [doc_uri(target)]  # type: ignore[attr-defined]
        cluster.touch(other)  # not subscribed
        cluster.touch(target)
        assert on_b.next() == updated(doc_uri(target), "on-b")
        assert on_a.next() == updated(doc_uri(target), 1)
        on_b.silent(0.5)
    finally:
        on_a.close()
        on_b.close()


def test_a_static_resource_saved_by_the_test_process_is_a_list_change_on_b(
    cluster: Cluster, redis_url: str, settings: Any, django_db_blocker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.db import connections

    from mcp_resources.models import StaticResource
    from mcp_resources.subscriptions import broker

    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [redis_url]}}
    }
    monkeypatch.setattr(broker, "_stream_loop", None)  # this process serves no stream: publish straight into Redis
    alias = f"fanout_{secrets.token_hex(3)}"
    connections.settings[alias] = {**connections.settings["default"], **cluster.database, "TEST": {}}
    uri = f"app://fanout-{secrets.token_hex(4)}"
    token_b = cluster.token("alice", cluster.b)
    stream = listen(cluster.b, token_b, "lists", {"resourcesListChanged": True, "resourceSubscriptions": [uri]})
    assert stream.ack["params"]["notifications"] == {"resourcesListChanged": True, "resourceSubscriptions": []}  # type: ignore[attr-defined]
    try:
        with django_db_blocker.unblock():
            row = StaticResource.objects.using(alias).create(uri=uri, name="fanout", text="v1")
            assert stream.next() == list_changed("lists")
            stream.silent(0.3)
            status, _, listing = post(
                cluster.b,
                {"jsonrpc": "2.0", "id": 2, "method": "resources/list", "params": {"_meta": meta()}},
                {"mcp-protocol-version": MODERN, "mcp-method": "resources/list", "authorization": f"Bearer {token_b}"},
            )
            assert status == 200
            assert uri in [r["uri"] for r in listing["result"]["resources"]]
            # Subscribed to the row (it exists now): an edit is an update plus a list change.
            subscribed = listen(cluster.b, token_b, "row", {"resourceSubscriptions": [uri]})
            assert subscribed.ack["params"]["notifications"]["resourceSubscriptions"] == [uri]  # type: ignore[attr-defined]
            row.text = "v2"
            row.save(using=alias)
            assert subscribed.next() == updated(uri, "row")
            assert stream.next() == list_changed("lists")
            row.delete()
            assert stream.next() == list_changed("lists")
            subscribed.silent(0.5)  # deleted: the row can no longer be read, so no update
            subscribed.close()
    finally:
        stream.close()
        connections[alias].close()
        del connections.settings[alias]


def test_bob_never_receives_anything_about_alices_documents(cluster: Cluster) -> None:
    alice_docs, bob_docs = cluster.documents("alice"), cluster.documents("bob")
    asked = [doc_uri(pk) for pk in alice_docs] + [doc_uri(bob_docs[0])]
    bob_b = listen(cluster.b, cluster.token("bob", cluster.b), "bob", {"resourceSubscriptions": asked})
    assert bob_b.ack["params"]["notifications"]["resourceSubscriptions"] == [doc_uri(bob_docs[0])]  # type: ignore[attr-defined]
    alice_a = listen(cluster.a, cluster.token("alice", cluster.a), "alice", {"resourceSubscriptions": asked})
    assert alice_a.ack["params"]["notifications"]["resourceSubscriptions"] == [doc_uri(pk) for pk in alice_docs]  # type: ignore[attr-defined]
    # A legacy session of bob's on A, subscribing to alice's document: refused; to his own: accepted.
    bob_a = cluster.token("bob", cluster.a)
    session = legacy_session(cluster.a, bob_a)
    get = SSE(cluster.a.mcp_url, "GET", legacy_headers(bob_a, session))
    assert get.status == 200
    status, payload = legacy_call(cluster.a, bob_a, session, "resources/subscribe", uri=doc_uri(alice_docs[0]))
    assert payload["error"]["code"] == -32002
    status, payload = legacy_call(cluster.a, bob_a, session, "resources/subscribe", uri=doc_uri(bob_docs[0]))
    assert (status, payload["result"]) == (200, {})
    try:
        cluster.touch(*alice_docs)
        assert alice_a.next() == updated(doc_uri(alice_docs[0]), "alice")
        cluster.touch(bob_docs[0])  # the sentinel
        assert bob_b.next() == updated(doc_uri(bob_docs[0]), "bob")
        assert get.next() == updated(doc_uri(bob_docs[0]))
        time.sleep(0.3)
        everything = json.dumps(bob_b.seen + get.seen)
        assert not any(doc_uri(pk) + '"' in everything for pk in alice_docs), everything
    finally:
        for stream in (bob_b, alice_a, get):
            stream.close()


# Legacy sessions across processes -------------------------------------------------------------------------------------


def legacy_headers(token: str, session: str | None = None) -> dict[str, str]:
    headers = {"mcp-protocol-version": LEGACY, "authorization": f"Bearer {token}", "accept": "text/event-stream"}
    if session:
        headers["mcp-session-id"] = session
    return headers


def legacy_session(server: Server, token: str) -> str:
    body = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "pytest", "version": "0"}},
    }
    status, headers, payload = post(server, body, {"authorization": f"Bearer {token}"})
    assert status == 200, payload
    return headers["mcp-session-id"]


def legacy_call(server: Server, token: str, session: str, method: str, **params: Any) -> tuple[int, Any]:
    body = {"jsonrpc": "2.0", "id": 5, "method": method, "params": params}
    status, _, payload = post(server, body, legacy_headers(token, session))
    return status, payload


def test_a_session_made_on_a_streams_on_b(cluster: Cluster) -> None:
    """The session lives in the shared cache; ``resources/subscribe`` on A reaches the GET stream on B."""
    doc = cluster.documents("alice")[2]
    token_a, token_b = cluster.token("alice", cluster.a), cluster.token("alice", cluster.b)
    session = legacy_session(cluster.a, token_a)
    stream = SSE(cluster.b.mcp_url, "GET", legacy_headers(token_b, session))
    try:
        assert stream.status == 200
        assert stream.headers["mcp-session-id"] == session
        time.sleep(0.3)  # the stream has joined its session group
        assert legacy_call(cluster.a, token_a, session, "resources/subscribe", uri=doc_uri(doc))[0] == 200
        cluster.touch(doc)
        assert stream.next() == updated(doc_uri(doc))
        # Taken over by a GET on A: B's stream ends, A's gets the next update.
        takeover = SSE(cluster.a.mcp_url, "GET", legacy_headers(token_a, session))
        assert takeover.status == 200
        assert stream.closed.wait(10)
        cluster.touch(doc)
        assert takeover.next() == updated(doc_uri(doc))
        # Unsubscribed on B, deleted on B: A's stream ends.
        assert legacy_call(cluster.b, token_b, session, "resources/unsubscribe", uri=doc_uri(doc))[0] == 200
        delete = SSE(cluster.b.mcp_url, "DELETE", legacy_headers(token_b, session))
        assert delete.status == 204
        assert takeover.closed.wait(10)
        assert takeover.seen == [updated(doc_uri(doc))]
    finally:
        stream.close()


def test_shutdown_ends_listeners_with_the_final_result(cluster: Cluster) -> None:
    """With ``--timeout-graceful-shutdown``, uvicorn cancels open streams: each listener gets the final result."""
    server = Server("C", _free_port(), {}, cluster.a.log.with_name("uvicorn-C.log"))
    server.env = {**cluster.env, "MCP_RESOURCE_URI": server.mcp_url}
    server.start("--timeout-graceful-shutdown", "1")
    try:
        stream = listen(server, cluster.token("alice", server), "bye", {"resourcesListChanged": True})
        assert server.process is not None
        started = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        assert stream.next(10) == {
            "jsonrpc": "2.0",
            "id": "bye",
            "result": {"resultType": "complete", "_meta": {SUBSCRIPTION_ID: "bye"}},
        }
        assert stream.closed.wait(10)
        assert server.process.wait(15) is not None
        assert time.monotonic() - started < 15
    finally:
        server.stop()


# The Redis layer under one process's streams --------------------------------------------------------------------------


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_keepalives_lose_no_message_on_redis(redis_url: str, settings: Any) -> None:
    """A keep-alive must not cancel the pending receive: channels-redis drops a message whose receive is cancelled."""
    from django.contrib.auth import get_user_model

    from mcp_resources.asgi import MCPApplication
    from mcp_resources.subscriptions import broker
    from tests.stream_support import RESOURCE, Exchange, in_thread, make_token, scope

    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "RESOURCE_URI": RESOURCE, "KEEPALIVE_SECONDS": 0.003}
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [redis_url], "prefix": f"mcp-test-{secrets.token_hex(4)}"},
        }
    }
    app = MCPApplication(lambda *args: None, path="/mcp")
    alice = await in_thread(lambda: get_user_model().objects.create_user("alice"))
    token = await in_thread(make_token, alice)
    streams = []
    for index in range(3):
        stream = Exchange(app, scope("POST", listen_headers(token)))
        await stream.start(listen_body(index, {"resourcesListChanged": True}))
        assert stream.status == 200
        await stream.event()
        streams.append(stream)
    layer = broker.get_layer()
    sent = 300
    for _ in range(sent):
        await layer.group_send(broker.LIST_CHANGED_GROUP, {"type": broker.LIST_CHANGED})
        await asyncio.sleep(0.003)
    for index, stream in enumerate(streams):
        received = [await stream.event(5) for _ in range(sent)]
        assert received == [list_changed(index)] * sent
        assert len(stream.comments) > 10  # keep-alives were written all along
        await stream.silent(0.2)
    for stream in streams:
        await stream.disconnect()


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_streams_outlive_the_redis_group_expiry(redis_url: str, settings: Any) -> None:
    from django.contrib.auth import get_user_model

    from mcp_resources.asgi import MCPApplication
    from mcp_resources.subscriptions import broker
    from tests.stream_support import RESOURCE, Exchange, in_thread, make_token, scope

    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "RESOURCE_URI": RESOURCE, "KEEPALIVE_SECONDS": 30}
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [redis_url], "prefix": f"mcp-test-{secrets.token_hex(4)}", "group_expiry": 2},
        }
    }
    app = MCPApplication(lambda *args: None, path="/mcp")
    alice = await in_thread(lambda: get_user_model().objects.create_user("alice"))
    token = await in_thread(make_token, alice)
    stream = Exchange(app, scope("POST", listen_headers(token)))
    await stream.start(listen_body("old", {"resourcesListChanged": True}))
    await stream.event()
    await asyncio.sleep(4.5)
    await broker.get_layer().group_send(broker.LIST_CHANGED_GROUP, {"type": broker.LIST_CHANGED})
    assert await stream.event(5) == list_changed("old")
    await stream.disconnect()


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_an_idle_stream_survives_redis_socket_timeouts(redis_url: str, settings: Any) -> None:
    """redis-py 8 aborts a blocking read after its default 5 s socket timeout: the stream receives again."""
    from django.contrib.auth import get_user_model

    from mcp_resources.asgi import MCPApplication
    from mcp_resources.subscriptions import broker, streams
    from tests.stream_support import RESOURCE, Exchange, in_thread, make_token, scope

    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "RESOURCE_URI": RESOURCE, "KEEPALIVE_SECONDS": 30}
    settings.CHANNEL_LAYERS = {  # no socket_timeout: the client library's default
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [redis_url], "prefix": f"mcp-test-{secrets.token_hex(4)}"},
        }
    }
    app = MCPApplication(lambda *args: None, path="/mcp")
    alice = await in_thread(lambda: get_user_model().objects.create_user("alice"))
    stream = Exchange(app, scope("POST", listen_headers(await in_thread(make_token, alice))))
    await stream.start(listen_body("idle", {"resourcesListChanged": True}))
    await stream.event()
    await asyncio.sleep(6.5)
    await broker.get_layer().group_send(broker.LIST_CHANGED_GROUP, {"type": broker.LIST_CHANGED})
    assert await stream.event(5) == list_changed("idle")
    await stream.disconnect()
    assert dict(streams._open_streams) == {}


class RedisProxy:
    """A TCP proxy to Redis that can be taken down (as a Redis restart or a network cut would)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.writers: list[asyncio.StreamWriter] = []
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

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
        await self.server.wait_closed()


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_a_channel_layer_that_goes_down_ends_the_stream_gracefully(redis_url: str, settings: Any) -> None:
    from urllib.parse import urlsplit

    from django.contrib.auth import get_user_model

    from mcp_resources.asgi import MCPApplication
    from mcp_resources.transport import streams
    from tests.stream_support import RESOURCE, Exchange, in_thread, make_token, scope

    parts = urlsplit(redis_url)
    proxy = RedisProxy((parts.hostname or "127.0.0.1", parts.port or 6379))
    port = await proxy.start()
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "RESOURCE_URI": RESOURCE, "KEEPALIVE_SECONDS": 30}
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                "hosts": [{"address": f"redis://127.0.0.1:{port}{parts.path}", "socket_timeout": 30}],
                "prefix": f"mcp-test-{secrets.token_hex(4)}",
            },
        }
    }
    app = MCPApplication(lambda *args: None, path="/mcp")
    alice = await in_thread(lambda: get_user_model().objects.create_user("alice"))
    stream = Exchange(app, scope("POST", listen_headers(await in_thread(make_token, alice))))
    await stream.start(listen_body("cut", {"resourcesListChanged": True}))
    await stream.event()
    await asyncio.sleep(0.2)
    await proxy.down()
    assert await stream.until_closed(10) == [
        {"jsonrpc": "2.0", "id": "cut", "result": {"resultType": "complete", "_meta": {SUBSCRIPTION_ID: "cut"}}}
    ]
    await stream.finished()
    assert dict(streams._open_streams) == {}
    # While the layer is down, a new listen is a clean JSON-RPC error, not a 500.
    refused = Exchange(app, scope("POST", listen_headers(await in_thread(make_token, alice))))
    await refused.start(listen_body("again", {"resourcesListChanged": True}))
    assert refused.status == 200
    assert (await refused.json())["error"]["code"] == -32603


def test_parallel_subscribes_on_both_processes_are_all_kept(cluster: Cluster) -> None:
    """A session's subscriptions live in the shared cache: parallel ``resources/subscribe`` on A and B keep all."""
    from concurrent.futures import ThreadPoolExecutor

    docs = cluster.documents("alice")
    token_a, token_b = cluster.token("alice", cluster.a), cluster.token("alice", cluster.b)
    session = legacy_session(cluster.a, token_a)
    targets = [(cluster.a, token_a), (cluster.b, token_b)]
    uris = [doc_uri(pk) for pk in docs] + ["learn://about"]
    with ThreadPoolExecutor(16) as pool:
        calls = [
            pool.submit(legacy_call, *targets[index % 2], session, "resources/subscribe", uri=uri)
            for index, uri in enumerate(uris * 3)
        ]
        assert all(call.result()[0] == 200 for call in calls)
    stream = SSE(cluster.b.mcp_url, "GET", legacy_headers(token_b, session))
    try:
        assert stream.status == 200
        time.sleep(0.3)
        cluster.touch(*docs)
        received = [stream.next() for _ in docs]
        assert {message["params"]["uri"] for message in received} == {doc_uri(pk) for pk in docs}, (
            received,
            cluster.b.logged()[-3000:],
        )
    finally:
        stream.close()


def test_concurrent_session_subscription_changes_are_not_lost(redis_url: str, settings: Any) -> None:
    """Workers changing one session's subscription list at once (read, modify, store): every change is kept."""
    from concurrent.futures import ThreadPoolExecutor

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
