"""Publishing changes on an ordered, retained, id-addressed log, and reading it back.

Every change is one entry of one log: a Redis stream (``XADD``, ``XREAD BLOCK``, ``XRANGE``, through redis-py)
when :setting:`DELIVERY_URL` names a Redis server, else a :class:`MemoryLog` of this process (tests, the demo, one
process). The log gives each entry its id, ``<milliseconds>-<sequence>``, increasing: Redis's ids come from Redis's
clock alone, so no two servers' clocks have to agree. Entries are kept for ``DELIVERY_RETENTION_SECONDS`` (and at
most :data:`MAX_EVENTS`); a reader asking for what followed an id whose successors were trimmed is told so
(:meth:`Log.replay`), never given a silent gap.

Publishing never raises: a failure is logged. Who may receive an update is decided where it is delivered (each
stream re-checks its caller's access), never here. Publishers in sync code (a view, a signal receiver) share one
pooled set of connections per process and URL (:func:`connection_pool`).
"""

from __future__ import annotations

import bisect
import hashlib
import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Any

from mcp_resources.conf import mcp_settings

logger = logging.getLogger("mcp_resources.subscriptions")

KEY = "mcp_resources:events"
"""The Redis stream every process appends to and reads."""
MAX_EVENTS = 1_000_000
"""Entries kept at most (``XADD ... MAXLEN ~``), whatever the retention: the log's memory bound."""
POOL_CONNECTIONS = 50
"""Connections of a process's pool per Redis URL; a publisher waits for a free one rather than open more."""
ZERO = "0-0"

UPDATED, LIST_CHANGED, SESSION, TOKEN = "updated", "list_changed", "session", "token"


@dataclass(frozen=True)
class Event:
    """One entry of the log: ``kind`` and its ``target`` (a URI, a session's digest, a token's checksum); a
    session's entries carry an ``op`` (``subscribe``, ``unsubscribe``, ``end``, ``takeover``) and its ``arg``."""

    id: str
    kind: str
    target: str = ""
    op: str = ""
    arg: str = ""

    @classmethod
    def of(cls, event_id: str, fields: dict[str, str]) -> Event:
        return cls(event_id, fields.get("k", ""), fields.get("t", ""), fields.get("o", ""), fields.get("a", ""))


def parse_id(event_id: Any) -> tuple[int, int] | None:
    """``(ms, seq)`` of a log id, ``None`` if ``event_id`` is not one."""
    if not isinstance(event_id, str) or len(event_id) > 42:
        return None
    ms, _, seq = event_id.partition("-")
    if not (ms.isascii() and ms.isdigit() and seq.isascii() and seq.isdigit()):
        return None
    return int(ms), int(seq)


def after(a: str, b: str) -> bool:
    """Whether id ``a`` comes after id ``b``."""
    return (parse_id(a) or (0, 0)) > (parse_id(b) or (0, 0))


class Log:
    """An ordered log of events; ids are given by the log. Subclasses are thread-safe."""

    def append(self, fields: dict[str, str]) -> str:
        """Add an entry; its id."""
        raise NotImplementedError

    def read(self, position: str, timeout: float) -> list[Event]:
        """The entries after ``position``, waiting up to ``timeout`` seconds for one."""
        raise NotImplementedError

    def replay(self, position: str, limit: int) -> tuple[list[Event], bool]:
        """Up to ``limit`` entries after ``position``, and whether none after it was trimmed (``False``: the
        retention window has passed ``position``, what followed it is gone)."""
        raise NotImplementedError

    def last_id(self) -> str:
        """The id of the newest entry ever added (``0-0`` for none)."""
        raise NotImplementedError

    def trim(self, newest: str) -> None:
        """Drop the entries older than the retention window, counted back from the id ``newest``."""


class MemoryLog(Log):
    """The log of one process: what it publishes reaches only its own streams."""

    def __init__(self) -> None:
        self.ids: list[tuple[int, int]] = []  # from ``start`` on: the entries kept (lists: bisect in O(log n))
        self.events: list[Event] = []
        self.start = 0
        self.last = (0, 0)
        self.deleted = (0, 0)
        self.condition = threading.Condition()

    def append(self, fields: dict[str, str]) -> str:
        with self.condition:
            ms = max(int(time.time() * 1000), self.last[0])
            self.last = (ms, self.last[1] + 1 if ms == self.last[0] else 0)
            event_id = f"{self.last[0]}-{self.last[1]}"
            self.ids.append(self.last)
            self.events.append(Event.of(event_id, fields))
            self._trim(ms - int(mcp_settings.delivery_retention_seconds * 1000))
            self.condition.notify_all()
            return event_id

    def _trim(self, oldest_ms: int) -> None:
        start, ids = self.start, self.ids
        while start < len(ids) and (ids[start][0] < oldest_ms or len(ids) - start > MAX_EVENTS):
            start += 1
        if start > self.start:
            self.deleted = ids[start - 1]
        if start > len(ids) // 2:  # compact now and then: amortized O(1) a trimmed entry
            del self.ids[:start], self.events[:start]
            start = 0
        self.start = start

    def _after(self, position: str) -> int:
        return bisect.bisect_right(self.ids, parse_id(position) or (0, 0), lo=self.start)

    def read(self, position: str, timeout: float) -> list[Event]:
        with self.condition:
            if self._after(position) >= len(self.ids):
                self.condition.wait(timeout)
            return self.events[self._after(position) :]

    def replay(self, position: str, limit: int) -> tuple[list[Event], bool]:
        point = parse_id(position) or (0, 0)
        with self.condition:
            start = self._after(position)
            return self.events[start : start + limit], point >= self.deleted and point <= self.last

    def last_id(self) -> str:
        return f"{self.last[0]}-{self.last[1]}"

    def trim(self, newest: str) -> None:
        with self.condition:
            self._trim((parse_id(newest) or (0, 0))[0] - int(mcp_settings.delivery_retention_seconds * 1000))


