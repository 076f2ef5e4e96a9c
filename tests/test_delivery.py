"""Delivery you can count on: every notification for a stream that keeps reading arrives, or the stream ends with
its final result (issue 13).

Through the project's ASGI application in-process (``tests.stream_support``), on Channels' in-memory layer; changes
are published from worker threads as a request's commit would publish them. What used to happen: each stream had a
channel of its own (the layer buffers ``capacity`` messages per channel) and re-checked access one message at a time
in a worker thread, so under a steady rate of changes the streams fell behind, their channels filled and the layer
dropped the rest without a word. Now the process has one channel, a change is decided once per caller, and a
message the layer drops (a skipped publication number) or a stream's full queue ends the streams concerned with a
final message, counted and logged.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mcp_resources.subscriptions import broker, notify_resource_updated
from mcp_resources.transport import fanout, streams
from mcp_resources.transport.fanout import Sequence, delivery_counts
from mcp_resources.transport.streams import Stream, StreamPlan
from mcp_resources.transport.views import StreamAccess
from testproject.library.models import Document
from tests import live
from tests.conftest import RESOURCE
from tests.stream_support import (
    ACKNOWLEDGED,
    Exchange,
    application,
    final_result,
    in_thread,
    listen_body,
    listen_headers,
    scope,
    until,
)

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]

UPDATED = "notifications/resources/updated"
_ids: dict[int, Any] = {}


@pytest.fixture(autouse=True)
def mcp_settings(settings: Any) -> None:
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "RESOURCE_URI": RESOURCE, "STREAM_KEEPALIVE_SECONDS": 30}
    settings.MCP_RESOURCES["STREAMS_PER_CALLER"] = 1000
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer", "CONFIG": {}}}


@pytest.fixture(autouse=True)
def no_stream_left_behind() -> Any:
    yield
    assert dict(streams._open_streams) == {}


def documents(owner: Any, count: int) -> list[Document]:
    return [Document.objects.create(owner=owner, title=f"D{i}", body="b") for i in range(count)]


def uri(doc: Document) -> str:
    return f"learn://documents/{doc.pk}"


async def open_streams(token: str, doc_uris: list[str], per_uri: int) -> dict[str, list[Exchange]]:
    """``per_uri`` listen streams on each URI, each read up to its acknowledgement."""
    opened: dict[str, list[Exchange]] = {}
    for index, target in enumerate(doc_uris):
        for n in range(per_uri):
            stream = Exchange(application(), scope("POST", listen_headers(token)))
            request_id = f"{index}-{n}"
            _ids[id(stream)] = request_id
            body = listen_body(request_id, {"resourceSubscriptions": [target]})
            await stream.start(body)
            assert stream.status == 200
            ack = await stream.event()
            assert ack["method"] == ACKNOWLEDGED
            assert ack["params"]["notifications"]["resourceSubscriptions"] == [target]
            opened.setdefault(target, []).append(stream)
    return opened


def publish_paced(doc_uris: list[str], rounds: int, per_second: float) -> None:
    """``rounds`` updates of every URI, ``per_second`` publications a second (a steady stream of saves)."""
    gap = 1 / per_second
    next_at = time.monotonic()
    for _ in range(rounds):
        for target in doc_uris:
            notify_resource_updated(target)
            next_at += gap
            time.sleep(max(0.0, next_at - time.monotonic()))


async def updates_received(stream: Exchange, expected: int, timeout: float) -> list[dict[str, Any]]:
    """The stream's next ``expected`` messages (fewer if it ends or stays silent for ``timeout`` seconds)."""
    messages: list[dict[str, Any]] = []
    while len(messages) < expected:
        try:
            message = await stream.event(timeout)
        except (EOFError, TimeoutError):
            break
        messages.append(message)
        if "result" in message:
            break
    return messages


