"""Publishing changes on an ordered, retained, id-addressed log, and reading it back.

The log is one Redis stream, :data:`KEY`, on the Redis of :setting:`DELIVERY_URL` (shared by every process), else on
an in-process Redis of this process (fakeredis: one process, tests, the demo); one :class:`Log` serves both. Its ids,
``<milliseconds>-<sequence>``, come from the log's clock alone. Publishing never raises (a failure is logged).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
from dataclasses import dataclass
from typing import Any

from mcp_resources.conf import mcp_settings

logger = logging.getLogger("mcp_resources.subscriptions")

KEY = "mcp_resources:events"
MAX_EVENTS = 1_000_000
"""Entries kept at most (``XADD ... MAXLEN ~``), whatever the retention: the log's memory bound."""
TRIM_MS = 10_000
"""How often, in the log's own time, a process that publishes also drops what ``DELIVERY_RETENTION_SECONDS`` passed."""
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
    match = re.fullmatch(r"([0-9]{1,20})-([0-9]{1,20})", event_id) if isinstance(event_id, str) else None
    return (int(match[1]), int(match[2])) if match else None


def after(a: str, b: str) -> bool:
    """Whether id ``a`` comes after id ``b``."""
    return (parse_id(a) or (0, 0)) > (parse_id(b) or (0, 0))


class Log:
    """The log on the Redis at ``url``, or on a new in-process Redis for ``""``; thread-safe."""

    def __init__(self, url: str = "") -> None:
        import redis

        self.trimmed = 0
        if not url:
            import fakeredis

            self.client: redis.Redis = fakeredis.FakeRedis(server=fakeredis.FakeServer(), decode_responses=True)
            return
        from redis.backoff import ExponentialBackoff
        from redis.retry import Retry

        # A pool per process and URL, publishers and the reader. A few quick retries (redis-py's default backs off for
        # seconds): a request that publishes or opens a stream while Redis is unreachable fails fast, logged.
        pool = redis.BlockingConnectionPool.from_url(
            url,
            max_connections=POOL_CONNECTIONS,
            timeout=10,
            decode_responses=True,
            socket_timeout=30,
            socket_connect_timeout=5,
            retry=Retry(ExponentialBackoff(cap=0.2, base=0.02), 2),
        )
        self.client = redis.Redis(connection_pool=pool)

    def append(self, fields: dict[str, str]) -> str:
        """Add an entry; its id. Every :data:`TRIM_MS` of the log's time, also drop what the retention window passed."""
        event_id = str(self.client.xadd(KEY, fields, maxlen=MAX_EVENTS, approximate=True))  # type: ignore[arg-type]
        if (ms := int(event_id.partition("-")[0])) - self.trimmed > TRIM_MS:
            self.trimmed = ms
            oldest = ms - int(mcp_settings.delivery_retention_seconds * 1000)
            self.client.xtrim(KEY, minid=f"{max(0, oldest)}-0", approximate=True)
        return event_id

    def read(self, position: str, timeout: float) -> list[Event]:
        """The entries after ``position``, waiting up to ``timeout`` seconds for one."""
        answer: Any = self.client.xread({KEY: position}, count=1000, block=max(1, int(timeout * 1000)))
        return [Event.of(event_id, fields) for _key, entries in answer or () for event_id, fields in entries]

    def replay(self, position: str, limit: int) -> tuple[list[Event], bool]:
        """Up to ``limit`` entries after ``position``, and whether none after it was trimmed (``False``: the
        retention window has passed ``position``, what followed it is gone)."""
        with self.client.pipeline(transaction=True) as pipe:
            pipe.xrange(KEY, "(" + position, "+", count=limit)
            pipe.xinfo_stream(KEY)
            entries, info = pipe.execute(raise_on_error=False)
        if isinstance(entries, Exception) or isinstance(info, Exception):  # no stream yet, or not an id
            return [], position == ZERO
        # Trimming removes the oldest entries first, and Redis records no trimmed id: nothing after ``position`` is
        # gone when nothing was ever trimmed or when the first entry kept is not after it (an empty stream: the last
        # id given). An id after the last one given is not this log's (another Redis, a flushed one).
        last = str(info["last-generated-id"])
        first = str((info["first-entry"] or (last,))[0])
        complete = info.get("entries-added") == info["length"] or not after(first, position)
        return [Event.of(*entry) for entry in entries], complete and not after(position, last)

    def last_id(self) -> str:
        """The id of the newest entry ever added (``0-0`` for none: no stream yet)."""
        with self.client.pipeline(transaction=False) as pipe:
            pipe.xinfo_stream(KEY)
            [info] = pipe.execute(raise_on_error=False)
        return ZERO if isinstance(info, Exception) else str(info["last-generated-id"])


_logs: dict[tuple[int, str], Log] = {}
_logs_lock = threading.Lock()


def get_log() -> Log:
    """The log of :setting:`DELIVERY_URL` (this process's in-process Redis when unset): one per process and URL."""
    key = (os.getpid(), mcp_settings.delivery_url or "")
    with _logs_lock:
        if key not in _logs:
            _logs[key] = Log(key[1])
        return _logs[key]


def publish(kind: str, target: str = "", op: str = "", arg: str = "") -> str | None:
    """Append an event from any thread; its id, or ``None`` when it failed (logged, never raised)."""
    try:
        return get_log().append({"k": kind, "t": target, "o": op, "a": arg})
    except Exception:
        logger.exception("could not publish %s", kind)
        return None


def session_key(session_id: str) -> str:
    """A 2025-11-25 session as its log entries name it (a digest: ids are never written anywhere)."""
    return hashlib.sha256(session_id.encode()).hexdigest()[:40]


def publish_session(key: str, op: str, arg: str = "") -> str | None:
    """Tell the GET stream of the session ``key`` (:func:`session_key`), in whichever process serves it:
    ``subscribe``/``unsubscribe`` ``arg`` (a URI), ``end``, or ``takeover`` by the stream ``arg``."""
    return publish(SESSION, key, op, arg)


def publish_token_changed(checksum: str) -> None:
    """Tell the streams opened with the token of SHA-256 ``checksum`` to check it again (revoked, changed)."""
    publish(TOKEN, checksum)


def notify_resource_updated(uri: str) -> None:
    """Tell subscribers of ``uri`` that it changed (each delivery re-checks the subscriber's access)."""
    publish(UPDATED, uri)


def notify_resource_list_changed() -> None:
    """Tell listeners that the set of static and live resources changed.

    Never call this for records inside a caller's inventory: list changes go to every listener, so they would
    leak one user's activity to others.
    """
    publish(LIST_CHANGED)
