"""Long-lived SSE streams on the event loop: ``subscriptions/listen`` (2026-07-28) and a session's GET (2025-11-25).

A stream holds no thread: it waits on its channel of the channel layer, on the client's disconnect and on a
keep-alive timer. Thread hops happen only to re-check the caller's access before each ``updated`` notification.
Limits: ``STREAMS_PER_CALLER`` per process, ``URIS_PER_LISTEN`` per stream, the channel layer's ``capacity`` of
messages buffered per stream; a client that stops reading is ended once a write waits longer than
``STREAM_SEND_TIMEOUT_SECONDS``, so memory stays flat.

A stream keeps one receive pending across keep-alives (a cancelled receive can lose a message with channels-redis),
joins its groups again every half ``group_expiry`` of the layer (layers forget members after it), and ends with the
final result when the layer fails (a listen while it is down is answered with a JSON-RPC internal error).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections import Counter
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async
from django.core import signals

from mcp_resources.conf import mcp_settings
from mcp_resources.exceptions import CredentialsRejected, InternalError, InvalidRequest, MCPError, StreamClosed
from mcp_resources.protocol import jsonrpc
from mcp_resources.protocol.versions import SUBSCRIPTION_ID_META
from mcp_resources.subscriptions import broker

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
_active: set[asyncio.Task[Any]] = set()
DEFAULT_GROUP_EXPIRY = 86400
RECEIVE_ATTEMPTS = 3


@dataclass
class StreamPlan:
    """What a validated stream request may receive; built in a worker thread, served on the event loop."""

    owner: str
    uris: set[str]
    list_changed: bool
    check: Callable[[str], bool]
    subscription_id: Any = None  # the listen request's id (2026-07-28); None for a session's GET stream
    honoured: dict[str, Any] = field(default_factory=dict)
    session_id: str | None = None
    expires_at: float | None = None
    extra_headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    # A session's current subscriptions, re-read once the stream has joined its session group: a
    # ``resources/subscribe`` that ran between building this plan and joining the group is not lost.
    resync: Callable[[], list[str]] | None = None

    @property
    def stateless(self) -> bool:
        """A ``subscriptions/listen`` stream (2026-07-28), as opposed to a session's GET stream."""
        return self.session_id is None


def event(payload: dict[str, Any]) -> bytes:
    return b"event: message\r\ndata: " + jsonrpc.dumps(payload) + b"\r\n\r\n"


def _checked(check: Callable[[str], bool], uri: str) -> bool:
    signals.request_started.send(sender=StreamPlan)
    try:
        return check(uri)
    finally:
        signals.request_finished.send(sender=StreamPlan)


