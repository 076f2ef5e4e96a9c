"""Long-lived SSE streams on the event loop: ``subscriptions/listen`` (2026-07-28) and a session's GET (2025-11-25).

A stream holds no thread: it waits on its queue, on the client's disconnect and on a keep-alive timer. The
process's :class:`~mcp_resources.transport.fanout.Fanout` receives the channel layer's messages, re-checks access
in batches and queues each notification on the streams that may have it.
Limits: ``STREAMS_PER_CALLER`` per process, ``URIS_PER_LISTEN`` per stream, ``STREAM_QUEUE_SIZE`` messages queued
per stream (past it the stream ends with a final message); a client that stops reading is ended once a write
waits longer than ``STREAM_SEND_TIMEOUT_SECONDS``, so memory stays flat.

A stream ends with the final result (2026-07-28) when the layer fails, when a message meant for it was lost, when
its queue overflows or its credentials are no longer accepted: its client listens again and re-reads (a listen
while the layer is down is answered with a JSON-RPC internal error).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async

from mcp_resources.conf import mcp_settings
from mcp_resources.exceptions import InternalError, InvalidRequest, MCPError, StreamClosed
from mcp_resources.protocol import jsonrpc
from mcp_resources.protocol.versions import SUBSCRIPTION_ID_META
from mcp_resources.subscriptions import broker
from mcp_resources.transport import fanout as fanout_module
from mcp_resources.transport.fanout import Fanout, counts, get_fanout

logger = logging.getLogger("mcp_resources.subscriptions")

SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]

Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]

_open_streams: Counter[str] = Counter()
_session_streams: Counter[str] = Counter()  # open GET streams of each session, in this process


def open_stream_count() -> int:
    """The streams open in this process (the ``mcp_resources.streams.active`` metric, docs/telemetry.md)."""
    return sum(_open_streams.values())


_active: set[asyncio.Task[Any]] = set()
RECEIVE_ATTEMPTS = fanout_module.RECEIVE_ATTEMPTS


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
    extra_headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    # A session's current subscriptions, re-read once the stream has joined its session group: a
    # ``resources/subscribe`` that ran between building this plan and joining the group is not lost.
    resync: Callable[[], list[str]] | None = None
    caller: Any = None
    """Streams with the same (hashable) caller share one access decision per change; ``None``: this stream alone."""

    @property
    def stateless(self) -> bool:
        """A ``subscriptions/listen`` stream (2026-07-28), as opposed to a session's GET stream."""
        return self.session_id is None


def event(payload: dict[str, Any]) -> bytes:
    return b"event: message\r\ndata: " + jsonrpc.dumps(payload) + b"\r\n\r\n"


ENDINGS = {
    "lost": "a notification for it was lost by the channel layer",
    "queue_full": "its queue of STREAM_QUEUE_SIZE messages was full (the client reads too slowly)",
    "credentials": "its credentials are no longer accepted",
    "check_failed": "re-checking its caller's access failed (see the error logged before)",
    "layer_failed": "the channel layer failed",
    "send_timeout": "a write waited longer than STREAM_SEND_TIMEOUT_SECONDS (the client stopped reading)",
}


