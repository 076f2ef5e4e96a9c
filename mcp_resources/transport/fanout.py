"""One reader of the log per process, one hub per event loop: the log's events routed to the open streams.

Nothing is lost between the log and a stream: one that cannot keep up, and every stream after the reader lost the log
a while, catches up from the log by its last event id (:meth:`~mcp_resources.transport.streams.Stream.catch_up`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async
from django.core import signals

from mcp_resources.exceptions import CredentialsRejected
from mcp_resources.server.static_uris import static_uris
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
IDLE_SECONDS = 5.0
"""A reader with no hub on an open event loop for this long stops; the next stream on its log starts another."""

counts: Counter[str] = Counter()


def delivery_counts() -> dict[str, int]:
    """This process's delivery counters, by name (docs/subscriptions.md, "What ends a stream", lists them)."""
    return dict(counts)


class Reader(threading.Thread):
    """The process's reader of one log: every new event (``XREAD BLOCK``), to every loop's hub, in the log's order."""

    def __init__(self, log: Log) -> None:
        super().__init__(name="mcp-resources-log-reader", daemon=True)
        self.log = log
        self.position = log.last_id()
        self.hubs: set[Hub] = set()
        self.lock = threading.Lock()  # a hub joins at ``position``, and never a retired reader
        self.retired = False
        static_uris.forget()  # a change of the admin's resources may have been published before this reader

    def run(self) -> None:
        failed = reported = False
        used = time.monotonic()
        while True:
            with self.lock:
                self.hubs = {hub for hub in self.hubs if not hub.loop.is_closed()}
                if self.hubs:
                    used = time.monotonic()
                elif time.monotonic() - used > IDLE_SECONDS:
                    self.retired = True
                    return
            try:
                events = self.log.read(self.position, READ_SECONDS)
            except Exception:
                # With its traceback once per outage, once streams wait on the log; else at DEBUG until it answers.
                report = not reported and any(hub.members for hub in self.hubs)
                (logger.exception if report else logger.debug)("reading the log failed; from %s", self.position)
                failed, reported = True, reported or report
                time.sleep(1)
                continue
            if failed or any(event.kind == broker.LIST_CHANGED for event in events):  # before any later update
                static_uris.forget()
            with self.lock:
                hubs = list(self.hubs)
                self.position = events[-1].id if events else self.position
            if failed:  # what was trimmed meanwhile is found by each stream's catch-up
                failed = reported = False
                logger.warning("reading the log again from %s", self.position)
                for hub in hubs:
                    hub.call(hub.lag_all)
            for hub in hubs if events else ():
                hub.call(hub.receive, events)


_readers: dict[Log, Reader] = {}
_readers_lock = threading.Lock()


def reader_for(log: Log) -> Reader:
    """The running reader of ``log``, started on first use and again after one retired."""
    with _readers_lock:
        reader = _readers.get(log)
        if reader is None or reader.retired or not reader.is_alive():
            reader = _readers[log] = Reader(log)
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
        streams = self.members.get(key, set())
        streams.discard(stream)
        if not streams:
            self.members.pop(key, None)

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
    """The running loop's hub on the configured log, made on first use (with the log's reader, in a worker thread)."""
    loop, log = asyncio.get_running_loop(), broker.get_log()
    while (hub := _hubs.get(loop)) is None or hub.log is not log or hub.reader.retired:
        reader = await sync_to_async(reader_for, thread_sensitive=False)(log)
        if (hub := _hubs.get(loop)) is None or hub.log is not log or hub.reader.retired:  # none made meanwhile
            with contextlib.suppress(ReaderRetired):  # it stopped meanwhile: the next turn starts another
                _hubs[loop] = Hub(reader, loop)
    return hub


def decide(batch: list[tuple[str, list[Callable[[str], bool]]]]) -> list[list[bool | str | None]]:
    """For each ``(uri, checks)``, each check's decision: ``True``, ``False``, ``None`` (credentials no longer
    accepted) or :data:`FAILED` (it raised: logged); checks whose type has ``check_each(uri, checks)`` together.
    In a worker thread, as one request for Django (closing stale database connections)."""
    signals.request_started.send(sender=Hub)
    try:
        return [_decide_uri(uri, checks) for uri, checks in batch]
    finally:
        signals.request_finished.send(sender=Hub)


def _decide_uri(uri: str, checks: list[Callable[[str], bool]]) -> list[bool | str | None]:
    groups: dict[Any, list[Callable[[str], bool]]] = {}
    for check in checks:
        groups.setdefault(getattr(type(check), "check_each", _each), []).append(check)
    decided: dict[int, bool | str | None] = {}
    for check_each, group in groups.items():
        try:
            decided.update(zip(map(id, group), check_each(uri, group), strict=True))
        except Exception:
            logger.exception("access checks for %s failed", uri[:200])
    return [decided.get(id(check), FAILED) for check in checks]


def _each(uri: str, checks: list[Callable[[str], bool]]) -> Iterator[bool | str | None]:
    for check in checks:
        try:
            yield bool(check(uri))
        except CredentialsRejected:
            yield None
        except Exception:
            logger.exception("access check for %s failed", uri[:200])
            yield FAILED
