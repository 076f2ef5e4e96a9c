"""Sessions of protocol 2025-11-25 and 2025-06-18: ``Mcp-Session-Id`` bound to the caller that initialized it.

Sessions live in a Django cache (``MCP_RESOURCES["SESSION_CACHE"]``), so every worker sharing that cache
shares them. Only a SHA-256 digest of the id is used as the cache key. A session presented by another caller
is indistinguishable from an unknown one (404).
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from django.core.cache import caches

from mcp_resources.conf import mcp_settings
from mcp_resources.principal import Principal
from mcp_resources.subscriptions.broker import SESSION_CONTROL, publish, session_group

_SESSION_ID = re.compile(r"^[\x21-\x7e]{1,256}$")


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


def owner_of(principal: Principal) -> str:
    """What a session is bound to: the verified subject and client, or anonymity."""
    if not principal.authenticated:
        return "anonymous"
    return f"user:{principal.subject or ''}\x00client:{principal.client_id or ''}"


def _key(session_id: str) -> str:
    return "mcp_resources:session:" + hashlib.sha256(session_id.encode()).hexdigest()


def create_session(principal: Principal, protocol_version: str) -> Session:
    """Mint a session id with 256 bits of randomness, bound to ``principal``."""
    session = Session(secrets.token_urlsafe(32), owner_of(principal), protocol_version)
    caches[mcp_settings.session_cache].set(
        _key(session.id), (session.owner, session.protocol_version), mcp_settings.session_timeout_seconds
    )
    return session


def get_session(session_id: str, principal: Principal) -> Session | None:
    """The session if it exists and belongs to ``principal``; ``None`` otherwise."""
    if not _SESSION_ID.match(session_id):
        return None
    stored = caches[mcp_settings.session_cache].get(_key(session_id))
    if not stored:
        return None
    owner, version = stored
    if not secrets.compare_digest(owner, owner_of(principal)):
        return None
    return Session(session_id, owner, version)


def end_session(session: Session) -> None:
    caches[mcp_settings.session_cache].delete_many([_key(session.id), _subscriptions_key(session.id)])
    publish(session_group(session.id), {"type": SESSION_CONTROL, "op": "end"})


def _subscriptions_key(session_id: str) -> str:
    return _key(session_id) + ":subscriptions"


def subscriptions_of(session_id: str) -> list[str]:
    """The URIs a session subscribed to with ``resources/subscribe``."""
    return list(caches[mcp_settings.session_cache].get(_subscriptions_key(session_id)) or [])


@contextmanager
def _subscriptions_locked(session_id: str, wait: float = 5.0) -> Iterator[None]:
    """Serialize changes to a session's subscription list across threads and processes (``cache.add`` is atomic).

    Without it, two ``resources/subscribe`` requests of one session running at once (in two workers) each store
    their own read of the list, and one subscription is lost. A lock left by a dead worker expires by itself.
    """
    cache = caches[mcp_settings.session_cache]
    key = _subscriptions_key(session_id) + ":lock"
    token = secrets.token_hex(8)
    deadline = time.monotonic() + wait
    acquired = cache.add(key, token, timeout=int(wait) + 1)
    while not acquired and time.monotonic() < deadline:
        time.sleep(0.002)
        acquired = cache.add(key, token, timeout=int(wait) + 1)
    try:
        yield
    finally:
        if acquired and cache.get(key) == token:
            cache.delete(key)


def add_subscription(session_id: str, uri: str, limit: int) -> bool:
    """Record a subscription and tell the session's GET stream (in whichever process serves it)."""
    with _subscriptions_locked(session_id):
        current = subscriptions_of(session_id)
        if uri not in current:
            if len(current) >= limit:
                return False
            current.append(uri)
            caches[mcp_settings.session_cache].set(
                _subscriptions_key(session_id), current, mcp_settings.session_timeout_seconds
            )
    publish(session_group(session_id), {"type": SESSION_CONTROL, "op": "subscribe", "uri": uri})
    return True


def remove_subscription(session_id: str, uri: str) -> None:
    with _subscriptions_locked(session_id):
        current = [u for u in subscriptions_of(session_id) if u != uri]
        caches[mcp_settings.session_cache].set(
            _subscriptions_key(session_id), current, mcp_settings.session_timeout_seconds
        )
    publish(session_group(session_id), {"type": SESSION_CONTROL, "op": "unsubscribe", "uri": uri})
