"""Publishing changes through a channel layer.

Every process that serves streams joins groups on the configured channel layer (``MCP_RESOURCES["CHANNEL_LAYER"]``,
an alias of ``CHANNEL_LAYERS``). Without ``CHANNEL_LAYERS`` a process-local in-memory layer is used, which
reaches only streams of the same process: configure ``channels_redis`` for several workers or machines.

Publishing never raises: a failure is logged. Who may receive an update is decided where it is delivered (each
stream re-checks its caller's access), never here.

Publications are numbered: each carries its publisher (``origin``: this process), a sequence number per group
(``seq``) and when that sequence began (``since``, wall-clock seconds). A receiver that sees a number skipped knows
the layer dropped a message (a channel over its ``capacity``) and ends the streams that would have received it
with a final message, so no loss goes unnoticed (:mod:`mcp_resources.transport.fanout`).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import secrets
import threading
import time
from collections import OrderedDict
from typing import Any

from asgiref.sync import async_to_sync

from mcp_resources.conf import mcp_settings

logger = logging.getLogger("mcp_resources.subscriptions")

LIST_CHANGED_GROUP = "mcp_resources.list_changed"
UPDATED = "mcp.resource.updated"
LIST_CHANGED = "mcp.resource.list_changed"
SESSION_CONTROL = "mcp.session.control"

IN_MEMORY_CAPACITY = 100
"""Messages the fallback in-memory layer buffers per channel (a stream); configure ``CHANNEL_LAYERS`` to change it."""

_local_layer: Any = None
_local_lock = threading.Lock()


def uri_group(uri: str) -> str:
    """The group of streams subscribed to ``uri`` (a digest: group names are short ASCII)."""
    return "mcp_resources.uri." + hashlib.sha256(uri.encode("utf-8", "surrogatepass")).hexdigest()[:40]


def session_group(session_id: str) -> str:
    """The control group of a 2025-11-25 session's GET stream."""
    return "mcp_resources.session." + hashlib.sha256(session_id.encode()).hexdigest()[:40]


def get_layer() -> Any:
    """The channel layer used for fan-out."""
    global _local_layer
    from django.conf import settings

    if getattr(settings, "CHANNEL_LAYERS", None):
        from channels.layers import get_channel_layer

        return get_channel_layer(mcp_settings.channel_layer)
    with _local_lock:
        if _local_layer is None:
            from channels.layers import InMemoryChannelLayer

            _local_layer = InMemoryChannelLayer(expiry=60, capacity=IN_MEMORY_CAPACITY)
        return _local_layer


SEQUENCES_KEPT = 65536
"""Groups whose sequence a publisher remembers; the least recently published one starts a new sequence."""

_sequences: OrderedDict[str, tuple[float, int]] = OrderedDict()  # group -> (since, last seq)
_sequence_lock = threading.Lock()
_origin: tuple[int, str] = (0, "")


def origin() -> str:
    """This publisher: a fresh name in every process (a fork gets its own)."""
    global _origin
    pid = os.getpid()
    if _origin[0] != pid:
        with _sequence_lock:
            if _origin[0] != pid:
                _sequences.clear()
                _origin = (pid, f"{pid}.{secrets.token_hex(6)}")
    return _origin[1]


def numbered(group: str, message: dict[str, Any]) -> dict[str, Any]:
    """``message`` with this publisher's next number for ``group`` (see the module's docstring)."""
    name = origin()
    with _sequence_lock:
        since, seq = _sequences.pop(group, (time.time(), 0))
        _sequences[group] = (since, seq + 1)
        while len(_sequences) > SEQUENCES_KEPT:
            _sequences.popitem(last=False)
    return {**message, "group": group, "origin": name, "since": since, "seq": seq + 1}


_stream_loop: asyncio.AbstractEventLoop | None = None
_pending: set[asyncio.Task[None]] = set()  # publications scheduled on the stream loop (kept until done)


def bind_stream_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Remember the event loop that serves this process's streams (publishing from threads goes through it)."""
    global _stream_loop
    _stream_loop = loop


def publish(group: str, message: dict[str, Any]) -> None:
    """Send ``message`` to ``group`` from any thread, numbered; failures are logged, never raised."""
    try:
        layer = get_layer()
        loop = _stream_loop
        serving = loop is not None and loop.is_running()
        if layer is _local_layer and not serving:
            return  # no stream was ever served by this process: nobody to tell
        message = numbered(group, message)
        if serving:
            assert loop is not None
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is loop:
                task = loop.create_task(apublish(group, message))
                _pending.add(task)
                task.add_done_callback(_pending.discard)
            else:
                asyncio.run_coroutine_threadsafe(layer.group_send(group, message), loop).result(timeout=10)
            return
        async_to_sync(layer.group_send)(group, message)
    except Exception:
        logger.exception("could not publish %s", message.get("type"))


async def apublish(group: str, message: dict[str, Any]) -> None:
    """:func:`publish` from the event loop (``message`` is numbered unless it already is)."""
    try:
        if "seq" not in message:
            message = numbered(group, message)
        await get_layer().group_send(group, message)
    except Exception:
        logger.exception("could not publish %s", message.get("type"))


def notify_resource_updated(uri: str) -> None:
    """Tell subscribers of ``uri`` that it changed (each delivery re-checks the subscriber's access)."""
    publish(uri_group(uri), {"type": UPDATED, "uri": uri})


def notify_resource_list_changed() -> None:
    """Tell listeners that the set of static and live resources changed.

    Never call this for records inside a caller's inventory: list changes go to every listener, so they would
    leak one user's activity to others.
    """
    publish(LIST_CHANGED_GROUP, {"type": LIST_CHANGED})
