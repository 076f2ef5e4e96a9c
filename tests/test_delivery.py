"""Delivery on a log (issue 28): every notification carries the log's event id, a stream that falls behind catches
up from the log instead of ending, a client that reconnects receives exactly what it missed (access re-checked),
and one that comes back past the retention window is told to list again.

Through the project's ASGI application in-process (``tests.stream_support``), on the in-memory log unless a test
names Redis; changes are published from worker threads as a request's commit would publish them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.core import signals
from django.core.asgi import get_asgi_application

from mcp_resources.protocol.versions import V2025_11_25
from mcp_resources.subscriptions import broker, notify_resource_list_changed, notify_resource_updated
from mcp_resources.transport import fanout, streams
from mcp_resources.transport.fanout import delivery_counts
from mcp_resources.transport.streams import Stream, StreamPlan
from mcp_resources.transport.views import StreamAccess
from testproject.library.models import Document
from tests import live
from tests.stream_support import (
    ACKNOWLEDGED,
    EVENT_ID,
    LIST_CHANGED,
    SUBSCRIPTION_ID,
    TRUNCATED,
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

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("listening_settings", "no_stream_left_behind"),
]

UPDATED = "notifications/resources/updated"


def documents(owner: Any, count: int) -> list[Document]:
    return [Document.objects.create(owner=owner, title=f"D{i}", body="b") for i in range(count)]


def uri(doc: Document) -> str:
    return f"learn://documents/{doc.pk}"


def give_to(doc: Document, user: Any) -> None:
    doc.refresh_from_db()
    doc.owner = user
    doc.save()


async def listen(
    token: str, request_id: Any, notifications: dict[str, Any], resume: str | None = None, app: Any = None
) -> tuple[Exchange, dict[str, Any]]:
    """A listen stream read up to its acknowledgement; ``resume``: the last event id received before."""
    body = json.loads(listen_body(request_id, notifications))
    if resume is not None:
        body["params"]["_meta"][EVENT_ID] = resume
    stream = Exchange(app or application(), scope("POST", listen_headers(token)))
    await stream.start(json.dumps(body).encode())
    assert stream.status == 200, await stream.body()
    ack = await stream.event()
    assert ack["method"] == ACKNOWLEDGED
    return stream, ack


async def post(body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, str], Any]:
    exchange = await Exchange(application(), scope("POST", {"content-type": "application/json", **headers})).start(
        json.dumps(body).encode()
    )
    raw = await exchange.body()
    return exchange.status, exchange.headers, json.loads(raw) if raw else None


async def new_session(token: str, subscribe: list[str]) -> str:
    auth = {"authorization": f"Bearer {token}", "mcp-protocol-version": V2025_11_25}
    init = {"protocolVersion": V2025_11_25, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
    status, headers, _ = await post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}, auth)
    assert status == 200
    session = headers["mcp-session-id"]
    for target in subscribe:
        body = {"jsonrpc": "2.0", "id": 1, "method": "resources/subscribe", "params": {"uri": target}}
        status, _, _ = await post(body, {**auth, "mcp-session-id": session})
        assert status == 200
    return session


async def session_stream(token: str, session: str, last_event_id: str | None = None) -> Exchange:
    headers = {"authorization": f"Bearer {token}", "mcp-session-id": session, "mcp-protocol-version": V2025_11_25}
    if last_event_id is not None:
        headers["last-event-id"] = last_event_id
    stream = await Exchange(application(), scope("GET", headers)).start()
    assert stream.status == 200
    return stream


# Event ids -----------------------------------------------------------------------------------------------------


async def test_every_notification_carries_the_logs_event_id_in_order(
    alice: Any, make_token: Callable[..., str]
) -> None:
    (doc,) = await in_thread(documents, alice, 1)
    token = await in_thread(make_token, alice)
    stream, _ack = await listen(token, "ids", {"resourceSubscriptions": [uri(doc)], "resourcesListChanged": True})
    methods = []
    for _ in range(5):
        await in_thread(notify_resource_updated, uri(doc))
        await in_thread(notify_resource_list_changed)
        methods += [(await stream.event())["method"] for _ in range(2)]
    assert methods == [UPDATED, LIST_CHANGED] * 5  # an update is written before the list change published after it
    ids = [broker.parse_id(event_id) for event_id in stream.event_ids]
    assert None not in ids
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    await stream.disconnect()


async def test_one_access_decision_per_caller_and_change(
    alice: Any, make_token: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """30 streams of one document, opened with two tokens of the same user: each change is decided at most once
    per caller (changes whose decision had not started share one), never once per stream."""
    (doc,) = await in_thread(documents, alice, 1)
    first, second = await in_thread(make_token, alice), await in_thread(make_token, alice)
    opened = [(await listen(first, n, {"resourceSubscriptions": [uri(doc)]}))[0] for n in range(20)]
    opened += [(await listen(second, 20 + n, {"resourceSubscriptions": [uri(doc)]}))[0] for n in range(10)]
    decided: list[int] = []
    real_check_each = StreamAccess.check_each.__func__  # type: ignore[attr-defined]

    def counting(cls: type[StreamAccess], target: str, accesses: list[StreamAccess]) -> list[bool | None]:
        decided.append(len(accesses))
        return real_check_each(cls, target, accesses)

    monkeypatch.setattr(StreamAccess, "check_each", classmethod(counting))
    for _ in range(3):
        await in_thread(notify_resource_updated, uri(doc))
    for stream in opened:
        assert (await stream.event())["method"] == UPDATED
    assert set(decided) == {2}
    assert 1 <= len(decided) <= 3
    for stream in opened:
        await stream.disconnect()


async def test_the_uris_changed_meanwhile_are_decided_in_one_thread_hop() -> None:
    """Changes of several URIs that wait for a decision together are decided in one worker-thread hop, one request
    for Django (before: one hop, one request and so one database connection per URI), each with its own answer."""
    targets = [f"learn://documents/{n}" for n in range(5)]
    opened = []
    for target in targets:
        plan = StreamPlan(owner="b", uris={target}, list_changed=False, check=lambda u: u.endswith(("1", "3")))
        opened.append(Stream(plan))
        await opened[-1].open()
    started: list[object] = []

    def count(sender: object, **kwargs: Any) -> None:
        started.append(sender)

    signals.request_started.connect(count)
    try:
        hub = await fanout.get_hub()
        hub.receive([broker.Event(f"{10**12}-{n}", broker.UPDATED, target) for n, target in enumerate(targets)])
        decisions = [stream.queue[0][1] for stream in opened]
        answers = [await asyncio.wait_for(decision, 10) for decision in decisions]  # type: ignore[arg-type]
    finally:
        signals.request_started.disconnect(count)
        for stream in opened:
            stream.disconnected()
            stream.release()
    assert started.count(fanout.Hub) == 1
    assert [answers[n][stream.caller] for n, stream in enumerate(opened)] == [False, True, False, True, False]


# Falling behind: catch up from the log, never end ----------------------------------------------------------------


class BlockedClient:
    """An ASGI peer that stops reading after the acknowledgement until released."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.blocked = asyncio.Event()
        self.released = asyncio.Event()

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] != "http.response.body":
            return
        if self.bodies and not self.released.is_set():
            self.blocked.set()
            await self.released.wait()
        self.bodies.append(message.get("body", b""))


