"""Streams under gunicorn's gevent worker (``mcp_resources.transport.greenlets``): one server for POSTs and streams.

The demo project (``testproject.wsgi``) runs under a real gunicorn gevent worker on loopback, with its log of change
notifications in Redis (database 13) and ``tests.settings_gevent_streams`` (a keep-alive a second, two streams per
caller). Changes are made in other processes (``manage.py shell``), as a task queue would make them. Nothing waits
for a message that must not arrive: a later change of a subscribed URI (a marker) proves that whatever came before
it has been delivered or withheld.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests import live
from tests.stream_support import ACKNOWLEDGED, final_result, listen_body, listen_headers, updated
from tests.test_fanout_redis import SSE, doc_uri, listen, open_session, post, session_call, session_headers, touch
from tests.test_slow_clients import Reader, healthy, open_listen

pytestmark = pytest.mark.e2e

REDIS_DB = 13


@pytest.fixture(scope="module")
def demo_project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[live.Project]:
    """The demo (alice 4 documents, bob 3) on Redis database 13, with the stream bounds of this module's settings."""
    with (
        live.redis_database(REDIS_DB) as redis_url,
        live.project(
            tmp_path_factory.mktemp("gevent-streams"),
            settings="tests.settings_gevent_streams",
            redis_url=redis_url,
            demo_data=("--alice", "4", "--bob", "3", "--notes", "1"),
        ) as project,
    ):
        yield project


@pytest.fixture(scope="module")
def gevent(demo_project: live.Project) -> Iterator[live.Server]:
    """The demo under one gunicorn gevent worker; its log must stay clean."""
    server = live.Server(demo_project, name="gevent-streams", kind="gevent", env={"MCP_LOG_LEVEL": "INFO"}).start()
    server.tokens("alice", "bob")
    try:
        yield server
        server.assert_log_clean()
    finally:
        server.stop()


@pytest.fixture(scope="module")
def documents(demo_project: live.Project) -> dict[str, list[int]]:
    return demo_project.ids_by_user("Document")


def give(project: live.Project, pk: int, user: str) -> None:
    """Give a document to ``user`` (another process)."""
    project.shell(
        "from django.contrib.auth import get_user_model\n"
        "from testproject.library.models import Document\n"
        f"Document.objects.filter(pk={pk}).update(owner=get_user_model().objects.get(username={user!r}))\n"
        "print('ok')"
    )


def listen_when_free(
    server: live.Server, user: str, request_id: Any, notifications: dict[str, Any], token: str | None = None
) -> SSE:
    """:func:`listen` (with ``user``'s token, or ``token``), once ``user`` holds fewer than two streams: a stream
    whose client went away in an earlier test is released at the worker's next keep-alive."""
    deadline = time.monotonic() + 60
    while True:
        body = listen_body(request_id, notifications)
        stream = SSE(server.url, "POST", listen_headers(token or server.token(user)), body)
        if stream.status != 429 or time.monotonic() > deadline:
            assert stream.status == 200, stream.body
            ack = stream.next()
            assert ack["method"] == ACKNOWLEDGED
            stream.ack = ack
            return stream
        time.sleep(0.2)


def read(server: live.Server, user: str, uri: str) -> tuple[int, Any]:
    """``resources/read`` of ``uri`` (2026-07-28), a plain POST to the same worker."""
    body = json.loads(listen_body("read", None))
    body["method"], body["params"] = "resources/read", {"uri": uri, "_meta": body["params"]["_meta"]}
    headers = listen_headers(server.token(user), mcp_method="resources/read", mcp_name=uri, accept="application/json")
    status, _, payload = post(server, body, headers)
    return status, payload


def test_a_listen_gets_updates_from_another_process_and_access_is_rechecked(
    gevent: live.Server, demo_project: live.Project, documents: dict[str, list[int]]
) -> None:
    """Acknowledged, then an update saved in another process; a document given to bob is withheld from alice at its
    next change; POSTs to the same worker keep working while the stream is open (its event loop is no request's)."""
    given, kept = documents["alice"][0], documents["alice"][1]
    wanted = {"resourceSubscriptions": [doc_uri(given), doc_uri(kept)]}
    stream = listen_when_free(gevent, "alice", "gevent", wanted)
    try:
        assert stream.ack["params"]["notifications"]["resourceSubscriptions"] == [doc_uri(given), doc_uri(kept)]
        assert stream.event_ids
        assert stream.event_ids[0]
        touch(demo_project, given)
        assert stream.next() == updated(doc_uri(given), "gevent")
        status, payload = read(gevent, "alice", doc_uri(kept))
        assert status == 200, payload
        assert payload["result"]["contents"][0]["uri"] == doc_uri(kept)
        give(demo_project, given, "bob")
        touch(demo_project, given, kept)  # ``kept`` is the marker
        assert stream.next() == updated(doc_uri(kept), "gevent")
        assert stream.seen == [stream.ack, updated(doc_uri(given), "gevent"), updated(doc_uri(kept), "gevent")]
    finally:
        stream.close()
        give(demo_project, given, "alice")


