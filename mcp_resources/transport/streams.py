"""Long-lived SSE streams: ``subscriptions/listen`` (2026-07-28) and a session's GET (2025-11-25), as responses.

The view answers a stream with an :class:`EventStreamResponse`, a ``StreamingHttpResponse`` over the async iterator
:meth:`Stream.events`, so the middleware sees it and sets its headers like on any response.
:class:`~mcp_resources.transport.asgi.MCPEndpoint` serves it on the event loop with no thread; Django's own ASGI
handler serves it too, with one thread per open stream (docs/subscriptions.md).

Every notification carries the log's id of its event (the SSE ``id``; on a listen stream also
``_meta["io.github.django-mcp-resources/eventId"]``). A stream that starts after an id (``Last-Event-ID``, or a
listen's resume id) first replays, from the log, what followed it, access re-checked; a stream whose queue of
``Stream.queue_size`` events fills up (a slow client) catches up the same way instead of ending. Past the
retention window a listen ends with its final result marked ``truncated``; a session's GET stream instead tells its
client to list and read again (``list_changed`` and ``updated`` for each of its URIs) and goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import random
import secrets
import threading
import time
import weakref
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async
from django.core import signals
from django.http import HttpRequest, StreamingHttpResponse

from mcp_resources.conf import mcp_settings
from mcp_resources.protocol import jsonrpc
from mcp_resources.protocol.versions import SUBSCRIPTION_ID_META
from mcp_resources.subscriptions import broker
from mcp_resources.subscriptions.broker import Event
from mcp_resources.transport.fanout import FAILED, Hub, counts, decide, get_hub

logger = logging.getLogger("mcp_resources.subscriptions")

EVENT_ID_META = "io.github.django-mcp-resources/eventId"
"""On a listen stream's notifications (and its acknowledgement): the log's id; in a listen request's ``_meta``: the
last id the client received, to resume after it."""
TRUNCATED_META = "io.github.django-mcp-resources/truncated"
"""On a listen's final result: the stream fell behind the retention window; list and read again, then listen."""
REPLAY_BATCH = 500
KEEPALIVE_SPREAD = 0.25
"""A stream's keep-alive comes after ``STREAM_KEEPALIVE_SECONDS`` times 1 minus up to this share of it, drawn once per
stream: the streams of a URI write its updates together, and would otherwise write their keep-alives together, in the
middle of the fan-out of a later update (docs/performance.md)."""
TIMER_SLOT = 0.1
"""The streams' timers fall on this grid of the loop's clock (at most 1/100 of ``STREAM_KEEPALIVE_SECONDS``): the
spread keep-alives go out a few at a time, in one turn of the loop, rather than each waking the process."""

ENDINGS = {
    "credentials": "its credentials are no longer accepted",
    "expired": "its token expired",
    "check_failed": "re-checking its caller's access failed (see the error logged before)",
    "truncated": "what it missed is older than DELIVERY_RETENTION_SECONDS",
    "replaced": "a newer GET stream of its session took over",
    "session_ended": "its session ended",
    "shutdown": "the server is shutting down",
    "failed": "it failed (see the error logged before)",
}

_open_lock = threading.Lock()
_open_streams: Counter[str] = Counter()
_session_streams: Counter[str] = Counter()  # open GET streams of each session, in this process
_streams: weakref.WeakSet[Stream] = weakref.WeakSet()


def open_stream_count() -> int:
    """The streams open in this process (the ``mcp_resources.streams.active`` metric, docs/telemetry.md)."""
    return sum(_open_streams.values())


@dataclass
class StreamPlan:
    """What a validated stream request may receive; built in a worker thread, served on the event loop."""

    owner: str
    uris: set[str]
    list_changed: bool
    check: Callable[[str], bool]
    """Whether the caller may read a URI now (raises ``CredentialsRejected`` when its credentials no longer hold)."""
    subscription_id: Any = None  # the listen request's id (2026-07-28); None for a session's GET stream
    honoured: dict[str, Any] = field(default_factory=dict)
    session_id: str | None = None
    expires_at: float | None = None
    resync: Callable[[], list[str]] | None = None
    """A session's current subscriptions, re-read once the stream has joined its session."""
    caller: Any = None
    """Streams with the same (hashable) caller share one access decision per change; ``None``: this stream alone."""
    token_checksum: str | None = None
    """SHA-256 of the bearer token: its revocation (or any change) reaches the stream through the log."""
    resume_after: str | None = None
    """The last event id the client received: the stream first replays what followed it."""

    @property
    def stateless(self) -> bool:
        """A ``subscriptions/listen`` stream (2026-07-28), as opposed to a session's GET stream."""
        return self.session_id is None


