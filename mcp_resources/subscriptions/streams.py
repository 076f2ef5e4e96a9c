"""Long-lived SSE streams on the event loop: ``subscriptions/listen`` (2026-07-28) and a legacy session's GET.

A stream holds no thread: it waits on its channel of the channel layer, on the client's disconnect and on a
keep-alive timer. Thread hops happen only to re-check the caller's access before each ``updated`` notification.
Limits: ``STREAMS_PER_CALLER`` per process, ``URIS_PER_LISTEN`` per stream, ``STREAM_QUEUE_SIZE`` messages buffered
per stream by the in-memory layer (the Redis layer has its own capacity); a client that stops reading is ended
once a write waits longer than ``STREAM_SEND_TIMEOUT_SECONDS``, so memory stays flat.
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

from mcp_resources import jsonrpc
from mcp_resources.conf import mcp_settings
from mcp_resources.subscriptions import broker

logger = logging.getLogger("mcp_resources.subscriptions")

SUBSCRIPTION_ID_META = "io.modelcontextprotocol/subscriptionId"
SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]

Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]

_open_streams: Counter[str] = Counter()
_active: set[asyncio.Task[Any]] = set()


@dataclass
class StreamPlan:
    """What a validated stream request may receive; built in a worker thread, served on the event loop."""

    owner: str
    uris: set[str]
    list_changed: bool
    check: Callable[[str], bool]
    subscription_id: Any = None  # the listen request's id (2026-07-28); None for a legacy GET stream
    honoured: dict[str, Any] = field(default_factory=dict)
    session_id: str | None = None
    expires_at: float | None = None
    extra_headers: list[tuple[bytes, bytes]] = field(default_factory=list)

    @property
    def modern(self) -> bool:
        return self.session_id is None


class StreamClosed(Exception):
    """The client went away or stopped reading."""


def open_stream_count(owner: str) -> int:
    return _open_streams[owner]


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

    async def write(self, data: bytes) -> None:
        try:
            await asyncio.wait_for(
                self.send({"type": "http.response.body", "body": data, "more_body": True}),
                mcp_settings.stream_send_timeout,
            )
        except (TimeoutError, OSError) as exc:
            raise StreamClosed() from exc

    def notification(self, method: str, params: dict[str, Any] | None = None) -> bytes:
        params = dict(params or {})
        if self.plan.modern:
            params["_meta"] = {SUBSCRIPTION_ID_META: self.plan.subscription_id}
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params:
            message["params"] = params
        return event(message)

    async def serve(self) -> None:
        plan = self.plan
        if _open_streams[plan.owner] >= mcp_settings.streams_per_caller:
            error = jsonrpc.InvalidRequest("Too many open streams for this caller", request_id=plan.subscription_id)
            body = jsonrpc.dumps(error.to_response())
            await self.send(
                {"type": "http.response.start", "status": 429, "headers": [(b"content-type", b"application/json")]}
            )
            await self.send({"type": "http.response.body", "body": body})
            return
        _open_streams[plan.owner] += 1
        broker.bind_stream_loop(asyncio.get_running_loop())
        layer = broker.get_layer()
        channel = await layer.new_channel()
        groups = {broker.uri_group(uri) for uri in plan.uris}
        if plan.list_changed:
            groups.add(broker.LIST_CHANGED_GROUP)
        if plan.session_id is not None:
            # A session has one GET stream: a newer one takes over and this message ends the older ones.
            await broker.apublish(
                broker.session_group(plan.session_id),
                {"type": broker.SESSION_CONTROL, "op": "takeover", "stream": self.id},
            )
            groups.add(broker.session_group(plan.session_id))
        for group in groups:
            await layer.group_add(group, channel)
        task = asyncio.current_task()
        if task is not None:
            _active.add(task)
        disconnected = asyncio.ensure_future(self._wait_disconnect())
        try:
            await self.send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS + plan.extra_headers})
            if plan.modern:
                await self.write(
                    self.notification("notifications/subscriptions/acknowledged", {"notifications": plan.honoured})
                )
            await self._loop(layer, channel, groups, disconnected)
        except StreamClosed:
            logger.debug("stream %s ended by the client", self.id)
        except asyncio.CancelledError:
            await self._final_result()  # server shutdown: a graceful end if the transport still takes it
            raise
        finally:
            disconnected.cancel()
            for group in groups:
                try:
                    await layer.group_discard(group, channel)
                except Exception:
                    logger.debug("could not leave %s", group)
            _open_streams[plan.owner] -= 1
            if _open_streams[plan.owner] <= 0:
                del _open_streams[plan.owner]
            if task is not None:
                _active.discard(task)
            try:
                await asyncio.wait_for(self.send({"type": "http.response.body", "body": b"", "more_body": False}), 1)
            except Exception:
                logger.debug("stream %s: the connection is already closed", self.id)

    async def _wait_disconnect(self) -> None:
        while True:
            message = await self.receive()
            if message["type"] == "http.disconnect":
                return

    async def _final_result(self) -> None:
        if not self.plan.modern:
            return
        result = jsonrpc.result_response(
            self.plan.subscription_id,
            {"resultType": "complete", "_meta": {SUBSCRIPTION_ID_META: self.plan.subscription_id}},
        )
        try:
            await self.write(event(result))
        except (StreamClosed, Exception):
            logger.debug("stream %s: could not send the final result", self.id)

    async def _loop(self, layer: Any, channel: str, groups: set[str], disconnected: asyncio.Future[None]) -> None:
        plan = self.plan
        while True:
            timeout = mcp_settings.keepalive_seconds
            if plan.expires_at is not None:
                remaining = plan.expires_at - time.time()
                if remaining <= 0:
                    await self._final_result()  # the caller's token expired: end gracefully
                    return
                timeout = min(timeout, remaining)
            receiving = asyncio.ensure_future(layer.receive(channel))
            done, _ = await asyncio.wait(
                {receiving, disconnected}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
            if disconnected in done:
                receiving.cancel()
                raise StreamClosed()
            if receiving not in done:
                receiving.cancel()
                await self.write(b": keep-alive\r\n\r\n")
                continue
            message = receiving.result()
            kind = message.get("type")
            if kind == broker.UPDATED:
                uri = message.get("uri")
                if not isinstance(uri, str) or uri not in plan.uris:
                    continue
                allowed = await sync_to_async(_checked, thread_sensitive=False)(plan.check, uri)
                if not allowed:
                    logger.debug("stream %s: access to %s is gone; update withheld", self.id, uri[:200])
                    continue
                await self.write(self.notification("notifications/resources/updated", {"uri": uri}))
            elif kind == broker.LIST_CHANGED and plan.list_changed:
                await self.write(self.notification("notifications/resources/list_changed"))
            elif (
                kind == broker.SESSION_CONTROL
                and plan.session_id is not None
                and not await self._control(message, layer, channel, groups)
            ):
                return

    async def _control(self, message: dict[str, Any], layer: Any, channel: str, groups: set[str]) -> bool:
        """Apply a legacy session's control message; ``False`` ends the stream."""
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


async def end_all_streams() -> None:
    """Cancel every open stream of this process; 2026-07-28 listeners get the final result first."""
    for task in list(_active):
        task.cancel()
