"""One reader of the log per process, one hub per event loop: the log's events routed to the open streams.

A daemon thread, the process's :class:`Reader`, reads every new event of the log (``XREAD BLOCK`` on Redis) from
where it left off and hands each batch to the :class:`Hub` of every event loop that serves streams. A hub knows
which of its streams wants what (a URI's updates, list changes, a session's control, a token's changes) and
queues each event on them in the log's order. An update is decided once per caller (the same credentials on the
same server), every caller in one thread hop and one query where the template allows
(:meth:`~mcp_resources.server.MCPServer.may_read_each`); the URIs waiting are decided together, up to
:data:`DECISION_BATCH` in one hop, :data:`CONCURRENT_DECISIONS` hops at once; a change of a URI whose decision has
not started shares it.

Nothing is lost between the log and a stream: a stream that cannot keep up (its queue full) and every stream after
the reader lost Redis for a while catch up from the log by their last event id
(:meth:`~mcp_resources.transport.streams.Stream.catch_up`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async
from django.core import signals

from mcp_resources.exceptions import CredentialsRejected
from mcp_resources.subscriptions import broker
from mcp_resources.subscriptions.broker import Event, Log

if TYPE_CHECKING:
    from mcp_resources.transport.streams import Stream

logger = logging.getLogger("mcp_resources.subscriptions")

CONCURRENT_DECISIONS = 8
"""Batches of access decisions under way at once (each in one worker thread); further changes wait, sharing per URI."""
DECISION_BATCH = 32  # URIs decided at most in one worker-thread hop (one request for Django, one connection)
FAILED = "failed"
"""An access decision that raised: the streams concerned end (their clients resynchronise), nothing is withheld."""
READ_SECONDS = 1.0
TRIM_SECONDS = 10.0
IDLE_SECONDS = 5.0
"""A reader with no hub on an open event loop for this long stops: a log no stream uses any more (its loops closed,
or ``DELIVERY_URL`` changed) is not read for ever. The next stream on that log starts a reader again."""

counts: Counter[str] = Counter()
"""Delivery counters of this process (see :func:`delivery_counts`)."""


def delivery_counts() -> dict[str, int]:
    """What this process delivered, withheld, replayed and ended since it started.

    ``delivered`` notifications written to streams; ``withheld`` updates a caller may no longer read; ``replayed``
    notifications a stream caught up on from the log; ``caught_up`` catch-ups (a stream that fell behind, or every
    stream after the reader lost the log for a while); ``ended_<reason>`` streams ended with a final message for
    each reason of :data:`~mcp_resources.transport.streams.ENDINGS`.
    """
    return dict(counts)


class Reader(threading.Thread):
    """The process's reader of one log: every new event, to every hub, in the log's order."""

    def __init__(self, log: Log) -> None:
        super().__init__(name="mcp-resources-log-reader", daemon=True)
        self.log = log
        self.position = log.last_id()
        self.hubs: set[Hub] = set()
        self.lock = threading.Lock()
        self.retired = False

    def live_hubs(self) -> list[Hub]:
        """The hubs whose event loops are still open (the others are forgotten)."""
        with self.lock:
            self.hubs = {hub for hub in self.hubs if not hub.loop.is_closed()}
            return list(self.hubs)

    def retire(self) -> bool:
        """Stop, unless a hub joined meanwhile; :func:`reader_for` then starts a new reader for the log."""
        with _readers_lock, self.lock:
            if self.hubs:
                return False
            self.retired = True
            if _readers.get(id(self.log)) is self:
                del _readers[id(self.log)]
            return True

    def run(self) -> None:
        failed = False
        trimmed = idle_since = time.monotonic()
        while True:
            if self.live_hubs():
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since > IDLE_SECONDS and self.retire():
                return
            try:
                events = self.log.read(self.position, READ_SECONDS)
                if time.monotonic() - trimmed > TRIM_SECONDS:
                    trimmed = time.monotonic()
                    self.log.trim(self.position)
            except Exception:
                # Logged with its traceback once per outage while streams wait on it (then at DEBUG each second until
                # the log answers); a log no open stream uses is only logged at DEBUG while the reader winds down.
                log = logger.debug if failed or not self.live_hubs() else logger.exception
                log("reading the log failed; reading again from %s", self.position)
                failed = True
                time.sleep(1)
                continue
            with self.lock:  # a hub added from now on starts at the new position
                hubs = list(self.hubs)
                if events:
                    self.position = events[-1].id
            if failed:  # what was trimmed meanwhile is found by each stream's catch-up
                failed = False
                logger.warning("reading the log again from %s", self.position)
                for hub in hubs:
                    hub.call(hub.lag_all)
            if events:
                for hub in hubs:
                    if not hub.call(hub.receive, events):
                        with self.lock:
                            self.hubs.discard(hub)


_readers: dict[int, Reader] = {}
_readers_lock = threading.Lock()


def reader_for(log: Log) -> Reader:
    with _readers_lock:
        reader = _readers.get(id(log))
        if reader is None or reader.log is not log or reader.retired or not reader.is_alive():
            reader = _readers[id(log)] = Reader(log)
            reader.start()
        return reader


class ReaderRetired(Exception):
    """The reader stopped (no open stream used its log) before a hub could join it."""


class Hub:
    """The streams of one event loop and what each wants: keys ``("u", uri)``, ``("l", "")``, ``("s", session)``
    and ``("t", token checksum)``."""

    def __init__(self, reader: Reader, loop: asyncio.AbstractEventLoop) -> None:
        self.log = reader.log
        self.loop = loop
        self.members: dict[tuple[str, str], set[Stream]] = {}
        self.waiting: dict[str, tuple[set[Stream], asyncio.Future[Any]]] = {}  # URI -> decision not started yet
        self.deciding = 0  # batches of decisions under way
        self.reader = reader
        with self.reader.lock:
            if reader.retired:
                raise ReaderRetired
            self.position = self.reader.position
            self.reader.hubs.add(self)

    def call(self, function: Callable[..., None], *args: Any) -> bool:
        """Run ``function`` on the hub's loop, from the reader's thread; ``False`` once the loop has closed."""
        try:
            self.loop.call_soon_threadsafe(function, *args)
        except RuntimeError:
            return False
        return True

    def join(self, stream: Stream, key: tuple[str, str]) -> None:
        self.members.setdefault(key, set()).add(stream)

    def leave(self, stream: Stream, key: tuple[str, str]) -> None:
        streams = self.members.get(key)
        if streams is not None:
            streams.discard(stream)
            if not streams:
                del self.members[key]

    def lag_all(self) -> None:
        for stream in {stream for streams in self.members.values() for stream in streams}:
            stream.fall_behind()

    def receive(self, events: list[Event]) -> None:
        for event in events:
            self.position = event.id
            if event.kind == broker.UPDATED:
                streams = self.members.get(("u", event.target))
                if streams:
                    decision = self.decision(event.target, streams)
                    for stream in list(streams):
                        stream.push(event, decision)
                continue
            key = {broker.LIST_CHANGED: "l", broker.SESSION: "s", broker.TOKEN: "t"}.get(event.kind)
            for stream in list(self.members.get((key, event.target), ())) if key else ():
                stream.push(event, None)

    def decision(self, uri: str, streams: set[Stream]) -> asyncio.Future[Any]:
        """The future decisions on ``uri`` for the callers of ``streams``: a decision not started yet is shared."""
        waiting = self.waiting.get(uri)
        if waiting is not None:
            waiting[0].update(streams)
            return waiting[1]
        future: asyncio.Future[Any] = self.loop.create_future()
        self.waiting[uri] = (set(streams), future)
        if self.deciding < CONCURRENT_DECISIONS:
            self.deciding += 1
            self.loop.create_task(self._decide())
        return future

    async def _decide(self) -> None:
        """Decide the waiting URIs (up to :data:`DECISION_BATCH` in one thread hop) until none waits: once per
        caller of each URI's streams (the same credentials on the same server)."""
        try:
            while self.waiting:
                batch = {uri: self.waiting.pop(uri) for uri in list(self.waiting)[:DECISION_BATCH]}
                callers = [{stream.caller: stream.plan.check for stream in entry[0]} for entry in batch.values()]
                try:
                    asked = [(uri, list(checks.values())) for uri, checks in zip(batch, callers, strict=True)]
                    outcome = await sync_to_async(decide, thread_sensitive=False)(asked)
                except Exception:
                    logger.exception("access checks for %s failed", ", ".join(batch)[:200])
                    outcome = [[FAILED] * len(checks) for checks in callers]
                for (_, future), checks, decided in zip(batch.values(), callers, outcome, strict=True):
                    future.set_result(dict(zip(checks, decided, strict=True)))
        finally:
            self.deciding -= 1