def sse(payload: dict[str, Any], event_id: str | None = None) -> bytes:
    head = b"id: " + event_id.encode("ascii") + b"\r\n" if event_id else b""
    return head + b"event: message\r\ndata: " + jsonrpc.dumps(payload) + b"\r\n\r\n"


@functools.lru_cache(maxsize=1024)
def updated_frame(uri: str, event_id: str, stateless: bool) -> tuple[bytes, bytes]:
    """The ``updated`` notification of ``uri`` at ``event_id``, encoded once for all its streams: a session's GET
    stream writes the first part alone; a listen writes its JSON-encoded subscription id between the two (the
    bytes of :meth:`Stream.notification`)."""
    message = {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}}
    if not stateless:
        return sse(message, event_id), b""
    head = sse(message, event_id)[: -len(b"}}\r\n\r\n")]
    meta = b',"_meta":{' + jsonrpc.dumps(SUBSCRIPTION_ID_META) + b":"
    return head + meta, b"," + jsonrpc.dumps(EVENT_ID_META) + b":" + jsonrpc.dumps(event_id) + b"}}}\r\n\r\n"


def acquire(plan: StreamPlan) -> bool:
    """Count a stream of ``plan``'s caller, unless it holds ``STREAMS_PER_CALLER`` already (a session's GET that
    replaces the session's open one is never refused)."""
    with _open_lock:
        replacing = plan.session_id is not None and _session_streams[plan.session_id] > 0
        if not replacing and _open_streams[plan.owner] >= mcp_settings.streams_per_caller:
            return False
        _open_streams[plan.owner] += 1
        if plan.session_id is not None:
            _session_streams[plan.session_id] += 1
        return True


def _release(plan: StreamPlan) -> None:
    with _open_lock:
        for counter, key in ((_open_streams, plan.owner), (_session_streams, plan.session_id)):
            if key is not None:
                counter[key] -= 1
                if counter[key] <= 0:
                    del counter[key]