async def test_a_stream_that_falls_behind_catches_up_from_the_log_instead_of_ending(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before, a stream whose queue filled up (a slow client) was ended. Now it drops its queue and catches up from
    the log by its last event id: every list change arrives, in order, and the stream goes on."""
    monkeypatch.setattr(Stream, "queue_size", 3)
    plan = StreamPlan(owner="slow", uris=set(), list_changed=True, check=lambda _: True, subscription_id=7)
    stream = Stream(plan)
    await stream.open()
    client = BlockedClient()
    before = delivery_counts()

    async def serve() -> None:
        async for chunk in stream.events():
            await client.send({"type": "http.response.body", "body": chunk})

    task = asyncio.ensure_future(serve())
    await in_thread(notify_resource_list_changed)
    await asyncio.wait_for(client.blocked.wait(), 5)  # the first change is being written; the client does not read
    await in_thread(lambda: [notify_resource_list_changed() for _ in range(20)])
    while not stream.behind:
        await asyncio.sleep(0.01)
    client.released.set()
    while len(client.bodies) < 22:
        await asyncio.sleep(0.01)
    stream.disconnected()
    await asyncio.wait_for(task, 5)
    events = [body for body in client.bodies if b"event: message" in body]
    assert [b"list_changed" in body for body in events[1:]] == [True] * 21
    ids = [broker.parse_id(body.split(b"\r\n")[0][4:].decode()) for body in events[1:]]
    assert ids == sorted(ids)
    assert len(set(ids)) == 21
    after = delivery_counts()
    assert after["caught_up"] > before.get("caught_up", 0)
    assert not any(after.get(key, 0) - before.get(key, 0) for key in after if key.startswith("ended_"))


async def test_shutdown_ends_the_streams_of_its_own_loop() -> None:
    """``end_all_streams`` (a loop's lifespan shutdown) ends the streams of its loop with the final result; a
    stream served by another loop of the process keeps going until that loop ends it."""
    plan = StreamPlan(owner="elsewhere", uris=set(), list_changed=False, check=lambda _: True, subscription_id=8)
    bodies: list[bytes] = []

    async def start() -> asyncio.Future[None]:
        stream = Stream(plan)
        await stream.open()

        async def serve() -> None:
            async for chunk in stream.events():
                bodies.append(chunk)

        task = asyncio.ensure_future(serve())
        while not bodies:
            await asyncio.sleep(0.01)
        return task

    other = asyncio.new_event_loop()
    thread = threading.Thread(target=other.run_forever, daemon=True)
    thread.start()
    try:
        task = asyncio.run_coroutine_threadsafe(start(), other).result(5)
        await streams.end_all_streams(timeout=1)
        assert not task.done()  # the other loop's stream was not touched
        asyncio.run_coroutine_threadsafe(streams.end_all_streams(), other).result(5)
        assert task.done()
        assert b'"resultType":"complete"' in b"".join(bodies)
    finally:
        other.call_soon_threadsafe(other.stop)
        thread.join(5)
        other.close()


# Resuming ----------------------------------------------------------------------------------------------------------


async def test_a_listen_resumes_after_its_last_event_id_access_rechecked(
    alice: Any, bob: Any, make_token: Callable[..., str]
) -> None:
    """What happened while the client was away is replayed, in order, by the log: the update of a document it may
    still read and the list change, not the update of the document given to bob meanwhile."""
    kept, given = await in_thread(documents, alice, 2)
    token = await in_thread(make_token, alice)
    wanted = {"resourceSubscriptions": [uri(kept), uri(given)], "resourcesListChanged": True}
    first, _ = await listen(token, "r1", wanted)
    await in_thread(notify_resource_updated, uri(kept))
    assert await first.event() == updated(uri(kept), "r1")
    last_seen = first.event_ids[-1]
    await first.disconnect()
    await in_thread(give_to, given, bob)  # an update of `given`, which alice may no longer read
    await in_thread(notify_resource_updated, uri(kept))
    await in_thread(notify_resource_list_changed)
    again, ack = await listen(token, "r2", wanted, resume=last_seen)
    assert ack["params"]["notifications"]["resourceSubscriptions"] == [uri(kept)]  # decided afresh
    assert await again.event() == updated(uri(kept), "r2")
    assert await again.event() == list_changed("r2")
    await again.silent(0.3)
    await in_thread(notify_resource_updated, uri(kept))  # then live, as any stream
    assert await again.event() == updated(uri(kept), "r2")
    await again.disconnect()


async def test_a_listen_resumed_with_an_id_that_is_not_the_logs_is_refused(
    alice: Any, make_token: Callable[..., str]
) -> None:
    token = await in_thread(make_token, alice)
    body = json.loads(listen_body(3, {"resourcesListChanged": True}))
    body["params"]["_meta"][EVENT_ID] = "yesterday"
    stream = Exchange(application(), scope("POST", listen_headers(token)))
    await stream.start(json.dumps(body).encode())
    payload = await stream.json()
    assert payload["id"] == 3
    assert payload["error"]["code"] == -32602


async def test_a_session_stream_resumes_after_last_event_id(
    alice: Any, bob: Any, make_token: Callable[..., str]
) -> None:
    kept, given = await in_thread(documents, alice, 2)
    token = await in_thread(make_token, alice)
    session = await new_session(token, [uri(kept), uri(given)])
    first = await session_stream(token, session)
    await in_thread(notify_resource_updated, uri(kept))
    assert await first.event() == updated(uri(kept))
    last_seen = first.event_ids[-1]
    await first.disconnect()
    await in_thread(give_to, given, bob)
    await in_thread(notify_resource_list_changed)
    await in_thread(notify_resource_updated, uri(kept))
    again = await session_stream(token, session, last_event_id=last_seen)
    assert await again.event() == list_changed()
    assert await again.event() == updated(uri(kept))
    await again.silent(0.3)
    await again.disconnect()


def past_the_window() -> None:
    """Trim the log to its newest entry, as the retention trims it once the others are older than the window
    (``test_the_log_keeps_order_and_knows_its_window`` trims by time)."""
    broker.get_log().client.xtrim(broker.KEY, maxlen=1, approximate=False)


async def test_past_the_retention_window_a_listen_ends_telling_the_client_to_list_again(
    alice: Any, make_token: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(broker, "_logs", {})  # a log of this test's own: no other test sees it trimmed
    (doc,) = await in_thread(documents, alice, 1)
    token = await in_thread(make_token, alice)
    first, _ = await listen(token, "w1", {"resourceSubscriptions": [uri(doc)]})
    await in_thread(notify_resource_updated, uri(doc))
    await first.event()
    last_seen = first.event_ids[-1]
    await first.disconnect()
    await in_thread(notify_resource_updated, uri(doc))
    await in_thread(notify_resource_list_changed)
    past_the_window()
    again, _ = await listen(token, "w2", {"resourceSubscriptions": [uri(doc)]}, resume=last_seen)
    final = await again.event()
    assert final == {
        "jsonrpc": "2.0",
        "id": "w2",
        "result": {"resultType": "complete", "_meta": {SUBSCRIPTION_ID: "w2", TRUNCATED: True}},
    }
    assert await again.until_closed(5) == []
    await again.finished()
    assert final != final_result("w2")  # distinguishable from a plain end


async def test_past_the_retention_window_a_session_stream_tells_its_client_to_read_again(
    alice: Any, make_token: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A GET stream that ended would be reconnected with the same Last-Event-ID forever: instead it tells its client
    to list and read everything again (``list_changed``, then ``updated`` for each subscribed URI) and goes on."""
    monkeypatch.setattr(broker, "_logs", {})  # a log of this test's own: no other test sees it trimmed
    docs = await in_thread(documents, alice, 2)
    token = await in_thread(make_token, alice)
    session = await new_session(token, [uri(doc) for doc in docs])
    first = await session_stream(token, session)
    await in_thread(notify_resource_updated, uri(docs[0]))
    await first.event()
    last_seen = first.event_ids[-1]
    await first.disconnect()
    await in_thread(notify_resource_updated, uri(docs[1]))  # missed, and soon past the window
    await in_thread(notify_resource_updated, uri(docs[1]))
    past_the_window()
    again = await session_stream(token, session, last_event_id=last_seen)
    assert await again.event() == list_changed()
    assert sorted([(await again.event())["params"]["uri"] for _ in docs]) == sorted(uri(doc) for doc in docs)
    await in_thread(notify_resource_updated, uri(docs[0]))
    assert await again.event() == updated(uri(docs[0]))
    await again.disconnect()


# Access that ends ------------------------------------------------------------------------------------------------


async def test_a_revoked_token_ends_its_stream_without_waiting_for_an_update(
    alice: Any, make_token: Callable[..., str]
) -> None:
    """Revoking the token (django-oauth-toolkit's ``AccessToken.revoke()``, which its revocation endpoint, the
    admin and the connected-apps page come down to) ends the stream with its final result at once. Before, it
    lasted until the next update of one of its URIs (or the token's expiry)."""
    from oauth2_provider.models import get_access_token_model

    (doc,) = await in_thread(documents, alice, 1)
    token = await in_thread(make_token, alice)
    stream, _ = await listen(token, "revoked", {"resourceSubscriptions": [uri(doc)]})

    def revoke() -> None:
        for row in get_access_token_model().objects.filter(user=alice):
            row.revoke()

    await in_thread(revoke)
    assert await stream.until_closed(5) == [final_result("revoked")]
    await stream.finished()


async def test_the_revocation_endpoint_ends_the_stream(alice: Any, make_token: Callable[..., str]) -> None:
    (doc,) = await in_thread(documents, alice, 1)
    token = await in_thread(make_token, alice)
    stream, _ = await listen(token, "endpoint", {"resourceSubscriptions": [uri(doc)]})
    from django.test import Client
    from oauth2_provider.models import get_access_token_model

    def revoke_through_the_endpoint() -> int:
        client_id = get_access_token_model().objects.get(user=alice).application.client_id
        return Client().post("/o/revoke_token/", {"token": token, "client_id": client_id}).status_code

    assert await in_thread(revoke_through_the_endpoint) == 200
    assert await stream.until_closed(5) == [final_result("endpoint")]
    await stream.finished()


async def test_disconnecting_a_client_on_the_connected_apps_page_ends_its_stream(
    alice: Any, make_token: Callable[..., str]
) -> None:
    """A person who takes an AI client back on the connected-apps page ends its open listen streams at once, with
    the final result, as a revocation does."""
    (doc,) = await in_thread(documents, alice, 1)
    token = await in_thread(make_token, alice)
    stream, _ = await listen(token, "disconnected", {"resourceSubscriptions": [uri(doc)]})
    from django.test import Client
    from oauth2_provider.models import get_access_token_model

    def disconnect() -> int:
        client_id = get_access_token_model().objects.get(user=alice).application.client_id
        client = Client()
        client.force_login(alice)
        return client.post("/o/connected/", {"client_id": client_id}).status_code

    assert await in_thread(disconnect) == 303
    assert await stream.until_closed(5) == [final_result("disconnected")]
    await stream.finished()


# Under Django's own ASGI handler ---------------------------------------------------------------------------------


async def test_streams_work_under_a_plain_get_asgi_application(
    alice: Any, make_token: Callable[..., str], caplog: Any
) -> None:
    """Before, ``subscriptions/listen`` answered -32601 there. Now the view's stream response is served by Django's
    handler (one thread per stream, which W014 names)."""
    (doc,) = await in_thread(documents, alice, 1)
    token = await in_thread(make_token, alice)
    app = get_asgi_application()
    stream, ack = await listen(token, "plain", {"resourceSubscriptions": [uri(doc)]}, app=app)
    assert ack["params"]["notifications"]["resourceSubscriptions"] == [uri(doc)]
    assert stream.headers["content-type"] == "text/event-stream"
    await in_thread(notify_resource_updated, uri(doc))
    assert await stream.event() == updated(uri(doc), "plain")
    await stream.disconnect()
    body = {"jsonrpc": "2.0", "id": 9, "method": "server/discover", "params": {"_meta": meta()}}
    discover = Exchange(app, scope("POST", {**listen_headers(token), "mcp-method": "server/discover"}))
    await discover.start(json.dumps(body).encode())
    assert (await discover.json())["result"]["capabilities"]["resources"] == {"subscribe": True, "listChanged": True}


# Publishing ------------------------------------------------------------------------------------------------------


def connections_received(url: str) -> int:
    client = live.redis_client(int(url.rsplit("/", 1)[1]))
    try:
        return int(client.info("stats")["total_connections_received"])
    finally:
        client.close()


def test_a_thousand_publications_reuse_the_pools_connections(settings: Any) -> None:
    """Before, each publication from sync code opened a Redis connection (200 from one request: 198 connections).
    Now they share the process's pool: 1,000 from one thread open at most one; none opens more than the pool."""
    with live.redis_database() as url:
        settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "DELIVERY_URL": url}
        broker.get_log().last_id()  # the pool's first connection
        before = connections_received(url)
        for index in range(1000):
            notify_resource_updated(f"learn://documents/{index}")
        opened = connections_received(url) - before - 1  # the one that asks
        assert 0 <= opened <= 1 <= broker.POOL_CONNECTIONS
        assert broker.get_log().replay(broker.ZERO, 2000)[0][-1].target == "learn://documents/999"


@pytest.mark.parametrize("backend", ["memory", "redis"])
def test_the_log_keeps_order_and_knows_its_window(settings: Any, backend: str) -> None:
    """One log on both backends (a Redis server, or this process's in-process Redis): ids in order, what followed
    an id, and the window's end once something after an id was trimmed (by count, or by time as publishing trims)."""
    with contextlib.ExitStack() as stack:
        if backend == "redis":
            url = stack.enter_context(live.redis_database())
            settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "DELIVERY_URL": url}
        log = broker.get_log() if backend == "redis" else broker.Log()
        assert log.replay(broker.ZERO, 10) == ([], True)
        ids = [log.append({"k": broker.LIST_CHANGED}) for _ in range(5)]
        assert ids == sorted(ids, key=broker.parse_id)
        events, complete = log.replay(ids[1], 10)
        assert complete
        assert [event.id for event in events] == ids[2:]
        assert [event.id for event in log.read(ids[2], 0.1)] == ids[3:]
        log.client.xtrim(broker.KEY, maxlen=2, approximate=False)
        assert log.replay(ids[3], 10)[1] is True  # nothing after ids[3] was trimmed
        assert log.replay(ids[1], 10)[1] is False  # ids[2] was: past the window
        assert log.replay("99999999999999-0", 10)[1] is False  # an id this log never gave (another Redis)
        # Publishing trims by time, counted back from the log's newest id (Redis drops whole nodes of 100 entries).
        old = [log.append({"k": broker.LIST_CHANGED}) for _ in range(150)]
        hour_later = f"{broker.parse_id(old[-1])[0] + 3_600_001}-0"
        log.client.xadd(broker.KEY, {"k": broker.LIST_CHANGED}, id=hour_later)
        later = log.append({"k": broker.LIST_CHANGED})
        assert log.replay(ids[3], 10)[1] is False
        assert log.replay(old[0], 10)[1] is False
        assert log.replay(later, 10) == ([], True)
    assert fanout.CONCURRENT_DECISIONS >= 1


