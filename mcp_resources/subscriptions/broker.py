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

A skipped number is seen when a later one arrives; the last publications before a silence have none after them. So
each publisher follows its last publication for a group, :data:`FENCE_DELAY_SECONDS` later, with a *fence*: a
message that carries that publication's number and is not delivered to any client. A receiver that has not seen
every number up to the fence's knows what it missed. The fence is sent again :data:`FENCE_REPEAT_SECONDS` later: a
receiver whose channel was still full when the first arrived (a stalled worker) drops that one too. Fences are sent
by one daemon thread per publishing process (started with its first publication; a process that exits sends the
fences it still owes at once), and a group published more often than the delay gets no fence until it falls silent.
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import heapq
import itertools
import logging
import os
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from asgiref.sync import async_to_sync

from mcp_resources.conf import mcp_settings

logger = logging.getLogger("mcp_resources.subscriptions")

LIST_CHANGED_GROUP = "mcp_resources.list_changed"
UPDATED = "mcp.resource.updated"
LIST_CHANGED = "mcp.resource.list_changed"
SESSION_CONTROL = "mcp.session.control"
FENCE = "mcp.fence"
"""A publisher's last number for a group so far (see the module's docstring): checked, never delivered."""
FENCE_DELAY_SECONDS = 2.0
"""Silence after a group's last publication before its publisher sends the fence."""
FENCE_REPEAT_SECONDS = 15.0
"""Further silence before the same fence is sent a second and last time (a receiver stalled for longer than the
delay dropped the first with the publications)."""
SEND_TIMEOUT_SECONDS = 10.0
"""The most a publication sent from a thread waits for the layer (then it is logged as failed)."""

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
    _fences.owe(group, (name, since, seq + 1, time.time()))
    return {**message, "group": group, "origin": name, "since": since, "seq": seq + 1}


PublicationNumber = tuple[str, float, int, float]
"""A publication's number as a fence carries it: origin, since, seq, and when it was numbered."""


@dataclass
class _Owed:
    """The fence a group is owed: its heap entry, when it falls due, the number it carries, whether it repeats one."""

    entry: int
    due: float
    number: PublicationNumber
    repeat: bool


class _Fences:
    """The fences this process owes, sent by one daemon thread once each group has been silent long enough.

    ``owed`` holds one fence per group (least recently published first, at most :data:`SEQUENCES_KEPT`), and the
    heap ``(when due, entry, group)`` at most one entry for it, plus one for a repeat it replaced (skipped when it
    falls due). A publication that finds its group's first fence not yet sent only moves that fence later: its heap
    entry is pushed back when it falls due. So publishing costs no heap entry for a group already owed one.

    A fence pushed out of ``owed`` by the cap goes to ``early`` and is sent at once, without a repeat: sent before
    its publications have arrived, it only opens holes that they fill within the grace period. Should ``early``
    itself pass the cap (the sending thread far behind), the oldest are dropped and counted in ``forgotten``, which
    the sending thread logs.
    """

    def __init__(self) -> None:
        self.heap: list[tuple[float, int, str]] = []
        self.owed: dict[str, _Owed] = {}
        self.early: dict[str, PublicationNumber] = {}
        self.forgotten = 0
        self.ids = itertools.count()
        self.condition = threading.Condition()
        self.pid = 0

    def owe(self, group: str, number: PublicationNumber) -> None:
        """Owe a fence for ``group`` after its publication ``number``; this replaces the fences owed for an earlier
        publication (its repeat included)."""
        with self.condition:
            due = time.monotonic() + FENCE_DELAY_SECONDS
            owed = self.owed.pop(group, None)
            if owed is not None and not owed.repeat:
                owed.due, owed.number = due, number
                self.owed[group] = owed
            else:
                self._schedule(group, due, number, repeat=False)
            while len(self.owed) > SEQUENCES_KEPT:
                oldest = next(iter(self.owed))
                self._send_early(oldest, self.owed.pop(oldest).number)
            if self.pid != os.getpid():  # the first publication of this process (a fork has no thread of its own)
                self.pid = os.getpid()
                threading.Thread(target=self.run, name="mcp-resources-fences", daemon=True).start()
            self.condition.notify()

    def _send_early(self, group: str, number: PublicationNumber) -> None:
        self.early.pop(group, None)
        self.early[group] = number
        while len(self.early) > SEQUENCES_KEPT:
            del self.early[next(iter(self.early))]
            self.forgotten += 1

    def _schedule(self, group: str, due: float, number: PublicationNumber, *, repeat: bool) -> None:
        entry = next(self.ids)
        self.owed[group] = _Owed(entry, due, number, repeat)  # both callers removed the group's fence first
        heapq.heappush(self.heap, (due, entry, group))

    def take(self, block: bool = True) -> list[tuple[str, PublicationNumber]]:
        """The fences due now, waiting until there is one (``block``), or every fence still owed, repeats included
        (not ``block``). A first fence taken is owed again as its repeat, :data:`FENCE_REPEAT_SECONDS` later; the
        fences pushed out by the cap come first."""
        with self.condition:
            while True:
                while block and not self.early:
                    if not self.heap:
                        self.condition.wait()
                        continue
                    wait = self.heap[0][0] - time.monotonic()
                    if wait <= 0:
                        break
                    self.condition.wait(wait)
                taken = list(self.early.items())
                self.early.clear()
                taken += self._pop_due(block)
                if taken or not block:
                    return taken

    def _pop_due(self, block: bool) -> list[tuple[str, PublicationNumber]]:
        """The fences due now (every one owed when not ``block``), in the order they fall due."""
        now = time.monotonic()
        taken: list[tuple[float, str, PublicationNumber]] = []
        repeats: list[tuple[str, PublicationNumber]] = []
        while self.heap and (not block or self.heap[0][0] <= now):
            _, entry, group = heapq.heappop(self.heap)
            owed = self.owed.get(group)
            if owed is None or owed.entry != entry:
                continue  # a repeat replaced by a later publication's fence, or a fence sent early
            if block and owed.due > now:
                heapq.heappush(self.heap, (owed.due, entry, group))  # moved later by a later publication
                continue
            del self.owed[group]
            taken.append((owed.due, group, owed.number))
            if block and not owed.repeat:
                repeats.append((group, owed.number))
        for group, number in repeats:  # after the loop: a repeat never falls due in the take that owes it
            self._schedule(group, now + FENCE_REPEAT_SECONDS, number, repeat=True)
        taken.sort(key=lambda fence: fence[0])
        return [(group, number) for _, group, number in taken]

    def run(self) -> None:
        loop = asyncio.new_event_loop()  # the thread's own, kept: the layer's connections on it are reused
        while True:
            self.send(self.take(), loop.run_until_complete)
            self.report_forgotten()

    def flush(self) -> None:
        """Send every fence still owed now (at exit: a short-lived publisher would otherwise owe them forever)."""
        if self.pid == os.getpid():
            self.send(self.take(block=False), asyncio.run)
            self.report_forgotten()

    def report_forgotten(self) -> None:
        """Log the fences dropped since the last report (see the class's docstring)."""
        with self.condition:
            forgotten, self.forgotten = self.forgotten, 0
        if forgotten:
            logger.warning(
                "forgot %d fence(s): over %d groups were owed one at once and the thread sending them fell behind; "
                "a loss of their last publications would go unnoticed",
                forgotten,
                SEQUENCES_KEPT,
            )

    @staticmethod
    def send(fences: list[tuple[str, PublicationNumber]], run: Callable[[Any], Any]) -> None:
        for group, (name, since, seq, at) in fences:
            message = {"type": FENCE, "group": group, "origin": name, "since": since, "seq": seq, "at": at}
            _send(group, message, run)