class Stream:
    """One open stream: the events the hub queued for it, written in the log's order by :meth:`events`."""

    queue_size = 256
    """Events queued at most; past it the stream drops its queue and catches up from the log."""

    # Thousands are open at once in one process: slots, and containers made when first needed (docs/performance.md).
    __slots__ = (
        "__weakref__",
        "_done",
        "_idle_share",
        "_timer",
        "_timer_at",
        "_waker",
        "_written_at",
        "behind",
        "caller",
        "cursor",
        "ending",
        "hub",
        "id",
        "keys",
        "loop",
        "plan",
        "queue",
        "released",
        "subscription",
        "takeover",
        "takeovers",
        "updates",
    )

    def __init__(self, plan: StreamPlan) -> None:
        self.plan = plan
        self.id = secrets.token_hex(8)
        self.caller = ("stream", self.id) if plan.caller is None else plan.caller
        self.queue: list[tuple[Event, asyncio.Future[Any] | None]] = []  # short: popped from the front
        self.updates: dict[str, int] = {}  # queued updates per URI: only the last of them is written
        self.cursor = broker.ZERO
        self.behind = plan.resume_after is not None
        self.ending: str | None = None
        self.hub: Hub | None = None
        self.keys: set[tuple[str, str]] = set()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.released = False
        self.takeover: str | None = None  # the log's id of this session stream's own takeover
        self.takeovers: list[str] | None = None  # other streams' takeovers heard before this one's id was known
        self._done: asyncio.Event | bool = False  # True once released; an Event while someone waits for that
        self._waker: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None  # wakes the stream for a keep-alive or its expiry
        self._timer_at = 0.0
        self._written_at = 0.0  # time.monotonic() of the last write
        # The share of STREAM_KEEPALIVE_SECONDS that passes before a keep-alive: a jitter, not a secret.
        self._idle_share = 1.0 - KEEPALIVE_SPREAD * random.random()  # noqa: S311
        self.subscription = jsonrpc.dumps(plan.subscription_id)  # spliced into the updates of a listen

    async def done(self) -> None:
        """Until the stream has left its hub (released on its loop)."""
        if self._done is True:
            return
        if self._done is False:
            self._done = asyncio.Event()
        assert isinstance(self._done, asyncio.Event)
        await self._done.wait()

    def _left(self) -> None:
        done, self._done = self._done, True
        if isinstance(done, asyncio.Event):
            done.set()

    # Fed by the hub ------------------------------------------------------------------------------------------

    def push(self, event: Event, decision: asyncio.Future[Any] | None) -> None:
        if event.kind == broker.TOKEN:
            # In the log's order, behind or not: the decisions of later updates authenticate the caller again.
            changed = getattr(self.plan.check, "credentials_changed", None)
            if changed is not None:
                changed()
        if self.ending is not None or self.behind:
            return
        if event.kind == broker.SESSION:
            # Applied at once, in the log's order: an update that follows a subscribe must find the stream joined.
            self._control(event)
            self._sync_keys()
        if len(self.queue) >= self.queue_size:
            self.fall_behind()
            return
        self.queue.append((event, decision))
        if event.kind == broker.UPDATED:
            self.updates[event.target] = self.updates.get(event.target, 0) + 1
        if len(self.queue) > 1:
            return  # the stream is busy with the head of its queue: it comes to this event by itself
        if decision is None or decision.done():
            self._wake()
        else:  # woken once there is something to write, not twice
            decision.add_done_callback(self._decided)

    def fall_behind(self) -> None:
        """Drop the queue: the stream catches up from the log after its cursor."""
        self.behind = True
        self.queue.clear()
        self.updates.clear()
        self._wake()

    def end(self, reason: str) -> None:
        """End the stream soon, with its final message, for ``reason`` (a key of :data:`ENDINGS`); counted."""
        if self.ending is not None:
            return
        self.ending = reason
        counts[f"ended_{reason}"] += 1
        log = logger.info if reason in ("replaced", "session_ended", "shutdown", "expired") else logger.warning
        log("stream %s of %s ended: %s", self.id, self.plan.owner[:80], ENDINGS.get(reason, reason))
        self._wake()

    def disconnected(self) -> None:
        """The client went away: end without a word (nothing can reach it)."""
        self.ending = self.ending or "client"
        self._wake()

    def _wake(self) -> None:
        waker = self._waker
        if waker is not None and not waker.done():
            waker.set_result(None)

    def _decided(self, _decision: asyncio.Future[Any]) -> None:
        self._wake()

    def _timed_out(self) -> None:
        """The timer is due: wake the stream if a keep-alive or its expiry is, else wait on (a write came since)."""
        self._timer = None
        wake_at = self._wake_at()
        if self.released or time.monotonic() >= wake_at:
            self._wake()
        elif self.loop is not None:
            self._arm(self.loop, wake_at)

    def _arm(self, loop: asyncio.AbstractEventLoop, wake_at: float) -> None:
        """Set the timer for ``wake_at`` (``time.monotonic()``), on the next slot of :data:`TIMER_SLOT`."""
        slot = min(TIMER_SLOT, mcp_settings.stream_keepalive_seconds / 100)
        when = loop.time() + max(0.0, wake_at - time.monotonic())
        self._timer_at = wake_at
        self._timer = loop.call_at(math.ceil(when / slot) * slot, self._timed_out)

    def _keepalive_at(self) -> float:
        return self._written_at + mcp_settings.stream_keepalive_seconds * self._idle_share

    def _wake_at(self) -> float:
        """When the stream must next write with nothing queued (``time.monotonic()``): a keep-alive, or the final
        answer at its token's expiry."""
        wake_at = self._keepalive_at()
        if self.plan.expires_at is not None:
            wake_at = min(wake_at, time.monotonic() + self.plan.expires_at - time.time())
        return wake_at

    # Membership ----------------------------------------------------------------------------------------------

    def _wanted(self) -> set[tuple[str, str]]:
        plan = self.plan
        keys = {("u", uri) for uri in plan.uris}
        if plan.list_changed:
            keys.add(("l", ""))
        if plan.session_id is not None:
            keys.add(("s", broker.session_key(plan.session_id)))
        if plan.token_checksum:
            keys.add(("t", plan.token_checksum))
        return keys

    def _sync_keys(self) -> None:
        assert self.hub is not None
        wanted = self._wanted()
        for key in self.keys - wanted:
            self.hub.leave(self, key)
        for key in wanted - self.keys:
            self.hub.join(self, key)
        self.keys = wanted

    def release(self) -> None:
        """Leave the hub and the caller's count (once; from any thread)."""
        if self.released:
            return
        self.released = True
        _release(self.plan)
        loop, hub = self.loop, self.hub
        if hub is not None and loop is not None:

            def leave() -> None:
                for key in self.keys:
                    hub.leave(self, key)
                self._left()

            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is loop:
                leave()
            elif not loop.is_closed():
                loop.call_soon_threadsafe(leave)

    # Writing -------------------------------------------------------------------------------------------------

    def notification(self, method: str, params: dict[str, Any] | None, event_id: str | None) -> bytes:
        params = dict(params or {})
        if self.plan.stateless:
            params["_meta"] = {SUBSCRIPTION_ID_META: self.plan.subscription_id, EVENT_ID_META: event_id}
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params:
            message["params"] = params
        return sse(message, event_id)

    def final(self) -> bytes | None:
        """The final result of a listen stream (``None`` for a session's GET stream, which has none)."""
        if not self.plan.stateless or self.ending == "client":
            return None
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META: self.plan.subscription_id}
        if self.ending == "truncated":
            meta[TRUNCATED_META] = True
        return sse(jsonrpc.result_response(self.plan.subscription_id, {"resultType": "complete", "_meta": meta}))

    async def open(self) -> None:
        """Join the hub (from the log's end, or after the resume id); a session's stream takes over its
        session. Called by the server before the response starts, else by :meth:`events`."""
        if self.hub is not None:
            return
        plan = self.plan
        slim = getattr(plan.check, "slim", None)
        if slim is not None:
            slim()  # the response has left the view and its middleware: the check's kept request sheds the rest
        self.loop = asyncio.get_running_loop()
        start = plan.resume_after
        if start is None:
            # From the log's end as the stream opens, not from where the hub has read to: a change published before
            # it is not sent (the hub may not have read it yet). The log unreachable: from the hub's position.
            with contextlib.suppress(Exception):
                start = await sync_to_async(broker.get_log().last_id, thread_sensitive=False)()
        self.hub = await get_hub()
        self.cursor = start or self.hub.position
        _streams.add(self)
        self._sync_keys()
        if broker.after(self.hub.position, self.cursor):
            self.behind = True  # the hub has passed the start already: what followed it comes from the log
        if plan.session_id is not None:
            key = broker.session_key(plan.session_id)
            # A GET stream ends when a newer one of its session takes over: newer by the log's order of their
            # takeovers, whatever order the hub hears of them in.
            self.takeover = await sync_to_async(broker.publish_session, thread_sensitive=False)(
                key, "takeover", self.id
            )
            if any(self._newer(event_id) for event_id in self.takeovers or ()):
                self.end("replaced")
            if plan.resync is not None:
                await self._resync()

    async def events(self) -> AsyncIterator[bytes]:
        """The stream's bytes: the acknowledgement, replayed and live notifications, keep-alives, the final result."""
        plan = self.plan
        try:
            await self.open()
            if plan.stateless:
                ack = {"notifications": plan.honoured}
                yield self.notification("notifications/subscriptions/acknowledged", ack, self.cursor)
            self._written_at = time.monotonic()
            while True:
                if self.ending is not None:
                    break
                if plan.expires_at is not None and plan.expires_at <= time.time():
                    self.end("expired")
                    continue
                if self.behind:
                    async for chunk in self.catch_up():
                        self._written_at = time.monotonic()
                        yield chunk
                    continue
                if self.queue:
                    written = await self._written()
                    if written:
                        self._written_at = time.monotonic()
                        yield written
                    continue
                if time.monotonic() >= self._keepalive_at():
                    self._written_at = time.monotonic()
                    yield b": keep-alive\r\n\r\n"
                    continue
                await self._wait()
        except Exception:
            logger.exception("stream %s failed", self.id)
            self.end("failed")
        finally:
            if self._timer is not None:
                self._timer.cancel()
            self.release()
        final = self.final()
        if final is not None:
            yield final

    async def _written(self) -> bytes:
        """The bytes of the queued events that are ready, in order, as one write: the head's decision is awaited,
        the events after it are taken while theirs are known."""
        chunks: list[bytes] = []
        queue = self.queue
        while queue and self.ending is None and not self.behind:
            event, decision = queue[0]
            if chunks and decision is not None and not decision.done():
                break
            del queue[0]
            chunk = await self._next(event, decision)
            if chunk is not None:
                chunks.append(chunk)
        counts["delivered"] += len(chunks)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    async def _wait(self) -> None:
        """Until woken (an event, the stream's end), or until a keep-alive or the token's expiry is due. One timer
        serves many waits: one due later than needed is replaced; one due earlier, because a write came since it
        was set, sets itself again for the new time without waking the stream."""
        wake_at = self._wake_at()
        loop = self.loop
        assert loop is not None
        if self._timer is None or self._timer_at > wake_at:
            if self._timer is not None:
                self._timer.cancel()
            self._arm(loop, wake_at)
        self._waker = loop.create_future()
        try:
            await self._waker
        finally:
            self._waker = None

    async def _next(self, event: Event, decision: asyncio.Future[Any] | None) -> bytes | None:
        """The bytes for a live event (``None``: nothing to write), applying a session's control and tokens."""
        if event.kind == broker.UPDATED:
            left = self.updates.get(event.target, 1) - 1
            if left > 0:
                self.updates[event.target] = left
                return None  # a later change of the same URI is queued: it is written instead (last one wins)
            self.updates.pop(event.target, None)
        if not broker.after(event.id, self.cursor):
            return None  # replayed already
        self.cursor = event.id
        if event.kind == broker.UPDATED and decision is not None:
            decisions = await decision
            return self._updated(event, decisions.get(self.caller, FAILED))
        if event.kind == broker.LIST_CHANGED:
            return self.notification("notifications/resources/list_changed", None, event.id)
        if event.kind == broker.TOKEN:
            if not await sync_to_async(self._credentials_hold, thread_sensitive=False)():
                self.end("credentials")
            return None
        return None  # a session's control was applied when the hub pushed it

    def _updated(self, event: Event, allowed: bool | str | None) -> bytes | None:
        if event.target not in self.plan.uris:
            return None
        if allowed is None:
            self.end("credentials")
        elif allowed == FAILED:
            self.end("check_failed")
        elif not allowed:
            counts["withheld"] += 1
            logger.debug("stream %s: access to %s is gone; update withheld", self.id, event.target[:200])
        else:
            head, tail = updated_frame(event.target, event.id, self.plan.stateless)
            return head + self.subscription + tail if self.plan.stateless else head
        return None

    def _control(self, event: Event) -> None:
        """Apply a session's control event (``plan.uris`` only: the caller syncs the hub)."""
        uris = self.plan.uris
        if event.op == "takeover" and event.arg != self.id:
            if self.takeover is None:
                self.takeovers = [*(self.takeovers or ()), event.id]  # decided once its own takeover has its id
            elif self._newer(event.id):
                self.end("replaced")
        elif event.op == "end":
            self.end("session_ended")
        elif event.op == "subscribe" and event.arg not in uris and len(uris) < mcp_settings.uris_per_listen:
            uris.add(event.arg)
        elif event.op == "unsubscribe":
            uris.discard(event.arg)

    def _newer(self, event_id: str) -> bool:
        return self.takeover is None or broker.after(event_id, self.takeover)

    def _credentials_hold(self) -> bool:
        """In a worker thread, as one request for Django: whether the stream's credentials are still accepted."""
        holds = getattr(self.plan.check, "credentials_hold", None)
        if holds is None:
            return True
        signals.request_started.send(sender=Stream)
        try:
            held = bool(holds())
        finally:
            signals.request_finished.send(sender=Stream)
        if held:  # the token's expiry as it is now
            self.plan.expires_at = getattr(self.plan.check, "expires_at", self.plan.expires_at)
        return held

    async def _resync(self) -> None:
        """Align a GET stream with its session's stored subscriptions (changes made before it joined)."""
        assert self.plan.resync is not None
        try:
            current = await sync_to_async(self.plan.resync, thread_sensitive=False)()
        except Exception:
            logger.exception("stream %s: could not re-read the session's subscriptions", self.id)
            return
        self.plan.uris = set(current[: mcp_settings.uris_per_listen])
        self._sync_keys()

    # Catching up from the log ----------------------------------------------------------------------------------

    async def catch_up(self) -> AsyncIterator[bytes]:
        """Replay from the log what followed the cursor, access re-checked, then go on with the live queue."""
        self.behind = False
        self.queue.clear()
        self.updates.clear()
        counts["caught_up"] += 1
        while self.ending is None:
            chunks, cursor, more = await sync_to_async(self._replay, thread_sensitive=False)(self.cursor)
            self.cursor = cursor
            self._sync_keys()
            for chunk in chunks:
                counts["replayed"] += 1
                yield chunk
            if not more:
                return

    def _replay(self, cursor: str) -> tuple[list[bytes], str, bool]:
        """In a worker thread: the bytes for up to :data:`REPLAY_BATCH` events after ``cursor``, the new cursor,
        whether more may follow."""
        log = broker.get_log()
        if broker.parse_id(cursor) is None:  # a Last-Event-ID that is not one of the log's ids
            return self._truncated(log)
        events, complete = log.replay(cursor, REPLAY_BATCH)
        if not complete:
            return self._truncated(log)
        last = {event.target: event.id for event in events if event.kind == broker.UPDATED}
        chunks: list[bytes] = []
        for event in events:
            if event.kind == broker.UPDATED and last[event.target] == event.id and event.target in self.plan.uris:
                chunk = self._updated(event, decide([(event.target, [self.plan.check])])[0][0])
            elif event.kind == broker.LIST_CHANGED and self.plan.list_changed:
                chunk = self.notification("notifications/resources/list_changed", None, event.id)
            elif event.kind == broker.SESSION and event.target == self._session_key():
                self._control(event)
                chunk = None
            elif event.kind == broker.TOKEN and event.target == self.plan.token_checksum:
                if not self._credentials_hold():
                    self.end("credentials")
                chunk = None
            else:
                continue
            if self.ending is not None:
                break
            if chunk is not None:
                chunks.append(chunk)
        return chunks, events[-1].id if events else cursor, len(events) == REPLAY_BATCH and self.ending is None

    def _session_key(self) -> str | None:
        return None if self.plan.session_id is None else broker.session_key(self.plan.session_id)

    def _truncated(self, log: broker.Log) -> tuple[list[bytes], str, bool]:
        """Past the window: a listen ends; a GET stream tells its client to list and read everything again."""
        if self.plan.stateless:
            self.end("truncated")
            return [], self.cursor, False
        cursor = log.last_id()
        counts["resynchronised"] += 1
        if self.plan.resync is not None:
            self.plan.uris = set(self.plan.resync()[: mcp_settings.uris_per_listen])
        chunks = [self.notification("notifications/resources/list_changed", None, cursor)]
        for uri in sorted(self.plan.uris):
            chunk = self._updated(Event(cursor, broker.UPDATED, uri), decide([(uri, [self.plan.check])])[0][0])
            if chunk is not None:
                chunks.append(chunk)
        return chunks, cursor, False