def test_a_reader_no_open_stream_uses_stops_and_the_next_stream_starts_another(monkeypatch: pytest.MonkeyPatch) -> None:
    """A log's reader lives while an event loop with streams uses it: once every loop of its hubs has closed (or
    ``DELIVERY_URL`` moved on), it stops instead of reading (and logging the outages of) that log for ever."""
    log = broker.Log()
    loop = asyncio.new_event_loop()
    reader = fanout.reader_for(log)
    fanout.Hub(reader, loop)
    monkeypatch.setattr(fanout, "IDLE_SECONDS", 0.0)
    assert fanout.reader_for(log) is reader  # a loop still open keeps it
    loop.close()
    reader.join(timeout=30)
    assert reader.retired
    assert not reader.is_alive()
    with pytest.raises(fanout.ReaderRetired):
        fanout.Hub(reader, asyncio.new_event_loop())
    monkeypatch.setattr(fanout, "IDLE_SECONDS", 60.0)
    again = fanout.reader_for(log)
    assert again is not reader
    assert again.is_alive()
    other = asyncio.new_event_loop()
    fanout.Hub(again, other)
    monkeypatch.setattr(fanout, "IDLE_SECONDS", 0.0)
    other.close()
    again.join(timeout=30)
    assert again.retired


def test_a_log_outage_is_an_error_once_streams_wait_on_it_and_debug_before(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A reader whose event loop is still open but has no stream (a test's loop, a worker between streams) logs an
    unreachable log at DEBUG: before, it logged an error with its traceback, which error trackers and strict test
    suites see as a failure though nothing waited. Once a stream waits, the outage is an error, once."""
    import redis

    with live.redis_database() as url:
        log = broker.Log(url)
        reader = fanout.reader_for(log)
    log.client = redis.Redis.from_url("redis://127.0.0.1:1/0")  # the network to Redis is cut: nothing answers
    loop = asyncio.new_event_loop()
    hub = fanout.Hub(reader, loop)

    def failures(level: int) -> int:
        return sum("reading the log failed" in r.getMessage() and r.levelno == level for r in caplog.records)

    with caplog.at_level(logging.DEBUG, logger="mcp_resources.subscriptions"):
        limit = time.monotonic() + 30
        while failures(logging.DEBUG) < 2:
            assert time.monotonic() < limit, caplog.text
            time.sleep(0.05)
        assert failures(logging.ERROR) == 0
        hub.members[("l", "")] = {object()}  # type: ignore[arg-type]  # a stream waits on list changes
        while failures(logging.ERROR) < 1 or failures(logging.DEBUG) < 3:
            assert time.monotonic() < limit, caplog.text
            time.sleep(0.05)
        assert failures(logging.ERROR) == 1
    hub.members.clear()
    monkeypatch.setattr(fanout, "IDLE_SECONDS", 0.0)
    loop.close()
    reader.join(timeout=30)
    assert reader.retired


async def test_a_stream_starts_at_the_logs_end_not_where_its_hub_has_read_to() -> None:
    """Before, a stream started from where its loop's hub had read the log to: a change published just before it
    opened, which the hub had not read yet, was sent to it as if it had followed. Now it starts at the log's end as
    it joins, and its acknowledgement's id is that end."""
    await fanout.get_hub()  # the loop's hub exists and is up to date
    plan = StreamPlan(owner="late", uris=set(), list_changed=True, check=lambda _: True, subscription_id=9)
    stream = Stream(plan)
    before = broker.publish(broker.LIST_CHANGED)  # published from this loop: the hub cannot have read it yet
    assert before is not None
    await stream.open()
    assert stream.cursor == before
    events = stream.events()
    acknowledged = await events.__anext__()
    assert f'django-mcp-resources/eventId":"{before}"'.encode() in acknowledged
    after = await in_thread(broker.publish, broker.LIST_CHANGED)
    chunk = await asyncio.wait_for(events.__anext__(), 5)
    assert f"id: {after}".encode() in chunk  # the change after it, not the one before
    assert f"id: {before}".encode() not in chunk
    stream.end("shutdown")
    async for _final in events:
        pass