class Stream:
    """One open SSE response."""

    def __init__(self, plan: StreamPlan, receive: Receive, send: Send) -> None:
        self.plan = plan
        self.receive = receive
        self.send = send
        self.id = secrets.token_hex(8)
        self.sent = 0
        self.last_write = time.monotonic()
        self.renew_at = time.monotonic() + DEFAULT_GROUP_EXPIRY / 2

    async def write(self, data: bytes) -> None:
        self.last_write = time.monotonic()
        try:
            await asyncio.wait_for(
                self.send({"type": "http.response.body", "body": data, "more_body": True}),
                mcp_settings.stream_send_timeout_seconds,
            )
        except (TimeoutError, OSError) as exc:
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

    async def _serve(self) -> None:
        plan = self.plan
        broker.bind_stream_loop(asyncio.get_running_loop())
        layer: Any = None
        channel = ""
        groups: set[str] = set()
        try:
            layer = broker.get_layer()
            channel = await layer.new_channel()
            groups = {broker.uri_group(uri) for uri in plan.uris}
            if plan.list_changed:
                groups.add(broker.LIST_CHANGED_GROUP)
            if plan.session_id is not None:
                # A session has one GET stream: a newer one takes over and this message ends the older ones.
                await layer.group_send(
                    broker.session_group(plan.session_id),
                    {"type": broker.SESSION_CONTROL, "op": "takeover", "stream": self.id},
                )
                groups.add(broker.session_group(plan.session_id))
            for group in groups:
                await layer.group_add(group, channel)
            if plan.resync is not None:
                await self._resync(layer, channel, groups)
        except Exception:
            # The channel layer is unreachable (Redis down): a clean error, never a 500 and nothing left counted.
            logger.exception("stream %s: could not join the channel layer", self.id)
            await self._leave(layer, channel, groups)
            await self._refuse(200, InternalError(request_id=plan.subscription_id))
            return
        self.renew_at = time.monotonic() + _group_renewal(layer)
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
            await self._loop(layer, channel, groups, disconnected)
        except StreamClosed:
            logger.debug("stream %s ended by the client", self.id)
        except asyncio.CancelledError:
            # Server shutdown: a graceful end if the transport still takes it. Written without a timer task, so the
            # bytes reach the transport before anything else runs (the server may stop the loop right after).
            await self._final_result(direct=True)
            raise
        except Exception:
            # The channel layer failed mid-stream: end as the server does (the client may listen again).
            logger.exception("stream %s failed", self.id)
            await self._final_result()
        finally:
            disconnected.cancel()
            await self._leave(layer, channel, groups)
            if task is not None:
                _active.discard(task)
            try:
                await asyncio.wait_for(self.send({"type": "http.response.body", "body": b"", "more_body": False}), 1)
            except Exception:
                logger.debug("stream %s: the connection is already closed", self.id)

    async def _leave(self, layer: Any, channel: str, groups: set[str]) -> None:
        for group in groups:
            try:
                await layer.group_discard(group, channel)
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

    async def _loop(self, layer: Any, channel: str, groups: set[str], disconnected: asyncio.Future[None]) -> None:
        # One receive stays pending across keep-alives: cancelling a receive can lose a message (channels_redis
        # pops it from Redis for every stream of the process, then drops it when cancelled).
        receiving: asyncio.Future[Any] | None = None
        receive_started = 0.0
        failures = 0
        plan = self.plan
        try:
            while True:
                if plan.expires_at is not None and plan.expires_at - time.time() <= 0:
                    await self._final_result()  # the caller's token expired: end gracefully
                    return
                if time.monotonic() >= self.renew_at:
                    # Layers forget group members after ``group_expiry``: a long-lived stream joins again.
                    for group in list(groups):
                        await layer.group_add(group, channel)
                    self.renew_at = time.monotonic() + _group_renewal(layer)
                keepalive_at = self.last_write + mcp_settings.stream_keepalive_seconds
                if time.monotonic() >= keepalive_at:
                    await self.write(b": keep-alive\r\n\r\n")
                    continue
                timeout = min(keepalive_at, self.renew_at) - time.monotonic()
                if plan.expires_at is not None:
                    timeout = min(timeout, plan.expires_at - time.time())
                if receiving is None:
                    receiving = asyncio.ensure_future(layer.receive(channel))
                    receive_started = time.monotonic()
                done, _ = await asyncio.wait(
                    {receiving, disconnected}, timeout=max(0.0, timeout), return_when=asyncio.FIRST_COMPLETED
                )
                if disconnected in done:
                    raise StreamClosed()
                if receiving in done:
                    finished, receiving = receiving, None
                    try:
                        message = finished.result()
                    except Exception as exc:
                        # A receive that waited a while and then failed is a transient error (redis-py 8 times out
                        # an idle blocking read after its default socket_timeout): receive again. Quick repeated
                        # failures mean the layer is down: the stream ends (the client may listen again).
                        failures = failures + 1 if time.monotonic() - receive_started < 1 else 1
                        if failures >= RECEIVE_ATTEMPTS:
                            raise
                        logger.debug("stream %s: receive failed (%r); receiving again", self.id, exc)
                        await asyncio.sleep(0.1 * failures)
                        continue
                    failures = 0
                    if not await self._dispatch(message, layer, channel, groups):
                        return
        finally:
            if receiving is not None:
                receiving.cancel()

    async def _dispatch(self, message: dict[str, Any], layer: Any, channel: str, groups: set[str]) -> bool:
        """Deliver one channel-layer message; ``False`` ends the stream."""
        plan = self.plan
        kind = message.get("type")
        if kind == broker.UPDATED:
            uri = message.get("uri")
            if not isinstance(uri, str) or uri not in plan.uris:
                return True
            try:
                allowed = await sync_to_async(_checked, thread_sensitive=False)(plan.check, uri)
            except CredentialsRejected:
                # Revoked (or its user deactivated): the stream ends as at the token's expiry; the client may listen
                # again, and is then refused with a 401 challenge.
                logger.info("stream %s: its credentials are no longer accepted; ending it", self.id)
                await self._final_result()
                return False
            if not allowed:
                logger.debug("stream %s: access to %s is gone; update withheld", self.id, uri[:200])
                return True
            await self.write(self.notification("notifications/resources/updated", {"uri": uri}))
        elif kind == broker.LIST_CHANGED and plan.list_changed:
            await self.write(self.notification("notifications/resources/list_changed"))
        elif kind == broker.SESSION_CONTROL and plan.session_id is not None:
            return await self._control(message, layer, channel, groups)
        return True

    async def _resync(self, layer: Any, channel: str, groups: set[str]) -> None:
        """Align the stream with the session's stored subscriptions (control messages sent before it joined)."""
        assert self.plan.resync is not None
        try:
            current = await sync_to_async(self.plan.resync, thread_sensitive=False)()
        except Exception:
            logger.exception("stream %s: could not re-read the session's subscriptions", self.id)
            return
        for uri in current:
            await self._control({"op": "subscribe", "uri": uri}, layer, channel, groups)
        for uri in self.plan.uris - set(current):
            await self._control({"op": "unsubscribe", "uri": uri}, layer, channel, groups)

    async def _control(self, message: dict[str, Any], layer: Any, channel: str, groups: set[str]) -> bool:
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
                groups.add(group)
                await layer.group_add(group, channel)
        elif op == "unsubscribe" and uri in self.plan.uris:
            self.plan.uris.discard(uri)
            groups.discard(group)
            await layer.group_discard(group, channel)
        return True


def _group_renewal(layer: Any) -> float:
    """Seconds until a stream joins its groups again: half the layer's ``group_expiry``."""
    expiry = getattr(layer, "group_expiry", DEFAULT_GROUP_EXPIRY)
    try:
        return max(0.5, float(expiry) / 2)
    except (TypeError, ValueError):
        return DEFAULT_GROUP_EXPIRY / 2


async def end_all_streams(timeout: float = 5.0) -> None:
    """End every open stream of this process (at shutdown); 2026-07-28 listeners get the final result first.

    Waits up to ``timeout`` seconds for the streams to finish writing.
    """
    tasks = [task for task in _active if task is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=timeout)
