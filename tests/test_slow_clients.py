"""Slow and half-open clients against a live uvicorn server (docs/security.md, "Slow and half-open clients").

The demo under uvicorn, on Redis, with the stream bounds made small (tests/settings_slow_clients.py: a stream write
may wait one second, keep-alives every second). Raw sockets play the clients:

- clients that send their headers or their body a byte at a time hold a connection each but no thread (uvicorn
  parses on the event loop and ``MCPEndpoint`` reads the body there); other clients are served meanwhile, and a slow
  client that finishes gets its answer; the same under gunicorn's gevent worker (a greenlet each), on the same
  project;
- uvicorn bounds what a slow head may hold (h11's 16 KiB for an incomplete head: past it, a 400), not how long it
  may take; ``--limit-concurrency`` bounds how many connections slow clients can hold: past it uvicorn answers 503
  instead of queueing, and serves again once they leave;
- a listener that stops reading is ended once a write waits past ``STREAM_SEND_TIMEOUT_SECONDS``: it leaves its
  channel-layer groups and its connection is closed, while a listener that reads keeps receiving.

No timing is asserted: waits have generous upper bounds, and the bounds under test are made small by the settings.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests import live

pytestmark = pytest.mark.e2e

SETTINGS = "tests.settings_slow_clients"
PROTOCOL_VERSION = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION, "io.modelcontextprotocol/clientCapabilities": {}}


@pytest.fixture(scope="module")
def project(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[live.Project]:
    with live.project(tmp_path_factory.mktemp("slow"), settings=SETTINGS, redis_url=redis_url) as project:
        yield project


@pytest.fixture(scope="module")
def server(project: live.Project) -> Iterator[live.Server]:
    server = live.Server(project, name="uvicorn").start()
    try:
        yield server
    finally:
        server.stop()


# Requests ------------------------------------------------------------------------------------------------------


def body_of(method: str, params: dict[str, Any] | None = None, request_id: int = 1) -> bytes:
    message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {**(params or {}), "_meta": META}}
    return json.dumps(message).encode()


def raw_request(port: int, method: str, body: bytes, token: str | None = None) -> tuple[bytes, bytes]:
    """The head and the body of a POST of ``method``, as bytes."""
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {PROTOCOL_VERSION}\r\n"
        f"Mcp-Method: {method}\r\nContent-Length: {len(body)}\r\n"
    )
    if token is not None:
        head += f"Authorization: Bearer {token}\r\n"
    return (head + "\r\n").encode(), body


def healthy(server: live.Server, timeout: float = 30) -> None:
    """A correct request gets its 200 (within a generous ``timeout``)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    try:
        headers = {"Content-Type": "application/json", "MCP-Protocol-Version": PROTOCOL_VERSION}
        conn.request("POST", "/mcp", body_of("server/discover"), {**headers, "Mcp-Method": "server/discover"})
        response = conn.getresponse()
        assert response.status == 200, response.read()
        assert b"supportedVersions" in response.read()
    finally:
        conn.close()


def status_of(sock: socket.socket, timeout: float = 30) -> int:
    """The status of the response arriving on ``sock``."""
    sock.settimeout(timeout)
    received = b""
    while b"\r\n" not in received:
        chunk = sock.recv(4096)
        assert chunk, f"the server closed the connection without an answer: {received!r}"
        received += chunk
    return int(received.split(b" ", 2)[1])


def threads(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("Threads:"))


def worker_pid(server: live.Server) -> int:
    """The process id of a one-worker gunicorn server's worker (its master only supervises)."""
    assert server.process is not None
    pid = server.process.pid
    with open(f"/proc/{pid}/task/{pid}/children") as children:
        workers = children.read().split()
    assert len(workers) == 1, workers
    return int(workers[0])


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=30)


# Slow heads and bodies -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gevent_server(project: live.Project) -> Iterator[live.Server]:
    """The same project under gunicorn's gevent worker (docs/deployment.md): a greenlet per connection."""
    server = live.Server(project, name="gevent", kind="gevent").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("part", ["head", "body"])
def test_slow_clients_hold_no_thread_and_the_others_are_served(server: live.Server, part: str) -> None:
    assert server.process is not None
    slow_clients_hold_no_thread(server, server.process.pid, part)


@pytest.mark.parametrize("part", ["head", "body"])
def test_under_gevent_slow_clients_hold_no_thread_and_the_others_are_served(
    gevent_server: live.Server, part: str
) -> None:
    """Under gunicorn's gevent worker too: a slow client holds a greenlet, where a ``gthread`` worker gives it one
    of its threads (two slow clients would stop a worker of 2 threads)."""
    healthy(gevent_server)  # the worker has loaded the project
    slow_clients_hold_no_thread(gevent_server, worker_pid(gevent_server), part)


def slow_clients_hold_no_thread(server: live.Server, pid: int, part: str) -> None:
    """40 clients stop halfway through their ``part``; another is served meanwhile, and one that finishes byte by
    byte gets its answer; the threads of process ``pid`` (the one serving) stay about as many."""
    healthy(server)
    before = threads(pid)
    head, body = raw_request(server.port, "server/discover", body_of("server/discover"))
    whole = head + body
    sent_at_once = len(head) // 2 if part == "head" else len(head) + 10
    slow = [connect(server.port) for _ in range(40)]
    try:
        for sock in slow:
            sock.sendall(whole[:sent_at_once])
        healthy(server)  # served while 40 clients are halfway through their requests
        during = threads(pid)
        assert during <= before + 8, f"{during} threads with 40 slow clients, {before} before"
        # One of them finishes, a byte at a time, and gets its answer.
        for byte in whole[sent_at_once:]:
            slow[0].sendall(bytes([byte]))
        assert status_of(slow[0]) == 200
    finally:
        for sock in slow:
            sock.close()  # the others leave halfway: nothing is run for them
    healthy(server)
    server.assert_log_clean()