class Stream:
    """One open SSE response: a bounded queue of messages, written in order by the stream's own task."""

    def __init__(self, plan: StreamPlan, receive: Receive, send: Send) -> None:
        self.plan = plan
        self.receive = receive
        self.send = send
        self.id = secrets.token_hex(8)
        self.sent = 0
        self.last_write = time.monotonic()
        self.queue: deque[bytes | dict[str, Any]] = deque()
        self.ending: str | None = None
        self._waker: asyncio.Future[None] | None = None
        self.fanout: Fanout | None = None
        self.groups: set[str] = set()

    # Fed by the fan-out --------------------------------------------------------------------------------------

    def offer(self, data: bytes) -> None:
        """Queue an event; a full queue ends the stream with a final message instead of dropping it."""
        self._enqueue(data)

    def control(self, message: dict[str, Any]) -> None:
        """Queue a session's control message (applied in order with the notifications, under the same bound)."""
        if self.plan.session_id is None:
            return
        self._enqueue(message)

    def _enqueue(self, item: bytes | dict[str, Any]) -> None:
        if self.ending is not None:
            return
        if len(self.queue) >= mcp_settings.stream_queue_size:
            self.end("queue_full")
            return
        self.queue.append(item)
        self._wake()

    def end(self, reason: str) -> None:
        """End the stream soon with its final message, for ``reason`` (a key of :data:`ENDINGS`); counted."""
        if self.ending is not None:
            return
        self.ending = reason
        self.queue.clear()
        counts[f"ended_{reason}"] += 1
        logger.warning("stream %s of %s ended: %s", self.id, self.plan.owner[:80], ENDINGS.get(reason, reason))
        self._wake()

    def _wake(self) -> None:
        waker = self._waker
        if waker is not None and not waker.done():
            waker.set_result(None)

    # Writing -------------------------------------------------------------------------------------------------

    async def write(self, data: bytes) -> None:
        self.last_write = time.monotonic()
        try:
            async with asyncio.timeout(mcp_settings.stream_send_timeout_seconds):  # no task per write (wait_for's)
                await self.send({"type": "http.response.body", "body": data, "more_body": True})
        except TimeoutError as exc:
            counts["ended_send_timeout"] += 1
            logger.warning("stream %s of %s ended: %s", self.id, self.plan.owner[:80], ENDINGS["send_timeout"])
            raise StreamClosed() from exc
        except OSError as exc:
            raise StreamClosed() from exc

    def notification(self, method: str, params: dict[str, Any] | None = None) -> bytes:
        params = dict(params or {})
        if self.plan.stateless:
            params["_meta"] = {SUBSCRIPTION_ID_META: self.plan.subscription_id}
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params:
            message["params"] = params
        return event(message)

    async def serve(self) -> None:
        plan = self.plan
        # A session has one GET stream: a new one replaces the open one, so it is not refused by the limit.
        replacing = plan.session_id is not None and _session_streams[plan.session_id] > 0
        if not replacing and _open_streams[plan.owner] >= mcp_settings.streams_per_caller:
            error = InvalidRequest("Too many open streams for this caller", request_id=plan.subscription_id)
            await self._refuse(429, error)
            return
        _open_streams[plan.owner] += 1
        if plan.session_id is not None:
            _session_streams[plan.session_id] += 1
        try:
            await self._serve()
        finally:
            _open_streams[plan.owner] -= 1
            if _open_streams[plan.owner] <= 0:
                del _open_streams[plan.owner]
            if plan.session_id is not None:
                _session_streams[plan.session_id] -= 1
                if _session_streams[plan.session_id] <= 0:
                    del _session_streams[plan.session_id]

    async def _refuse(self, status: int, error: MCPError) -> None:
        body = jsonrpc.dumps(error.to_response())
        await self.send(
            {"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]}
        )
        await self.send({"type": "http.response.body", "body": body})

    async def _join(self, group: str) -> None:
        assert self.fanout is not None
        self.groups.add(group)
        await self.fanout.join(self, group)

    async def _leave_group(self, group: str) -> None:
        self.groups.discard(group)
        if self.fanout is not None:
            await self.fanout.leave(self, group)

    async def _serve(self) -> None:
        plan = self.plan
        broker.bind_stream_loop(asyncio.get_running_loop())
        try:
            self.fanout = await get_fanout()
            if plan.session_id is not None:
                # A session has one GET stream: a newer one takes over and this message ends the older ones.
                group = broker.session_group(plan.session_id)
                await broker.apublish(group, {"type": broker.SESSION_CONTROL, "op": "takeover", "stream": self.id})
                await self._join(group)
            for uri in plan.uris:
                await self._join(broker.uri_group(uri))
            if plan.list_changed:
                await self._join(broker.LIST_CHANGED_GROUP)
            if plan.resync is not None:
                await self._resync()
        except Exception:
            # The channel layer is unreachable (Redis down): a clean error, never a 500 and nothing left counted.
            logger.exception("stream %s: could not join the channel layer", self.id)
            await self._leave_all()
            await self._refuse(200, InternalError(request_id=plan.subscription_id))
            return
        task = asyncio.current_task()
        if task is not None:
            _active.add(task)
        disconnected = asyncio.ensure_future(self._wait_disconnect())
        try:
            await self.send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS + plan.extra_headers})
            if plan.stateless:
                await self.write(
                    self.notification("notifications/subscriptions/acknowledged", {"notifications": plan.honoured})
                )
            await self._loop(disconnected)
        except StreamClosed:
            logger.debug("stream %s ended by the client", self.id)
        except asyncio.CancelledError:
            # Server shutdown: a graceful end if the transport still takes it. Written without a timer task, so the
            # bytes reach the transport before anything else runs (the server may stop the loop right after).
            await self._final_result(direct=True)
            raise
        except Exception:
            logger.exception("stream %s failed", self.id)
            await self._final_result()
        finally:
            disconnected.cancel()
            await self._leave_all()
            if task is not None:
                _active.discard(task)
            try:
                await asyncio.wait_for(self.send({"type": "http.response.body", "body": b"", "more_body": False}), 1)
            except Exception:
                logger.debug("stream %s: the connection is already closed", self.id)

    async def _leave_all(self) -> None:
        for group in list(self.groups):
            try:
                await self._leave_group(group)
            except Exception:
                logger.debug("could not leave %s", group)

    async def _wait_disconnect(self) -> None:
        while True:
            message = await self.receive()
            if message["type"] == "http.disconnect":
                return

    async def _final_result(self, direct: bool = False) -> None:
        if not self.plan.stateless:
            return
        result = jsonrpc.result_response(
            self.plan.subscription_id,
            {"resultType": "complete", "_meta": {SUBSCRIPTION_ID_META: self.plan.subscription_id}},
        )
        try:
            if direct:
                await self.send({"type": "http.response.body", "body": event(result), "more_body": True})
            else:
                await self.write(event(result))
        except (StreamClosed, Exception):
            logger.debug("stream %s: could not send the final result", self.id)

    async def _loop(self, disconnected: asyncio.Future[None]) -> None:
        plan = self.plan
        loop = asyncio.get_running_loop()
        while True:
            if self.ending is not None:
                await self._final_result()
                return
            if plan.expires_at is not None and plan.expires_at - time.time() <= 0:
                await self._final_result()  # the caller's token expired: end gracefully
                return
            if self.queue:
                item = self.queue.popleft()
                if isinstance(item, bytes):
                    await self.write(item)
                    self.sent += 1
                    counts["delivered"] += 1
                elif not await self._control(item):
                    return
                continue
            keepalive_at = self.last_write + mcp_settings.stream_keepalive_seconds
            if time.monotonic() >= keepalive_at:
                await self.write(b": keep-alive\r\n\r\n")
                continue
            timeout = keepalive_at - time.monotonic()
            if plan.expires_at is not None:
                timeout = min(timeout, plan.expires_at - time.time())
            self._waker = loop.create_future()
            try:
                done, _ = await asyncio.wait(
                    {self._waker, disconnected}, timeout=max(0.0, timeout), return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                self._waker = None
            if disconnected in done:
                raise StreamClosed()

    async def _resync(self) -> None:
        """Align the stream with the session's stored subscriptions (control messages sent before it joined)."""
        assert self.plan.resync is not None
        try:
            current = await sync_to_async(self.plan.resync, thread_sensitive=False)()
        except Exception:
            logger.exception("stream %s: could not re-read the session's subscriptions", self.id)
            return
        for uri in current:
            await self._control({"op": "subscribe", "uri": uri})
        for uri in self.plan.uris - set(current):
            await self._control({"op": "unsubscribe", "uri": uri})

    async def _control(self, message: dict[str, Any]) -> bool:
        """Apply a session's control message; ``False`` ends the stream."""
        op = message.get("op")
        uri = message.get("uri")
        if op == "takeover":
            return message.get("stream") == self.id
        if op == "end":
            return False
        if not isinstance(uri, str):
            return True
        group = broker.uri_group(uri)
        if op == "subscribe" and uri not in self.plan.uris:
            if len(self.plan.uris) < mcp_settings.uris_per_listen:
                self.plan.uris.add(uri)
                await self._join(group)
        elif op == "unsubscribe" and uri in self.plan.uris:
            self.plan.uris.discard(uri)
            await self._leave_group(group)
        return True


async def end_all_streams(timeout: float = 5.0) -> None:
    """End every open stream of the running event loop (at shutdown); 2026-07-28 listeners get the final result
    first.

    Waits up to ``timeout`` seconds for the streams to finish writing. Streams of another loop of the process (servers
    in threads, a test suite's loop per test) are left to theirs, also when that loop has closed.
    """
    loop = asyncio.get_running_loop()
    tasks = [task for task in _active if task.get_loop() is loop and task is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=timeout)
    await fanout_module.stop_fanout()