async def test_every_update_reaches_every_stream_that_keeps_reading(alice: Any, make_token: Callable[..., str]) -> None:
    """Failure 1 of the issue, scaled to a test: 40 streams on 2 documents, 150 updates of each document at 300
    saves a second. Each stream's 150 updates outnumber what the layer buffers for a channel (100), so a stream
    that falls behind by that much loses messages: before, every one of them re-checked every update on its own and
    lost most of them silently. Every stream now receives every update of its document, in order, and none ends."""
    docs = await in_thread(documents, alice, 2)
    doc_uris = [uri(doc) for doc in docs]
    token = await in_thread(make_token, alice)
    opened = await open_streams(token, doc_uris, per_uri=20)
    before = delivery_counts()
    rounds = 150
    await in_thread(publish_paced, doc_uris, rounds, 300.0)
    for target, group in opened.items():
        for stream in group:
            messages = await updates_received(stream, rounds, timeout=10)
            assert [m.get("method") for m in messages] == [UPDATED] * rounds, (target, len(messages), messages[-1:])
            assert all(m["params"]["uri"] == target for m in messages)
    after = delivery_counts()
    assert after.get("delivered", 0) - before.get("delivered", 0) == rounds * 40
    assert not any(after.get(key, 0) - before.get(key, 0) for key in after if key.startswith("ended_"))
    for group in opened.values():
        for stream in group:
            await stream.disconnect()


@pytest.fixture
def redis_layer(settings: Any) -> Iterator[str]:
    """Channels-redis on a Redis database of this test's own (skipped without Redis, failed under ``CI``)."""
    with live.redis_database() as url:
        settings.CHANNEL_LAYERS = {
            "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [url]}}
        }
        yield url


def publish_from_elsewhere(redis_url: str, doc_uris: list[str], rounds: int, per_second: float) -> None:
    """Publish as another process would: a channel layer and an event loop of its own, at a steady rate that does
    not wait for the server (in-process publishing waits for the server's loop, which slows it down)."""
    from channels_redis.core import RedisChannelLayer

    async def run() -> None:
        layer = RedisChannelLayer(hosts=[redis_url])
        gap = 1 / per_second
        next_at = time.monotonic()
        try:
            for _ in range(rounds):
                for target in doc_uris:
                    group = broker.uri_group(target)
                    await layer.group_send(group, broker.numbered(group, {"type": broker.UPDATED, "uri": target}))
                    next_at += gap
                    await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        finally:
            await layer.close_pools()

    asyncio.run(run())


async def test_every_update_published_by_another_process_reaches_every_stream(
    alice: Any, make_token: Callable[..., str], redis_layer: str
) -> None:
    """The issue's failure 1 on Redis: 200 streams on 2 documents, 120 updates of each at 40 a second from
    "another process". Before, the 200 streams' channels shared the process's Redis queue (at most ``capacity``,
    100, messages) and each stream re-checked every update alone (8,000 checks a second): the queue overflowed and
    channels-redis dropped messages silently. Every stream now receives every update of its document."""
    docs = await in_thread(documents, alice, 2)
    doc_uris = [uri(doc) for doc in docs]
    token = await in_thread(make_token, alice)
    opened = await open_streams(token, doc_uris, per_uri=100)
    before = delivery_counts()
    rounds = 120
    await in_thread(publish_from_elsewhere, redis_layer, doc_uris, rounds, 40.0)
    for target, group in opened.items():
        for stream in group:
            messages = await updates_received(stream, rounds, timeout=20)
            assert [m.get("method") for m in messages] == [UPDATED] * rounds, (target, len(messages), messages[-1:])
    after = delivery_counts()
    assert after.get("delivered", 0) - before.get("delivered", 0) == rounds * 200
    assert not any(after.get(key, 0) - before.get(key, 0) for key in after if key.startswith("ended_"))
    for group in opened.values():
        for stream in group:
            await stream.disconnect()