_STREAMING_CONTENT: property = vars(StreamingHttpResponse)["streaming_content"]


class EventStreamResponse(StreamingHttpResponse):
    """A stream as a Django response: ``text/event-stream`` over :meth:`Stream.events`, the stream at ``.stream``."""

    def __init__(self, stream: Stream, headers: dict[str, str] | None = None) -> None:
        self.events = stream.events()
        super().__init__(self.events, content_type="text/event-stream", headers=headers)
        self["Cache-Control"] = "no-cache, no-transform"
        self["X-Accel-Buffering"] = "no"
        self.stream = stream

    @property
    def streaming_content(self) -> Any:
        """The stream's bytes as it makes them (already bytes: not wrapped again per chunk), unless a middleware
        replaced them with its own iterator, which Django's wrapper then serves as for any response."""
        if self.own:
            return self.events
        return _STREAMING_CONTENT.__get__(self)

    @streaming_content.setter
    def streaming_content(self, value: Any) -> None:
        self.own = value is self.events
        _STREAMING_CONTENT.__set__(self, value)

    def close_request(self) -> None:
        """Close the request now (Django's handler would when the response closes, keeping the request, its body and
        what the middleware set on it for the stream's whole life); what access re-checks need is kept by the
        stream's plan."""
        closers: list[Callable[[], None]] = self._resource_closers  # type: ignore[attr-defined]
        for closer in list(closers):
            if isinstance(getattr(closer, "__self__", None), HttpRequest):
                closers.remove(closer)
                closer()

    def close(self) -> None:
        self.stream.release()
        super().close()


async def end_all_streams(timeout: float = 5.0) -> None:
    """End every open stream of the running event loop (at shutdown); listeners get the final result first.

    Waits up to ``timeout`` seconds for them to finish writing; streams of other loops are left to theirs.
    """
    loop = asyncio.get_running_loop()
    streams = [stream for stream in list(_streams) if stream.loop is loop and not stream.released]
    for stream in streams:
        stream.end("shutdown")
    if streams:
        await asyncio.wait([loop.create_task(stream.done()) for stream in streams], timeout=timeout)
