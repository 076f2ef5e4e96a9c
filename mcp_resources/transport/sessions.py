"""Sessions of protocol 2025-11-25 and 2025-06-18: ``Mcp-Session-Id`` bound to the caller that initialized it, or,
for a session opened anonymously, to the first caller whose token claims it.

Sessions live in a Django cache (``MCP_RESOURCES["SESSION_CACHE"]``), so every worker sharing that cache shares
them; a ``LocMemCache`` alias (one process anyway) gets a store of its own, so that nothing else written to that
cache makes it cull a session. Only SHA-256 digests of ids are stored. A session presented by another caller is
indistinguishable from an unknown one (404). The store bounds what each kind of caller can hold (docs/protocol.md,
"Capacity"):

- a person (a user, through every OAuth client they use) holds at most :meth:`SessionStore.person_capacity`
  sessions: a new one replaces the person's oldest, unless that one is younger than
  :attr:`SessionStore.replace_after_seconds`, and then ``initialize`` is refused (:exc:`SessionLimitReached`);
- on a backend that culls (LocMemCache, FileBasedCache, DatabaseCache drop entries past ``MAX_ENTRIES``), all
  authenticated sessions together stay within :meth:`SessionStore.authenticated_capacity`, and ``initialize`` is
  refused rather than letting the backend cull someone's session;
- anonymous sessions take the slots of one fixed ring (:meth:`SessionStore.anonymous_capacity`): a new one
  replaces the oldest anonymous session, never an authenticated one, however many anonymous ``initialize``
  requests arrive.

A session may go from anonymous to one caller, never from one caller to another: the first request with a valid
token on an anonymous session claims it (:meth:`SessionStore.get`), which leaves the ring and from then on belongs to
that caller alone (an anonymous request, or another caller's, finds no such session), and its GET stream opened
anonymously ends. That is how a 2025-11-25 client that opened a session anonymously, was answered 401 on a request
that needs a token and ran the OAuth flow, retries that request on the same session. Holding an anonymous session's
id is never enough to act as the caller who claims it: every request of a claimed session needs that caller's token.

Keys, all under ``mcp_resources:``::

    session:<sha256(id)>                 (owner, version, created, group)   an authenticated session
    session:<sha256(id)>:subscriptions   [uri, ...]                          its resources/subscribe list
    sessions:caller:<sha256(person)>     [(digest, created, group, sha256(owner)), ...]  a person's, oldest first
    sessions:authenticated               [(digest, created), ...]            all of them (culling backends only)
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

from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.base import BaseCache
from django.core.cache.backends.db import DatabaseCache
from django.core.cache.backends.filebased import FileBasedCache
from django.core.cache.backends.locmem import LocMemCache

from mcp_resources.conf import mcp_settings
from mcp_resources.principal import Principal
from mcp_resources.subscriptions.broker import publish_session
from mcp_resources.subscriptions.broker import session_key as session_group

_SESSION_ID = re.compile(r"^[\x21-\x7e]{1,256}$")
_ANONYMOUS_ID = re.compile(r"^[A-Za-z0-9_-]{43}\.(0|[1-9][0-9]{0,8})$")
ANONYMOUS = "anonymous"

_PREFIX = "mcp_resources:session:"
_CALLER_PREFIX = "mcp_resources:sessions:caller:"
_SLOT_PREFIX = "mcp_resources:sessions:anonymous:"
_COUNTER_KEY = "mcp_resources:sessions:anonymous:next"
_AUTHENTICATED_KEY = "mcp_resources:sessions:authenticated"

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
    return _owner(principal.subject, principal.client_id)


def _owner(subject: str | None, client_id: str | None) -> str:
    return f"user:{subject or ''}\x00client:{client_id or ''}"


def person_of(principal: Principal) -> str:
    """Whose sessions are counted together: the user, through every OAuth client (a token without a user: its
    client)."""
    if principal.subject:
        return f"user:{principal.subject}"
    return owner_of(principal)


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def _key(session_id: str) -> str:
    return _PREFIX + _digest(session_id)


_private_caches: dict[tuple[Any, ...], LocMemCache] = {}


def session_cache() -> BaseCache:
    """The cache sessions live in: ``SESSION_CACHE``, except that a ``LocMemCache`` alias is given a store of its
    own, with its options (a per-process cache either way), so that other entries of that cache (the project's, the
    registration throttle's, django-oauth-toolkit's) never make it cull a session."""
    alias = mcp_settings.session_cache
    cache = caches[alias]
    if not isinstance(cache, LocMemCache):
        return cache
    location = (getattr(settings, "CACHES", {}).get(alias) or {}).get("LOCATION", "")
    key = (alias, location, cache._max_entries, cache._cull_frequency, cache.default_timeout)
    private = _private_caches.get(key)
    if private is None:
        params = {
            "TIMEOUT": cache.default_timeout,
            "OPTIONS": {"MAX_ENTRIES": cache._max_entries, "CULL_FREQUENCY": cache._cull_frequency},
        }
        private = _private_caches.setdefault(key, LocMemCache(f"mcp_resources.sessions:{alias}:{location}", params))
    return private


_cache = session_cache


class SessionStore:
    """Creates, finds and ends sessions in ``SESSION_CACHE``, within the bounds of its class attributes.

    Change a bound with a subclass or keyword arguments: ``MCPView.as_view(session_store=SessionStore(
    max_sessions_per_caller=8))``.
    """

    max_sessions_per_caller: int = 32
    """The most sessions one person (a user, through every OAuth client they use) holds at once."""

    replace_after_seconds: int = 60
    """A person's oldest session is replaced by a new one only once it is this old; before, ``initialize`` is
    refused (HTTP 429): that many sessions opened so quickly are a loop or a flood, not abandoned clients."""

    anonymous_sessions: int = 1000
    """The slots of the anonymous ring, at most a sixth of ``MAX_ENTRIES`` on a culling backend (LocMemCache,
    FileBasedCache, DatabaseCache)."""

    def __init__(self, **bounds: int) -> None:
        for name, value in bounds.items():
            if name not in ("max_sessions_per_caller", "replace_after_seconds", "anonymous_sessions"):
                raise TypeError(f"SessionStore() got an unexpected keyword argument {name!r}")
            if not isinstance(value, int) or value < (0 if name == "replace_after_seconds" else 1):
                raise ValueError(f"SessionStore {name} must be a positive integer")
            setattr(self, name, value)

    # Bounds ----------------------------------------------------------------------------------------------
    #
    # On a culling backend the store keeps its own entries under MAX_ENTRIES, so that the backend never culls: the
    # anonymous ring (a sixth of MAX_ENTRIES, two entries a session with its subscription list), the authenticated
    # sessions (another sixth, two entries each, plus one index entry a person) and the ring's counter and the
    # lists' locks in what is left.

    def anonymous_capacity(self, cache: BaseCache | None = None) -> int:
        """How many anonymous sessions live at once: the ring's slots (a sixth of ``MAX_ENTRIES`` at most on a
        culling backend)."""
        max_entries = _max_entries(cache or _cache())
        if max_entries is None:
            return self.anonymous_sessions
        return max(1, min(self.anonymous_sessions, max_entries // 6))

    def authenticated_capacity(self, cache: BaseCache | None = None) -> int | None:
        """How many authenticated sessions live at once, all people together: a sixth of ``MAX_ENTRIES`` on a
        culling backend; ``None`` (no bound but each person's) on the others."""
        max_entries = _max_entries(cache or _cache())
        return None if max_entries is None else max(1, max_entries // 6)

    def person_capacity(self, cache: BaseCache | None = None) -> int:
        """How many sessions one person holds: :attr:`max_sessions_per_caller`, and on a culling backend at most a
        fifth of :meth:`authenticated_capacity` (so that five people always find room)."""
        total = self.authenticated_capacity(cache)
        if total is None:
            return self.max_sessions_per_caller
        return max(1, min(self.max_sessions_per_caller, total // 5))

    # Create ----------------------------------------------------------------------------------------------

    def create(self, principal: Principal, protocol_version: str) -> Session:
        """Open a session for ``principal``; raises :exc:`SessionLimitReached` when the caller may not hold one more."""
        if not principal.authenticated:
            return self._create_anonymous(protocol_version)
        return self._create_for_caller(owner_of(principal), person_of(principal), protocol_version)

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

    def _create_for_caller(
        self, owner: str, person: str, protocol_version: str, *, claimed: str | None = None
    ) -> Session:
        """A new session of ``owner``; with ``claimed``, the id of an anonymous session the caller claims (already
        open, the caller's own), which replaces the person's oldest whatever its age: refusing it would end the
        client's session."""
        cache = _cache()
        timeout = mcp_settings.session_timeout_seconds
        index_key = _CALLER_PREFIX + _digest(person)
        capacity = self.person_capacity(cache)
        with _locked(index_key):
            entries = [_index_entry(entry) for entry in cache.get(index_key) or []]
            now = time.time()
            if len(entries) >= capacity:
                # Drop the sessions that ended or expired; replace the oldest live ones if the person is still full.
                live = cache.get_many([_PREFIX + entry[0] for entry in entries])
                entries = [entry for entry in entries if _PREFIX + entry[0] in live]
            replaced = entries[: max(0, len(entries) - capacity + 1)]
            for _, created, _, _ in replaced:
                if now - created < self.replace_after_seconds and claimed is None:
                    raise SessionLimitReached(capacity, math.ceil(self.replace_after_seconds - (now - created)))
            session = Session(claimed or secrets.token_urlsafe(32), owner, protocol_version)
            digest, group = _digest(session.id), session_group(session.id)
            self._admit(cache, digest, now, [entry[0] for entry in replaced])
            for replaced_digest, _, replaced_group, _ in replaced:
                _end_stored(replaced_digest, replaced_group)
            entries = entries[len(replaced) :]
            cache.set(_PREFIX + digest, (owner, protocol_version, now, group), timeout)
            entries.append((digest, now, group, _digest(owner)))
            cache.set(index_key, entries, timeout)
        return session

    def _admit(self, cache: BaseCache, digest: str, now: float, replaced: list[str]) -> None:
        """On a culling backend, count ``digest`` among all authenticated sessions (``replaced`` leave), or raise
        :exc:`SessionLimitReached` when they are at :meth:`authenticated_capacity`: nothing is culled for it."""
        capacity = self.authenticated_capacity(cache)
        if capacity is None:
            return
        timeout = mcp_settings.session_timeout_seconds
        with _locked(_AUTHENTICATED_KEY):
            gone = set(replaced)
            everyone = [entry for entry in cache.get(_AUTHENTICATED_KEY) or [] if entry[0] not in gone]
            if len(everyone) >= capacity:
                live = cache.get_many([_PREFIX + entry[0] for entry in everyone])
                everyone = [entry for entry in everyone if _PREFIX + entry[0] in live]
            if len(everyone) >= capacity:
                raise SessionLimitReached(capacity, self.replace_after_seconds or 1)
            everyone.append((digest, now))
            cache.set(_AUTHENTICATED_KEY, everyone, timeout)

    # Find and end ------------------------------------------------------------------------------------------

    def get(self, session_id: str, principal: Principal) -> Session | None:
        """The session if it exists and belongs to ``principal``; ``None`` otherwise.

        An anonymous session asked for by an authenticated caller is claimed by that caller: it becomes its session
        (and leaves the anonymous ring), and no one else's, anonymous callers' included, from then on.
        """
        if not _SESSION_ID.match(session_id):
            return None
        owner = owner_of(principal)
        anonymous = _ANONYMOUS_ID.match(session_id)
        if anonymous is not None:
            slot_key = _SLOT_PREFIX + anonymous.group(1)
            stored = _cache().get(slot_key)
            if _is_record(stored) and secrets.compare_digest(stored[0], _digest(session_id)):
                if principal.authenticated:
                    return self._claim(session_id, slot_key, principal)
                return Session(session_id, ANONYMOUS, stored[1])
            # Not (or no longer) in the ring: a claimed session is stored as any caller's.
        stored = _cache().get(_key(session_id))
        if not _is_record(stored) or not secrets.compare_digest(stored[0], owner):
            return None
        return Session(session_id, stored[0], stored[1])

    def _claim(self, session_id: str, slot_key: str, principal: Principal) -> Session | None:
        """Make the anonymous session ``session_id`` (in ``slot_key``) the session of ``principal``; ``None`` when
        it is gone, or is another caller's by now, or the store has no room for it (the client then opens another)."""
        cache = _cache()
        owner, digest = owner_of(principal), _digest(session_id)
        with _locked(slot_key):
            stored = cache.get(slot_key)
            if not (_is_record(stored) and stored[0] == digest):
                claimed = cache.get(_PREFIX + digest)  # claimed meanwhile: only its claimant finds it
                if _is_record(claimed) and secrets.compare_digest(claimed[0], owner):
                    return Session(session_id, owner, claimed[1])
                return None
            try:
                session = self._create_for_caller(owner, person_of(principal), stored[1], claimed=session_id)
            except SessionLimitReached:
                return None
            cache.delete(slot_key)
        # A GET stream opened anonymously keeps its anonymous access for life: it ends now, and the client opens it
        # again with its token (the SDKs reconnect it), so that no stream opened without it ever gets the caller's.
        publish_session(session_group(session_id), "end")
        return session

    def end(self, session: Session) -> None:
        """End ``session`` (``DELETE``): its record and subscriptions go, its GET stream ends."""
        anonymous = _ANONYMOUS_ID.match(session.id)
        if anonymous is not None:
            key = _SLOT_PREFIX + anonymous.group(1)
            stored = _cache().get(key)
            if _is_record(stored) and stored[0] == _digest(session.id):
                _cache().delete(key)
        _end_stored(_digest(session.id), session_group(session.id))

    def end_client_sessions(self, subject: str, client_id: str) -> int:
        """End the sessions a person opened through one OAuth client (their access to it was revoked): their records
        and subscriptions go and their GET streams end, in whichever process holds them. How many were ended."""
        cache = _cache()
        index_key = _CALLER_PREFIX + _digest(f"user:{subject}")
        owner = _digest(_owner(subject, client_id))
        with _locked(index_key):
            entries = [_index_entry(entry) for entry in cache.get(index_key) or []]
            ended = [entry for entry in entries if entry[3] == owner]
            if not ended:
                return 0
            for digest, _, group, _ in ended:
                _end_stored(digest, group)
            cache.set(
                index_key, [entry for entry in entries if entry[3] != owner], mcp_settings.session_timeout_seconds
            )
        return len(ended)


def _max_entries(cache: BaseCache) -> int | None:
    """``MAX_ENTRIES`` of a backend that culls past it (LocMemCache, FileBasedCache, DatabaseCache), else ``None``."""
    if isinstance(cache, CULLING_BACKENDS):
        return int(getattr(cache, "_max_entries", 300))
    return None


def _index_entry(entry: Any) -> tuple[str, float, str, str | None]:
    """A person's index entry; one of an earlier version (without its owner) reads with owner ``None``."""
    return (entry[0], entry[1], entry[2], entry[3] if len(entry) > 3 else None)


def _is_record(stored: Any) -> bool:
    """Whether a cache value is a session record of this version (one of an earlier version counts as none)."""
    return isinstance(stored, tuple) and len(stored) == 4


def _end_stored(digest: str, group: str) -> None:
    """Delete a session's record and subscriptions (by digest) and end its GET stream, in whichever process."""
    _cache().delete_many([_PREFIX + digest, _PREFIX + digest + ":subscriptions"])
    publish_session(group, "end")


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
    publish_session(session_group(session_id), "subscribe", uri)
    return True


def remove_subscription(session_id: str, uri: str) -> None:
    with _locked(_subscriptions_key(session_id)):
        current = [u for u in subscriptions_of(session_id) if u != uri]
        _cache().set(_subscriptions_key(session_id), current, mcp_settings.session_timeout_seconds)
    publish_session(session_group(session_id), "unsubscribe", uri)