async def test_one_access_decision_per_caller_and_change(
    alice: Any, make_token: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """30 streams of one document, opened with two tokens of the same user: each change re-authenticates and
    decides twice (once per caller), not 30 times."""
    (doc,) = await in_thread(documents, alice, 1)
    first, second = await in_thread(make_token, alice), await in_thread(make_token, alice)
    opened = (await open_streams(first, [uri(doc)], per_uri=20))[uri(doc)]
    opened += (await open_streams(second, [uri(doc)], per_uri=10))[uri(doc)]
    decided: list[int] = []
    real_check_each = StreamAccess.check_each.__func__  # type: ignore[attr-defined]

    def counting(cls: type[StreamAccess], target: str, accesses: list[StreamAccess]) -> list[bool | None]:
        decided.append(len(accesses))
        return real_check_each(cls, target, accesses)

    monkeypatch.setattr(StreamAccess, "check_each", classmethod(counting))
    for _ in range(3):
        await in_thread(notify_resource_updated, uri(doc))
    for stream in opened:
        messages = await updates_received(stream, 3, timeout=10)
        assert [m.get("method") for m in messages] == [UPDATED] * 3
    assert decided == [2, 2, 2]
    for stream in opened:
        await stream.disconnect()


async def test_a_stream_receives_its_messages_in_the_order_they_were_published(
    alice: Any, make_token: Callable[..., str]
) -> None:
    """An update waits for its access decision in a worker thread; a list change published after it needs none,
    yet is delivered after it: a client that re-lists on the list change has already been told of the update."""
    (doc,) = await in_thread(documents, alice, 1)
    token = await in_thread(make_token, alice)
    stream = Exchange(application(), scope("POST", listen_headers(token)))
    _ids[id(stream)] = "ordered"
    await stream.start(listen_body("ordered", {"resourceSubscriptions": [uri(doc)], "resourcesListChanged": True}))
    assert (await stream.event())["method"] == ACKNOWLEDGED
    for _ in range(5):
        await broker.apublish(broker.uri_group(uri(doc)), {"type": broker.UPDATED, "uri": uri(doc)})
        await broker.apublish(broker.LIST_CHANGED_GROUP, {"type": broker.LIST_CHANGED})
    methods = [(await stream.event())["method"] for _ in range(10)]
    assert methods == [UPDATED, "notifications/resources/list_changed"] * 5
    await stream.disconnect()


async def dropped_publications_end_their_streams(
    alice: Any, make_token: Callable[..., str], caplog: Any, published: int, sent: set[int]
) -> None:
    """Two streams on each of two documents; ``published`` numbered publications of the first, of which the layer
    delivers only the numbers in ``sent`` (from 0). The first document's streams receive those, then their final
    result, counted and logged as a loss; the second document's streams go on."""
    docs = await in_thread(documents, alice, 2)
    token = await in_thread(make_token, alice)
    opened = await open_streams(token, [uri(docs[0]), uri(docs[1])], per_uri=2)
    caplog.set_level(logging.WARNING, logger="mcp_resources.subscriptions")
    before = delivery_counts()
    group = broker.uri_group(uri(docs[0]))
    layer = broker.get_layer()
    for number in range(published):
        message = broker.numbered(group, {"type": broker.UPDATED, "uri": uri(docs[0])})
        if number in sent:
            await layer.group_send(group, message)
    for stream in opened[uri(docs[0])]:
        messages = await stream.until_closed(timeout=10)
        assert messages[-1] == final_result(stream_id(stream)), messages
        assert [m["method"] for m in messages[:-1]] == [UPDATED] * len(sent)  # what came, then the end: no silent gap
    lost = published - len(sent)
    after = delivery_counts()
    assert after["lost_messages"] - before.get("lost_messages", 0) == lost
    assert after["ended_lost"] - before.get("ended_lost", 0) == 2
    assert f"the channel layer dropped {lost} message(s) for 2 stream(s) of this process" in caplog.text
    await in_thread(notify_resource_updated, uri(docs[1]))
    for stream in opened[uri(docs[1])]:
        assert (await stream.event())["method"] == UPDATED
        await stream.disconnect()


async def test_messages_the_layer_drops_end_the_streams_that_missed_them(
    alice: Any, make_token: Callable[..., str], monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    """A layer drops what does not fit in a channel's ``capacity`` without a word (Channels' layers do): here 7 of
    11 numbered publications never reach the process, as when its channel is full. The skipped numbers are
    noticed, and the streams of that document end with their final result; a stream of another document goes on."""
    monkeypatch.setattr(fanout, "LOSS_GRACE_SECONDS", 0.2)
    await dropped_publications_end_their_streams(alice, make_token, caplog, published=11, sent={0, 1, 2, 10})


async def test_the_last_publications_before_a_silence_are_not_lost_silently(
    alice: Any, make_token: Callable[..., str], monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    """The layer drops the last 2 of 5 numbered publications and nothing follows them. Before, no later number
    revealed the gap: the streams stayed open, two updates short, and nothing was logged. The publisher's fence
    (its last number, sent once the group falls silent) reveals them: the streams of that document end with their
    final result; a stream of another document goes on."""
    monkeypatch.setattr(broker, "FENCE_DELAY_SECONDS", 0.2, raising=False)
    monkeypatch.setattr(fanout, "LOSS_GRACE_SECONDS", 0.2)
    await dropped_publications_end_their_streams(alice, make_token, caplog, published=5, sent={0, 1, 2})


async def test_a_fence_dropped_with_the_publications_is_sent_again(
    alice: Any, make_token: Callable[..., str], monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    """A receiver stalled for longer than the fence delay (its channel still full) drops the first fence with the
    last publications. Before, nothing else followed them: the streams stayed open, two updates short. The
    publisher sends the fence a second time, later: the streams of that document end with their final result."""
    monkeypatch.setattr(broker, "FENCE_DELAY_SECONDS", 0.2)
    monkeypatch.setattr(broker, "FENCE_REPEAT_SECONDS", 0.3)
    monkeypatch.setattr(fanout, "LOSS_GRACE_SECONDS", 0.2)
    send, dropped = broker._send, set()

    def dropping_first_fences(group: str, message: dict[str, Any], run: Any = None) -> None:
        if message.get("type") == broker.FENCE and group not in dropped:
            dropped.add(group)  # as a full channel drops it
            return
        send(group, message, run)

    monkeypatch.setattr(broker, "_send", dropping_first_fences)
    await dropped_publications_end_their_streams(alice, make_token, caplog, published=5, sent={0, 1, 2})
    assert dropped


async def test_a_fence_after_publications_that_all_arrived_ends_nothing(
    alice: Any, make_token: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every publication arrived: the fences that follow each silence find nothing missing, and the stream goes on
    receiving (it is neither ended nor sent the fence)."""
    monkeypatch.setattr(broker, "FENCE_DELAY_SECONDS", 0.1)
    monkeypatch.setattr(fanout, "LOSS_GRACE_SECONDS", 0.1)
    doc = (await in_thread(documents, alice, 1))[0]
    token = await in_thread(make_token, alice)
    stream = (await open_streams(token, [uri(doc)], per_uri=1))[uri(doc)][0]
    before = delivery_counts()
    for _ in range(2):
        for _ in range(3):
            await in_thread(notify_resource_updated, uri(doc))
        assert [(await stream.event())["method"] for _ in range(3)] == [UPDATED] * 3
        await asyncio.sleep(0.1 + 0.1 + fanout.TICK_SECONDS + 0.3)  # the fence, its grace, a tick of the fan-out
    await in_thread(notify_resource_updated, uri(doc))
    assert (await stream.event())["method"] == UPDATED
    after = delivery_counts()
    assert after.get("lost_messages", 0) == before.get("lost_messages", 0)
    assert after.get("ended_lost", 0) == before.get("ended_lost", 0)
    await stream.disconnect()


SHORT_LIVED_PUBLISHER = """
import asyncio, sys
import django
django.setup()
from django.conf import settings
settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer",
                                       "CONFIG": {"hosts": [sys.argv[1]]}}}
from mcp_resources.subscriptions import broker
uri = sys.argv[2]
group = broker.uri_group(uri)
first = broker.numbered(group, {"type": broker.UPDATED, "uri": uri})
broker.numbered(group, {"type": broker.UPDATED, "uri": uri})  # the layer dropped this one
asyncio.run(broker.get_layer().group_send(group, first))
# and the process exits at once, long before its fence would fall due
"""


async def test_a_publisher_that_exits_sends_its_fences_first(
    alice: Any, make_token: Callable[..., str], redis_layer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A management command or a task worker publishes and exits before the fence delay: its fences go out as it
    exits, so a last publication the layer dropped is still noticed (here on Redis, from another process)."""
    monkeypatch.setattr(fanout, "LOSS_GRACE_SECONDS", 0.2)
    doc = (await in_thread(documents, alice, 1))[0]
    token = await in_thread(make_token, alice)
    stream = (await open_streams(token, [uri(doc)], per_uri=1))[uri(doc)][0]
    before = delivery_counts()
    env = live._base_env("testproject.settings")
    started = time.monotonic()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", SHORT_LIVED_PUBLISHER, redis_layer, uri(doc), env=env, stderr=asyncio.subprocess.PIPE
    )
    _, stderr = await process.communicate()
    assert process.returncode == 0, stderr.decode()
    assert time.monotonic() - started < 60
    messages = await stream.until_closed(timeout=15)
    assert [m.get("method") for m in messages[:-1]] == [UPDATED]
    assert messages[-1] == final_result(stream_id(stream)), messages
    assert delivery_counts()["lost_messages"] - before.get("lost_messages", 0) == 1


def stream_id(stream: Exchange) -> Any:
    """The subscription id a stream opened by :func:`open_streams` was given (its listen request's id)."""
    return _ids[id(stream)]


class BlockedClient:
    """The ASGI side of a client that stops reading after the acknowledgement: writes block until released."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.released = asyncio.Event()
        self.blocked = asyncio.Event()  # a write is waiting for the client to read
        self.gone = asyncio.Event()

    async def receive(self) -> dict[str, Any]:
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            if self.bodies and message.get("more_body") and not self.released.is_set():
                self.blocked.set()
                await self.released.wait()
            self.bodies.append(message.get("body", b""))


async def test_a_stream_whose_queue_overflows_ends_with_its_final_result(settings: Any, caplog: Any) -> None:
    """A client that stops reading (its writes block) while updates keep coming: past ``STREAM_QUEUE_SIZE``
    queued messages the stream is ended with its final result, counted and logged, instead of dropping them."""
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "STREAM_QUEUE_SIZE": 5, "STREAM_SEND_TIMEOUT_SECONDS": 30}
    caplog.set_level(logging.WARNING, logger="mcp_resources.subscriptions")
    plan = StreamPlan(owner="slow", uris={"test://slow"}, list_changed=False, check=lambda _: True, subscription_id=7)
    client = BlockedClient()
    before = delivery_counts()
    task = asyncio.ensure_future(Stream(plan, client.receive, client.send).serve())
    await until(lambda: len(client.bodies) == 1, 5, "the acknowledgement")
    group = broker.uri_group("test://slow")
    await broker.apublish(group, {"type": broker.UPDATED, "uri": "test://slow"})
    await asyncio.wait_for(client.blocked.wait(), 5)  # the first update is being written; the client does not read
    for _ in range(20):
        await broker.apublish(group, {"type": broker.UPDATED, "uri": "test://slow"})
    await until(lambda: delivery_counts().get("ended_queue_full", 0) > before.get("ended_queue_full", 0), 5, "the end")
    client.released.set()
    await asyncio.wait_for(task, 5)
    events = [body for body in client.bodies if body.startswith(b"event:")]
    assert b'"resultType":"complete"' in events[-1]
    # The acknowledgement, the update that was being written, then the final result: what was queued behind it
    # is not written (the final result tells the client to read again), nothing after it is delivered.
    assert len(events) == 3
    assert b"notifications/resources/updated" in events[1]
    assert "queue of STREAM_QUEUE_SIZE messages was full" in caplog.text


async def test_shutdown_ends_the_streams_of_its_own_loop() -> None:
    """``end_all_streams`` (a loop's lifespan shutdown) ends the streams of its loop: a stream served by another loop
    of the process keeps going until that loop ends it. Before, it was cancelled from the wrong thread and waited
    on from the wrong loop (``Event loop is closed`` once that loop had closed: a test that failed with a stream
    open broke every later shutdown of the suite)."""
    plan = StreamPlan(owner="elsewhere", uris=set(), list_changed=False, check=lambda _: True, subscription_id=8)
    bodies: list[bytes] = []

    async def start() -> asyncio.Task[None]:
        gone = asyncio.Event()

        async def receive() -> dict[str, Any]:
            await gone.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.body":
                bodies.append(message.get("body", b""))

        task = asyncio.ensure_future(Stream(plan, receive, send).serve())
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


def test_a_publication_number_filled_late_is_not_a_loss() -> None:
    sequence = Sequence(high=4)
    assert sequence.see(5, now=0.0)
    assert sequence.see(8, now=0.0)  # 6 and 7 are missing for now
    assert sequence.see(6, now=0.5)  # late, within the grace period
    assert not sequence.see(6, now=0.6)  # a duplicate is not delivered twice
    assert sequence.overdue(now=1.0) == 0
    assert sequence.overdue(now=fanout.LOSS_GRACE_SECONDS) == 1  # 7 never came
    assert sequence.overdue(now=100.0) == 0
    assert sequence.see(8 + fanout.MAX_HOLES + 2, now=100.0)
    assert sequence.overdue(now=100.0) == fanout.MAX_HOLES + 1  # too large a gap to wait for: lost at once


def test_a_fence_marks_every_number_up_to_it_missing_until_it_arrives() -> None:
    sequence = Sequence(high=2)
    sequence.expect(5, now=0.0)  # 3, 4 and 5 were published and have not arrived
    assert sequence.see(4, now=0.5)  # late, within the grace period: delivered
    assert sequence.overdue(now=fanout.LOSS_GRACE_SECONDS) == 2
    sequence.expect(5, now=10.0)  # a fence repeated, or one for what was seen: nothing new
    sequence.expect(1, now=10.0)
    assert sequence.overdue(now=100.0) == 0
    assert sequence.see(6, now=100.0)


def test_a_fence_of_a_publisher_not_heard_from_counts_only_what_it_published_after_the_join() -> None:
    layer = broker.get_layer()
    joined = 1000.0
    cases = {
        "before": ({"since": 10.0, "at": joined - 5, "seq": 7}, 0),  # published before this process joined
        "after": ({"since": 10.0, "at": joined + 60, "seq": 7}, 1),  # its last one came after: that one is missing
        "began-after": ({"since": joined + 60, "at": joined + 61, "seq": 3}, 3),  # a sequence begun after the join
    }
    for name, (numbers, lost) in cases.items():
        fan = fanout.Fanout(layer)
        fan.members["g"] = set()
        fan.joined_at["g"] = joined
        fan._fence("g", {"type": broker.FENCE, "group": "g", "origin": name, **numbers})
        (sequence,) = fan.sequences["g"].values()
        assert sequence.overdue(now=time.time() + fanout.LOSS_GRACE_SECONDS) == lost, name


def test_a_group_published_again_before_its_fence_is_due_owes_one_fence() -> None:
    """The fence follows the last publication: each publication pushes it back (it carries the last number)."""
    fences = broker._Fences()
    fences.pid = os.getpid()  # no thread: taken by hand
    fences.owe("g", ("o", 1.0, 1, 1.0))
    fences.owe("h", ("o", 1.0, 1, 1.0))
    fences.owe("g", ("o", 1.0, 2, 2.0))
    assert fences.take(block=False) == [("h", ("o", 1.0, 1, 1.0)), ("g", ("o", 1.0, 2, 2.0))]
    assert fences.take(block=False) == []


def test_a_fence_is_sent_twice_unless_its_group_is_published_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A first fence taken is owed again as its repeat, once; a publication in between replaces both."""
    monkeypatch.setattr(broker, "FENCE_DELAY_SECONDS", 0.0)
    monkeypatch.setattr(broker, "FENCE_REPEAT_SECONDS", 0.0)
    fences = broker._Fences()
    fences.pid = os.getpid()  # no thread: taken by hand
    first, second = ("o", 1.0, 1, 1.0), ("o", 1.0, 2, 2.0)
    fences.owe("g", first)
    assert fences.take() == [("g", first)]
    assert fences.take() == [("g", first)]  # the repeat
    assert fences.take(block=False) == []  # and no third
    fences.owe("g", first)
    assert fences.take() == [("g", first)]
    fences.owe("g", second)  # published again: the repeat of the first fence is gone
    assert fences.take() == [("g", second)]
    assert fences.take() == [("g", second)]
    assert fences.take(block=False) == []


def test_a_group_published_often_holds_one_fence_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Publishing costs no heap entry for a group already owed a fence: 1,000 publications of one group leave one
    entry, which is pushed back when it falls due and then carries the last number; and the groups remembered are
    bounded, least recently published pushed out first (their fences are then sent at once: the next test)."""
    monkeypatch.setattr(broker, "FENCE_DELAY_SECONDS", 0.05)
    fences = broker._Fences()
    fences.pid = os.getpid()  # no thread: taken by hand
    for seq in range(1, 1001):
        fences.owe("g", ("o", 1.0, seq, float(seq)))
    assert len(fences.heap) == 1
    assert fences.take() == [("g", ("o", 1.0, 1000, 1000.0))]
    monkeypatch.setattr(broker, "SEQUENCES_KEPT", 3)
    for group in ("a", "b", "c", "a", "d"):
        fences.owe(group, ("o", 1.0, 1, 1.0))
    assert list(fences.owed) == ["c", "a", "d"]  # g's repeat and b are forgotten


def test_a_fence_pushed_out_by_the_cap_is_sent_at_once_and_never_lost_silently(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """More groups owed a fence than the cap: the least recently published ones are sent at once (once, with no
    repeat) instead of being forgotten; and should even those pass the cap, the drop is counted and logged."""
    monkeypatch.setattr(broker, "FENCE_DELAY_SECONDS", 60.0)
    monkeypatch.setattr(broker, "SEQUENCES_KEPT", 3)
    fences = broker._Fences()
    fences.pid = os.getpid()  # no thread: taken by hand
    for group in ("a", "b", "c", "d", "e"):
        fences.owe(group, ("o", 1.0, 1, 1.0))
    taken: list[Any] = []
    worker = threading.Thread(target=lambda: taken.append(fences.take()), daemon=True)
    worker.start()
    worker.join(timeout=5)
    assert taken == [[("a", ("o", 1.0, 1, 1.0)), ("b", ("o", 1.0, 1, 1.0))]]  # not 60 s later
    assert list(fences.owed) == ["c", "d", "e"]
    assert fences.take(block=False) == [(group, ("o", 1.0, 1, 1.0)) for group in ("c", "d", "e")]  # no repeat of a, b
    for group in ("f", "g", "h", "i", "j", "k", "l"):  # 7 groups: 3 owed, 3 sent early, 1 beyond both caps
        fences.owe(group, ("o", 1.0, 1, 1.0))
    assert fences.forgotten == 1
    with caplog.at_level(logging.WARNING, logger="mcp_resources.subscriptions"):
        fences.report_forgotten()
    assert "forgot 1 fence(s)" in caplog.text
    assert fences.forgotten == 0
    assert [group for group, _ in fences.take(block=False)] == ["g", "h", "i", "j", "k", "l"]


def test_the_fences_owed_at_exit_include_the_repeats(monkeypatch: pytest.MonkeyPatch) -> None:
    """An exiting process sends every fence it still owes, first fences and repeats alike."""
    monkeypatch.setattr(broker, "FENCE_DELAY_SECONDS", 0.0)
    fences = broker._Fences()
    fences.pid = os.getpid()
    fences.owe("g", ("o", 1.0, 1, 1.0))
    assert fences.take() == [("g", ("o", 1.0, 1, 1.0))]  # the repeat is now owed, 15 s from now
    fences.owe("h", ("o", 1.0, 1, 1.0))
    assert sorted(fences.take(block=False)) == [("g", ("o", 1.0, 1, 1.0)), ("h", ("o", 1.0, 1, 1.0))]


def test_publications_are_numbered_per_group() -> None:
    first = broker.numbered("g-a", {"type": broker.UPDATED})
    second = broker.numbered("g-a", {"type": broker.UPDATED})
    other = broker.numbered("g-b", {"type": broker.UPDATED})
    assert second["seq"] == first["seq"] + 1
    assert second["origin"] == first["origin"] == other["origin"]
    assert second["since"] == first["since"]
    assert other["group"] == "g-b"