_fences = _Fences()
atexit.register(_fences.flush)


_stream_loop: asyncio.AbstractEventLoop | None = None
_pending: set[asyncio.Task[None]] = set()  # publications scheduled on the stream loop (kept until done)


def bind_stream_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Remember the event loop that serves this process's streams (publishing from threads goes through it)."""
    global _stream_loop
    _stream_loop = loop


def publish(group: str, message: dict[str, Any]) -> None:
    """Send ``message`` to ``group`` from any thread, numbered; failures are logged, never raised."""
    try:
        if _in_process(get_layer()) and not _serving():
            return  # an in-memory layer reaches this process's streams only, and none is being served
    except Exception:
        logger.exception("could not publish %s", message.get("type"))
        return
    _send(group, numbered(group, message))


def _serving() -> bool:
    return _stream_loop is not None and _stream_loop.is_running()


def _send(group: str, message: dict[str, Any], run: Callable[[Any], Any] | None = None) -> None:
    """Send a numbered message (or a fence) to ``group`` from any thread; failures are logged, never raised.

    Outside the streams' loop the layer's send runs through ``async_to_sync`` (on the loop of a ``sync_to_async``
    caller, with its connections), or through ``run`` when given (the fences' own loop, ``asyncio.run`` at exit).
    """
    try:
        layer = get_layer()
        loop = _stream_loop
        if loop is not None and loop.is_running():
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is loop:
                task = loop.create_task(apublish(group, message))
                _pending.add(task)
                task.add_done_callback(_pending.discard)
            else:
                asyncio.run_coroutine_threadsafe(layer.group_send(group, message), loop).result(SEND_TIMEOUT_SECONDS)
            return
        if _in_process(layer):
            return  # the streams' loop has stopped: nobody to tell (its queues belong to that loop)
        if run is None:
            async_to_sync(layer.group_send)(group, message)
        else:
            run(_bounded(layer.group_send(group, message)))
    except Exception:
        logger.exception("could not publish %s", message.get("type"))


def _in_process(layer: Any) -> bool:
    """Whether ``layer`` keeps its messages in this process (Channels' in-memory layer): bound to the loop that
    serves the streams, never to be sent to from another one."""
    from channels.layers import InMemoryChannelLayer

    return isinstance(layer, InMemoryChannelLayer)


async def _bounded(sending: Any) -> None:
    async with asyncio.timeout(SEND_TIMEOUT_SECONDS):
        await sending


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