_hubs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Hub] = weakref.WeakKeyDictionary()


async def get_hub() -> Hub:
    """The hub of the running loop on the configured log (created, with the process's reader, on first use: in a
    worker thread, as the reader asks the log where it ends)."""
    loop = asyncio.get_running_loop()
    log = broker.get_log()
    hub = _hubs.get(loop)
    while hub is None or hub.log is not log or hub.reader.retired:
        reader = await sync_to_async(reader_for, thread_sensitive=False)(log)
        hub = _hubs.get(loop)
        if hub is None or hub.log is not log or hub.reader.retired:
            try:
                hub = _hubs[loop] = Hub(reader, loop)
            except ReaderRetired:  # it stopped between reader_for() and now: start another
                hub = None
    return hub


def running_hub() -> Hub | None:
    try:
        return _hubs.get(asyncio.get_running_loop())
    except RuntimeError:
        return None


def decide(batch: list[tuple[str, list[Callable[[str], bool]]]]) -> list[list[bool | str | None]]:
    """For each ``(uri, checks)``, each check's decision on ``uri``: ``True``, ``False``, ``None`` (its credentials
    are no longer accepted) or :data:`FAILED` (the check raised: logged).

    Checks whose type offers ``check_each(uri, checks)`` (the endpoint's) are decided together; others one by
    one. Runs in a worker thread, as one request for Django (stale database connections are closed around it).
    """
    signals.request_started.send(sender=Hub)
    try:
        outcomes: list[list[bool | str | None]] = []
        for uri, checks in batch:
            outcome: list[bool | str | None] = [FAILED] * len(checks)
            outcomes.append(outcome)
            batches: dict[Any, list[int]] = {}
            for index, check in enumerate(checks):
                batches.setdefault(getattr(type(check), "check_each", None), []).append(index)
            for check_each, indexes in batches.items():
                if check_each is not None:
                    try:
                        decided = check_each(uri, [checks[i] for i in indexes])
                    except Exception:
                        logger.exception("access checks for %s failed", uri[:200])
                        continue
                    for index, allowed in zip(indexes, decided, strict=True):
                        outcome[index] = allowed
                    continue
                for index in indexes:
                    try:
                        outcome[index] = bool(checks[index](uri))
                    except CredentialsRejected:
                        outcome[index] = None
                    except Exception:
                        logger.exception("access check for %s failed", uri[:200])
        return outcomes
    finally:
        signals.request_finished.send(sender=Hub)