_pools: dict[tuple[int, str], Any] = {}
_pools_lock = threading.Lock()


def connection_pool(url: str) -> Any:
    """This process's pool of connections to ``url`` (one per process and URL, created on first use)."""
    import redis
    from redis.backoff import ExponentialBackoff
    from redis.retry import Retry

    key = (os.getpid(), url)
    with _pools_lock:
        pool = _pools.get(key)
        if pool is None:
            # A few quick retries (redis-py's default backs off for seconds): a request that publishes or opens a
            # stream while Redis is unreachable fails fast, logged, instead of stalling.
            retry = Retry(ExponentialBackoff(cap=0.2, base=0.02), 2)
            pool = _pools[key] = redis.BlockingConnectionPool.from_url(
                url,
                max_connections=POOL_CONNECTIONS,
                timeout=10,
                decode_responses=True,
                socket_timeout=30,
                socket_connect_timeout=5,
                retry=retry,
            )
        return pool


class RedisLog(Log):
    """The log as one Redis stream, :data:`KEY`, shared by every process that names the same Redis."""

    def __init__(self, url: str) -> None:
        import redis

        self.url = url
        self.client = redis.Redis(connection_pool=connection_pool(url))

    def append(self, fields: dict[str, str]) -> str:
        return str(self.client.xadd(KEY, fields, maxlen=MAX_EVENTS, approximate=True))  # type: ignore[arg-type]

    def read(self, position: str, timeout: float) -> list[Event]:
        answer: Any = self.client.xread({KEY: position}, count=1000, block=max(1, int(timeout * 1000)))
        return [Event.of(event_id, fields) for _key, entries in answer or () for event_id, fields in entries]

    def replay(self, position: str, limit: int) -> tuple[list[Event], bool]:
        import redis

        with self.client.pipeline(transaction=True) as pipe:
            pipe.xrange(KEY, "(" + position, "+", count=limit)
            pipe.xrange(KEY, position, position)
            pipe.xinfo_stream(KEY)
            try:
                entries, kept, info = pipe.execute()
            except redis.ResponseError:  # no stream yet: nothing was ever published, or Redis lost it
                return [], position == ZERO
        events = [Event.of(event_id, fields) for event_id, fields in entries]
        last, first = str(info.get("last-generated-id", ZERO)), (info.get("first-entry") or (None,))[0]
        # Trimming removes the oldest entries first (Redis 7.0 records no trimmed id): nothing after ``position``
        # is gone when nothing was ever trimmed, when ``position`` is still there, or when it is not older than the
        # first entry kept. An id after the last one given is not this log's (another Redis, a flushed one).
        complete = (
            info.get("entries-added") == info.get("length")
            or bool(kept)
            or position == last
            or (first is not None and not after(str(first), position))
        )
        return events, complete and not after(position, last)

    def last_id(self) -> str:
        import redis

        try:
            return str(self.client.xinfo_stream(KEY).get("last-generated-id", ZERO))
        except redis.ResponseError:
            return ZERO

    def trim(self, newest: str) -> None:
        oldest = (parse_id(newest) or (0, 0))[0] - int(mcp_settings.delivery_retention_seconds * 1000)
        if oldest > 0:
            self.client.xtrim(KEY, minid=f"{oldest}-0", approximate=True)


_memory: tuple[int, MemoryLog] | None = None
_redis: dict[tuple[int, str], RedisLog] = {}
_logs_lock = threading.Lock()


def get_log() -> Log:
    """The log of :setting:`DELIVERY_URL`: a Redis stream, or this process's :class:`MemoryLog`."""
    global _memory
    url = mcp_settings.delivery_url
    pid = os.getpid()
    with _logs_lock:
        if url:
            log = _redis.get((pid, url))
            if log is None:
                log = _redis[(pid, url)] = RedisLog(url)
            return log
        if _memory is None or _memory[0] != pid:
            _memory = (pid, MemoryLog())
        return _memory[1]


def publish(fields: dict[str, str]) -> str | None:
    """Append an event from any thread; its id, or ``None`` when it failed (logged, never raised)."""
    try:
        return get_log().append(fields)
    except Exception:
        logger.exception("could not publish %s", fields.get("k"))
        return None


def session_key(session_id: str) -> str:
    """A 2025-11-25 session as its log entries name it (a digest: ids are never written anywhere)."""
    return hashlib.sha256(session_id.encode()).hexdigest()[:40]


def publish_session(key: str, op: str, arg: str = "") -> str | None:
    """Tell the GET stream of the session ``key`` (:func:`session_key`), in whichever process serves it:
    ``subscribe``/``unsubscribe`` ``arg`` (a URI), ``end``, or ``takeover`` by the stream ``arg``."""
    return publish({"k": SESSION, "t": key, "o": op, "a": arg})


def publish_token_changed(checksum: str) -> None:
    """Tell the streams opened with the token of SHA-256 ``checksum`` to check it again (revoked, changed)."""
    publish({"k": TOKEN, "t": checksum})


def notify_resource_updated(uri: str) -> None:
    """Tell subscribers of ``uri`` that it changed (each delivery re-checks the subscriber's access)."""
    publish({"k": UPDATED, "t": uri})


def notify_resource_list_changed() -> None:
    """Tell listeners that the set of static and live resources changed.

    Never call this for records inside a caller's inventory: list changes go to every listener, so they would
    leak one user's activity to others.
    """
    publish({"k": LIST_CHANGED})
