"""Sessions of protocol 2025-11-25 and 2025-06-18: ``Mcp-Session-Id`` bound to the caller that initialized it.

Sessions live in a Django cache (``MCP_RESOURCES["SESSION_CACHE"]``), so every worker sharing that cache shares
them. Only SHA-256 digests of ids are stored. A session presented by another caller is indistinguishable from an
unknown one (404). The store bounds what each kind of caller can hold (docs/protocol.md, "Capacity"):

- an authenticated caller (user and OAuth client) holds at most :attr:`SessionStore.max_sessions_per_caller`
  sessions: a new one replaces the caller's oldest, unless that one is younger than
  :attr:`SessionStore.replace_after_seconds`, and then ``initialize`` is refused (:exc:`SessionLimitReached`);
- anonymous sessions take the slots of one fixed ring (:meth:`SessionStore.anonymous_capacity`): a new one
  replaces the oldest anonymous session, never an authenticated one, however many anonymous ``initialize``
  requests arrive.

Keys, all under ``mcp_resources:``::

    session:<sha256(id)>                 (owner, version, created, group)   an authenticated session
    session:<sha256(id)>:subscriptions   [uri, ...]                          its resources/subscribe list
    sessions:caller:<sha256(owner)>      [(digest, created, group), ...]     a caller's sessions, oldest first
    sessions:anonymous:<slot>            (digest, version, created, group)  the anonymous session in a slot
    sessions:anonymous:next              int                                 the ring's counter

An anonymous session id ends in ``.<slot>``, the slot it occupies; the rest is 256 bits of randomness.
"""

from __future__ import annotations

import hashlib
import math
import re
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.core.cache import caches
from django.core.cache.backends.base import BaseCache
from django.core.cache.backends.db import DatabaseCache
from django.core.cache.backends.filebased import FileBasedCache
from django.core.cache.backends.locmem import LocMemCache

from mcp_resources.conf import mcp_settings
from mcp_resources.principal import Principal
from mcp_resources.subscriptions.broker import SESSION_CONTROL, publish, session_group

_SESSION_ID = re.compile(r"^[\x21-\x7e]{1,256}$")
_ANONYMOUS_ID = re.compile(r"^[A-Za-z0-9_-]{43}\.(0|[1-9][0-9]{0,8})$")
ANONYMOUS = "anonymous"

_PREFIX = "mcp_resources:session:"
_CALLER_PREFIX = "mcp_resources:sessions:caller:"
_SLOT_PREFIX = "mcp_resources:sessions:anonymous:"
_COUNTER_KEY = "mcp_resources:sessions:anonymous:next"

CULLING_BACKENDS: tuple[type[BaseCache], ...] = (LocMemCache, FileBasedCache, DatabaseCache)
"""Cache backends that drop entries beyond their ``MAX_ENTRIES`` option (default 300) to make room."""


@dataclass(frozen=True)
class Session:
    """A session: its id, the caller it belongs to, its protocol version; and its ``resources/subscribe`` list."""

    id: str
    owner: str
    protocol_version: str

    def subscribe(self, uri: str, limit: int) -> bool:
        return add_subscription(self.id, uri, limit)

    def unsubscribe(self, uri: str) -> None:
        remove_subscription(self.id, uri)

    @property
    def subscriptions(self) -> list[str]:
        return subscriptions_of(self.id)


class SessionLimitReached(Exception):
    """The caller already holds ``limit`` sessions, none old enough to be replaced for ``retry_after`` seconds."""

    def __init__(self, limit: int, retry_after: int) -> None:
        super().__init__(f"the caller holds {limit} sessions")
        self.limit = limit
        self.retry_after = retry_after


def owner_of(principal: Principal) -> str:
    """What a session is bound to: the verified subject and client, or anonymity."""
    if not principal.authenticated:
        return ANONYMOUS
    return f"user:{principal.subject or ''}\x00client:{principal.client_id or ''}"


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def _key(session_id: str) -> str:
    return _PREFIX + _digest(session_id)


def _cache() -> BaseCache:
    return caches[mcp_settings.session_cache]