def test_a_revoked_token_ends_the_listen_with_its_final_answer(
    gevent: live.Server, demo_project: live.Project, documents: dict[str, list[int]]
) -> None:
    token = demo_project.make_tokens(gevent.url, "alice", scope="documents")["alice"]  # a token of its own
    doc = documents["alice"][2]
    stream = listen_when_free(gevent, "alice", "revoked", {"resourceSubscriptions": [doc_uri(doc)]}, token)
    try:
        demo_project.shell(
            "import hashlib\n"
            "from oauth2_provider.models import get_access_token_model\n"
            f"checksum = hashlib.sha256({token!r}.encode()).hexdigest()\n"
            "print(get_access_token_model().objects.filter(token_checksum=checksum).delete()[0])"
        )
        assert stream.next() == final_result("revoked")
        assert stream.closed.wait(30)
    finally:
        stream.close()


def test_a_session_get_stream_resumes_with_last_event_id(
    gevent: live.Server, demo_project: live.Project, documents: dict[str, list[int]]
) -> None:
    """A 2025-11-25 session's GET stream: the client comes back with ``Last-Event-ID`` and receives what it missed."""
    first, second = documents["alice"][2], documents["alice"][3]
    session = open_session(gevent, "alice")
    for doc in (first, second):
        assert session_call(gevent, "alice", session, "resources/subscribe", uri=doc_uri(doc))[0] == 200
    stream = SSE(gevent.url, "GET", session_headers(gevent, "alice", session))
    try:
        assert stream.status == 200
        assert stream.headers["mcp-session-id"] == session
        touch(demo_project, first)
        assert stream.next() == updated(doc_uri(first))
        last_seen = stream.event_ids[-1]
    finally:
        stream.close()
    touch(demo_project, second)  # while the client is away
    resumed = SSE(gevent.url, "GET", {**session_headers(gevent, "alice", session), "last-event-id": last_seen})
    try:
        assert resumed.status == 200
        assert resumed.next() == updated(doc_uri(second))
        assert resumed.event_ids[-1] > last_seen
    finally:
        resumed.close()


@pytest.mark.skipif(not live.on_postgres(), reason="Django's pool is PostgreSQL's (MCP_TEST_DB=postgres)")
def test_open_streams_hold_no_database_connection(
    gevent: live.Server, demo_project: live.Project, documents: dict[str, list[int]]
) -> None:
    """Four streams on a pool of two connections: each stream's request gives its connection back as the stream
    starts, so every stream is acknowledged, its access checks run, and a POST is answered."""
    doc = documents["alice"][3]
    wanted = {"resourceSubscriptions": [doc_uri(doc)]}
    streams = [listen_when_free(gevent, user, index, wanted) for user in ("alice", "bob") for index in range(2)]
    try:
        touch(demo_project, doc)
        assert [stream.next() for stream in streams[:2]] == [updated(doc_uri(doc), 0), updated(doc_uri(doc), 1)]
        status, payload = read(gevent, "alice", doc_uri(doc))
        assert status == 200, payload
        assert payload["result"]["contents"][0]["uri"] == doc_uri(doc)
    finally:
        for stream in streams:
            stream.close()


def test_a_client_that_goes_away_frees_its_stream(gevent: live.Server) -> None:
    """Bob may hold two streams (``STREAMS_PER_CALLER``); once his clients go away, the worker notices at its next
    keep-alive and he may listen twice again."""
    held = [listen_when_free(gevent, "bob", index, {"resourcesListChanged": True}) for index in range(2)]
    refused = SSE(gevent.url, "POST", listen_headers(gevent.token("bob")), listen_body("third", {}))
    assert refused.status == 429, refused.body
    for stream in held:
        stream.close()
    again: list[SSE] = []
    deadline = time.monotonic() + 60
    try:
        while len(again) < 2 and time.monotonic() < deadline:
            attempt = SSE(gevent.url, "POST", listen_headers(gevent.token("bob")), listen_body("again", {}))
            if attempt.status == 200:
                again.append(attempt)
            else:
                assert attempt.status == 429, attempt.body
                time.sleep(0.2)
        assert len(again) == 2, "the streams of clients that went away were not released"
        assert all(stream.next()["method"] == ACKNOWLEDGED for stream in again)
    finally:
        for stream in again:
            stream.close()