def test_an_endless_head_is_refused_once_it_passes_the_servers_limit(server: live.Server) -> None:
    with connect(server.port) as sock:
        sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        status = None
        for _ in range(64):  # 64 KiB at most; h11 refuses an incomplete head past 16 KiB
            try:
                sock.sendall(b"X-Pad: " + b"a" * 1016 + b"\r\n")
            except (BrokenPipeError, ConnectionResetError):
                break
        with contextlib.suppress(ConnectionResetError):
            status = status_of(sock)
    assert status == 400
    healthy(server)


def test_limit_concurrency_sheds_the_connections_past_it_and_recovers(project: live.Project) -> None:
    limited = live.Server(project, name="uvicorn-limited").start("--limit-concurrency", "10")
    try:
        head, body = raw_request(limited.port, "server/discover", body_of("server/discover"))
        slow: list[socket.socket] = []
        try:
            # Slow clients are added until a request past the limit is shed with 503. (How many it takes depends on
            # the connections the server still holds, e.g. its readiness probes', and slow clients that arrive
            # past the limit are shed themselves.)
            deadline = time.monotonic() + 30
            while True:
                for _ in range(2):
                    sock = connect(limited.port)
                    sock.sendall(head + body[:5])
                    slow.append(sock)
                with connect(limited.port) as sock:
                    sock.sendall(head + body)
                    if status_of(sock) == 503:
                        break
                assert time.monotonic() < deadline, "no request was shed past --limit-concurrency"
                assert len(slow) <= 200, "no request was shed past --limit-concurrency with 200 slow clients"
                time.sleep(0.1)
        finally:
            for sock in slow:
                sock.close()
        deadline = time.monotonic() + 30
        while True:
            try:
                healthy(limited)
                break
            except AssertionError:
                assert time.monotonic() < deadline, "not served again after the slow clients left"
                time.sleep(0.2)
        logged = limited.logged()
        assert "Traceback" not in logged, logged[-3000:]
    finally:
        limited.stop()


# A listener that never reads ------------------------------------------------------------------------------------


class Reader(threading.Thread):
    """Reads a listen stream to its end in the background, counting the ``updated`` notifications."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__(daemon=True)
        self.sock = sock
        self.updates = 0
        self.closed = False

    def run(self) -> None:
        self.sock.settimeout(None)
        pending = b""
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    break
                pending += chunk
                self.updates += pending.count(b"notifications/resources/updated")
                pending = pending[-40:]
        except OSError:
            pass
        self.closed = True


def open_listen(port: int, token: str, uri: str, *, receive_buffer: int | None = None) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if receive_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)  # before connecting: a small window
    sock.settimeout(30)
    sock.connect(("127.0.0.1", port))
    params = {"notifications": {"resourceSubscriptions": [uri]}}
    head, body = raw_request(port, "subscriptions/listen", body_of("subscriptions/listen", params), token)
    sock.sendall(head + body)
    received = b""
    marker = b"notifications/subscriptions/acknowledged"
    # The whole acknowledgement, to the blank line (CRLF CRLF) that ends its event: the method comes before the long
    # URI in it, and a small receive window can split the two.
    while marker not in received or b"\r\n\r\n" not in received[received.index(marker) :]:
        chunk = sock.recv(4096)
        assert chunk, received
        received += chunk
    assert received.startswith(b"HTTP/1.1 200"), received[:300]
    assert uri.encode() in received, "the long URI is not honoured"
    return sock


def test_a_listener_that_never_reads_is_ended_and_a_reading_one_is_not(
    server: live.Server, project: live.Project, redis_url: str
) -> None:
    from mcp_resources.subscriptions.broker import UPDATED, Log

    # A public static resource with a long URI: every notification about it is about 2 KB.
    uri = "test://slow-consumer/" + "x" * 1900
    project.shell(
        "from mcp_resources.models import StaticResource; "
        f"StaticResource.objects.get_or_create(uri={uri!r}, defaults={{'name': 'slow', 'text': 'x'}})"
    )
    token = server.token("alice")
    stuck = open_listen(server.port, token, uri, receive_buffer=4096)  # then never read again
    reader = Reader(open_listen(server.port, token, uri))
    reader.start()
    log = Log(redis_url)  # the server's log: publishing as another process does

    def publish() -> None:
        log.append({"k": UPDATED, "t": uri})

    try:
        deadline = time.monotonic() + 90
        while " ended: " not in server.logged():  # its queue filled, or a write waited past the send timeout
            assert time.monotonic() < deadline, "the stream that is never read was not ended"
            for _ in range(20):
                publish()
            time.sleep(0.05)
        # The reading listener is still served.
        seen = reader.updates
        deadline = time.monotonic() + 30
        while reader.updates == seen:
            assert time.monotonic() < deadline, "the reading listener got nothing after the other was ended"
            assert not reader.closed, "the reading listener was ended too"
            publish()
            time.sleep(0.2)
        # The stuck client finds its stream closed once it reads what was buffered for it.
        stuck.settimeout(30)
        while stuck.recv(1 << 20):
            pass
    finally:
        stuck.close()
        reader.sock.close()
    healthy(server)
    server.assert_log_clean()