class SessionStore:
    """Creates, finds and ends sessions in ``SESSION_CACHE``, within the bounds of its class attributes.

    Change a bound with a subclass or keyword arguments: ``MCPView.as_view(session_store=SessionStore(
    max_sessions_per_caller=8))``.
    """

    max_sessions_per_caller: int = 32
    """The most sessions one authenticated caller (a user through one OAuth client) holds at once."""

    replace_after_seconds: int = 60
    """A caller's oldest session is replaced by a new one only once it is this old; before, ``initialize`` is
    refused (HTTP 429): that many sessions opened so quickly are a loop or a flood, not abandoned clients."""

    anonymous_sessions: int = 1000
    """The slots of the anonymous ring, at most a third of ``MAX_ENTRIES`` on a culling backend (LocMemCache,
    FileBasedCache, DatabaseCache)."""

    def __init__(self, **bounds: int) -> None:
        for name, value in bounds.items():
            if name not in ("max_sessions_per_caller", "replace_after_seconds", "anonymous_sessions"):
                raise TypeError(f"SessionStore() got an unexpected keyword argument {name!r}")
            if not isinstance(value, int) or value < (0 if name == "replace_after_seconds" else 1):
                raise ValueError(f"SessionStore {name} must be a positive integer")
            setattr(self, name, value)

    # Bounds ----------------------------------------------------------------------------------------------

    def anonymous_capacity(self, cache: BaseCache | None = None) -> int:
        """How many anonymous sessions live at once: the ring's slots.

        On a backend that culls (LocMemCache, FileBasedCache, DatabaseCache drop entries past ``MAX_ENTRIES``),
        the ring takes at most a third of it, with room for the anonymous sessions' subscription lists, so that
        anonymous sessions alone never make the backend cull an authenticated one.
        """
        cache = cache or _cache()
        if isinstance(cache, CULLING_BACKENDS):
            max_entries = int(getattr(cache, "_max_entries", 300))
            return max(1, min(self.anonymous_sessions, max_entries // 3))
        return self.anonymous_sessions

    # Create ----------------------------------------------------------------------------------------------

    def create(self, principal: Principal, protocol_version: str) -> Session:
        """Open a session for ``principal``; raises :exc:`SessionLimitReached` when the caller may not hold one more."""
        if not principal.authenticated:
            return self._create_anonymous(protocol_version)
        return self._create_for_caller(owner_of(principal), protocol_version)

    def _create_anonymous(self, protocol_version: str) -> Session:
        cache = _cache()
        slot = self._next_slot(cache)
        session = Session(f"{secrets.token_urlsafe(32)}.{slot}", ANONYMOUS, protocol_version)
        key = _SLOT_PREFIX + str(slot)
        previous = cache.get(key)
        record = (_digest(session.id), protocol_version, time.time(), session_group(session.id))
        cache.set(key, record, mcp_settings.session_timeout_seconds)
        if _is_record(previous):
            _end_stored(previous[0], previous[3])
        return session

    def _next_slot(self, cache: BaseCache) -> int:
        cache.add(_COUNTER_KEY, 0, timeout=None)
        try:
            counter = cache.incr(_COUNTER_KEY)
        except ValueError:  # the counter was evicted between add and incr
            cache.set(_COUNTER_KEY, 0, timeout=None)
            counter = 0
        return int(counter) % self.anonymous_capacity(cache)

    def _create_for_caller(self, owner: str, protocol_version: str) -> Session:
        cache = _cache()
        timeout = mcp_settings.session_timeout_seconds
        index_key = _CALLER_PREFIX + _digest(owner)
        with _locked(index_key):
            entries: list[tuple[str, float, str]] = list(cache.get(index_key) or [])
            now = time.time()
            if len(entries) >= self.max_sessions_per_caller:
                # Drop the sessions that ended or expired; replace the oldest live one if the caller is still full.
                live = cache.get_many([_PREFIX + digest for digest, _, _ in entries])
                entries = [entry for entry in entries if _PREFIX + entry[0] in live]
            while len(entries) >= self.max_sessions_per_caller:
                digest, created, group = entries[0]
                age = now - created
                if age < self.replace_after_seconds:
                    raise SessionLimitReached(self.max_sessions_per_caller, math.ceil(self.replace_after_seconds - age))
                _end_stored(digest, group)
                entries.pop(0)
            session = Session(secrets.token_urlsafe(32), owner, protocol_version)
            digest, group = _digest(session.id), session_group(session.id)
            cache.set(_PREFIX + digest, (owner, protocol_version, now, group), timeout)
            entries.append((digest, now, group))
            cache.set(index_key, entries, timeout)
        return session

    # Find and end ------------------------------------------------------------------------------------------

    def get(self, session_id: str, principal: Principal) -> Session | None:
        """The session if it exists and belongs to ``principal``; ``None`` otherwise."""
        if not _SESSION_ID.match(session_id):
            return None
        owner = owner_of(principal)
        anonymous = _ANONYMOUS_ID.match(session_id)
        if anonymous is not None:
            stored = _cache().get(_SLOT_PREFIX + anonymous.group(1))
            if not _is_record(stored) or not secrets.compare_digest(stored[0], _digest(session_id)):
                return None
            stored_owner = ANONYMOUS
        else:
            stored = _cache().get(_key(session_id))
            if not _is_record(stored):
                return None
            stored_owner = stored[0]
        if not secrets.compare_digest(stored_owner, owner):
            return None
        return Session(session_id, stored_owner, stored[1])

    def end(self, session: Session) -> None:
        """End ``session`` (``DELETE``): its record and subscriptions go, its GET stream ends."""
        anonymous = _ANONYMOUS_ID.match(session.id)
        if anonymous is not None:
            key = _SLOT_PREFIX + anonymous.group(1)
            stored = _cache().get(key)
            if _is_record(stored) and stored[0] == _digest(session.id):
                _cache().delete(key)
        _end_stored(_digest(session.id), session_group(session.id))


def _is_record(stored: Any) -> bool:
    """Whether a cache value is a session record of this version (one of an earlier version counts as none)."""
    return isinstance(stored, tuple) and len(stored) == 4


def _end_stored(digest: str, group: str) -> None:
    """Delete a session's record and subscriptions (by digest) and end its GET stream, in whichever process."""
    _cache().delete_many([_PREFIX + digest, _PREFIX + digest + ":subscriptions"])
    publish(group, {"type": SESSION_CONTROL, "op": "end"})


default_store = SessionStore()
"""The store :class:`~mcp_resources.transport.views.MCPView` uses unless it is given another."""


# Subscriptions -----------------------------------------------------------------------------------------------


def _subscriptions_key(session_id: str) -> str:
    return _key(session_id) + ":subscriptions"


def subscriptions_of(session_id: str) -> list[str]:
    """The URIs a session subscribed to with ``resources/subscribe``."""
    return list(_cache().get(_subscriptions_key(session_id)) or [])


@contextmanager
def _locked(key: str, wait: float = 5.0) -> Iterator[None]:
    """Serialize a read-modify-write of ``key`` across threads and processes (``cache.add`` is atomic).

    Without it, two requests changing one list at once (in two workers) each store their own read of it, and one
    change is lost. A lock left by a dead worker expires by itself; past ``wait`` the change goes ahead unlocked.
    """
    cache = _cache()
    lock = key + ":lock"
    token = secrets.token_hex(8)
    deadline = time.monotonic() + wait
    acquired = cache.add(lock, token, timeout=int(wait) + 1)
    while not acquired and time.monotonic() < deadline:
        time.sleep(0.002)
        acquired = cache.add(lock, token, timeout=int(wait) + 1)
    try:
        yield
    finally:
        if acquired and cache.get(lock) == token:
            cache.delete(lock)


def add_subscription(session_id: str, uri: str, limit: int) -> bool:
    """Record a subscription and tell the session's GET stream (in whichever process serves it)."""
    with _locked(_subscriptions_key(session_id)):
        current = subscriptions_of(session_id)
        if uri not in current:
            if len(current) >= limit:
                return False
            current.append(uri)
            _cache().set(_subscriptions_key(session_id), current, mcp_settings.session_timeout_seconds)
    publish(session_group(session_id), {"type": SESSION_CONTROL, "op": "subscribe", "uri": uri})
    return True


def remove_subscription(session_id: str, uri: str) -> None:
    with _locked(_subscriptions_key(session_id)):
        current = [u for u in subscriptions_of(session_id) if u != uri]
        _cache().set(_subscriptions_key(session_id), current, mcp_settings.session_timeout_seconds)
    publish(session_group(session_id), {"type": SESSION_CONTROL, "op": "unsubscribe", "uri": uri})