def test_a_worker_that_stops_ends_its_listens_with_the_final_answer(demo_project: live.Project) -> None:
    """gunicorn stops its gevent worker gracefully (``SIGTERM``): each listener gets the final result at once,
    well before ``--graceful-timeout`` (here 60 s, longer than the wait for the message) would cut it."""
    server = live.Server(demo_project, name="gevent-stopping", kind="gevent").start("--graceful-timeout", "60")
    try:
        stream = listen(server, "alice", "bye", {"resourcesListChanged": True})
        assert server.process is not None
        server.process.send_signal(signal.SIGTERM)
        assert stream.next(30) == final_result("bye")
        assert stream.closed.wait(30)
        assert server.process.wait(30) is not None
    finally:
        server.stop()


def test_a_listener_that_never_reads_is_ended_and_a_reading_one_is_not(
    gevent: live.Server, demo_project: live.Project
) -> None:
    """A write that waits past ``STREAM_SEND_TIMEOUT_SECONDS`` (a client that stopped reading) ends its stream, as
    under ``MCPEndpoint``; a listener of the same URI that reads keeps receiving, and the worker serves on."""
    from mcp_resources.subscriptions.broker import UPDATED, Log

    uri = "test://slow-consumer/" + "x" * 1900  # public, and every notification about it is about 2 KB
    demo_project.shell(
        "from django.contrib.auth import get_user_model\n"
        "from mcp_resources.models import StaticResource\n"
        "get_user_model().objects.get_or_create(username='carol')\n"
        f"StaticResource.objects.get_or_create(uri={uri!r}, defaults={{'name': 'slow', 'text': 'x'}})\n"
        "print('ok')"
    )
    token = gevent.token("carol")
    stuck = open_listen(gevent.port, token, uri, receive_buffer=4096)  # then never read again
    reader = Reader(open_listen(gevent.port, token, uri))
    reader.start()
    log = Log(demo_project.env["MCP_REDIS_URL"])  # the server's log: publishing as another process does
    try:
        deadline = time.monotonic() + 90
        while "a write waited past STREAM_SEND_TIMEOUT_SECONDS" not in gevent.logged():
            assert time.monotonic() < deadline, "the stream that is never read was not ended"
            for _ in range(20):
                log.append({"k": UPDATED, "t": uri})
            time.sleep(0.05)
        seen = reader.updates
        deadline = time.monotonic() + 30
        while reader.updates == seen:
            assert time.monotonic() < deadline, "the reading listener got nothing after the other was ended"
            assert not reader.closed, "the reading listener was ended too"
            log.append({"k": UPDATED, "t": uri})
            time.sleep(0.2)
        stuck.settimeout(30)
        with contextlib.suppress(ConnectionResetError):
            while stuck.recv(1 << 20):  # the stuck client finds its stream closed once it reads what was buffered
                pass
    finally:
        stuck.close()
        reader.sock.close()
    healthy(gevent)


OPEN_TWO_STREAMS = """
from gevent import monkey

monkey.patch_all()
import gc, io, json, sys

import django

django.setup()
from django.core.handlers.wsgi import WSGIHandler, WSGIRequest

headers, body, host = json.loads(sys.argv[1]), sys.argv[2].encode(), sys.argv[3]
handler, responses = WSGIHandler(), []
for _ in range(2):
    environ = {
        "REQUEST_METHOD": "POST", "PATH_INFO": "/mcp", "SCRIPT_NAME": "", "QUERY_STRING": "", "HTTP_HOST": host,
        "SERVER_NAME": "127.0.0.1", "SERVER_PORT": host.rpartition(":")[2], "SERVER_PROTOCOL": "HTTP/1.1",
        "wsgi.input": io.BytesIO(body), "wsgi.url_scheme": "http", "CONTENT_LENGTH": str(len(body)),
    }
    environ.update(("HTTP_" + name.upper().replace("-", "_"), value) for name, value in headers.items())
    environ["CONTENT_TYPE"] = environ.pop("HTTP_CONTENT_TYPE")
    response = handler(environ, lambda status, headers, exc_info=None: None)
    chunks = iter(response)
    assert next(chunks) == b""  # the stream is open
    assert b"notifications/subscriptions/acknowledged" in next(chunks)
    responses.append(response)
gc.collect()
print(sum(isinstance(thing, WSGIRequest) for thing in gc.get_objects()))
for response in responses:
    response.close()
"""


def test_an_open_stream_lets_go_of_its_request(gevent: live.Server, demo_project: live.Project) -> None:
    """Two open listens of one caller keep one request between them (the caller's, kept for the re-checks): each
    response lets go of its own once it has left Django's handler, as under MCPEndpoint (a request and what the
    middleware hung on it are a few KB a stream)."""
    headers = json.dumps(listen_headers(gevent.token("alice")))
    body = listen_body(7, {"resourcesListChanged": True}).decode()
    host = gevent.url.split("/")[2]
    env = {**demo_project.env, "MCP_RESOURCE_URI": gevent.url}
    done = subprocess.run(
        [sys.executable, "-c", OPEN_TWO_STREAMS, headers, body, host],
        cwd=live.ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == "1", done.stdout
