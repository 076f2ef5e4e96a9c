"""A bounded per-process cache of validated access tokens.

Validating a bearer token reads it from the database (django-oauth-toolkit's validator). With
``MCP_RESOURCES["TOKEN_CACHE_TTL_SECONDS"] = T`` (default 0: off) a validated token is kept for at most ``T``
seconds, and never past the token's own expiry, in a least-recently-used map of at most
``OAuth2Authentication.token_cache_size`` entries (1024).

Keying: the full SHA-256 of the token (hex, the same value django-oauth-toolkit stores as ``token_checksum``).
An entry is only ever found by presenting the token whose digest it is, so no token can be served another
token's principal. The token itself is never stored.

Revocation bound: a token revoked (deleted, or changed) in *this* process is evicted at once, and so are the
tokens of a user saved or deleted in this process (model signals, :mod:`mcp_resources.receivers`). A revocation
made elsewhere (another worker, another machine, a raw SQL delete) is noticed within ``T`` seconds: every entry is
dropped ``T`` seconds after it was validated against the database. An expired token is refused at its expiry in
every case.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CachedToken:
    """What a validated token resolved to; enough to rebuild the principal without the database."""

    user: Any
    client_id: str | None
    scope: str
    resource: tuple[str, ...]
    subject: str | None
    expires_at: float  # the token's expiry, seconds since the epoch


class TokenCache:
    """A thread-safe LRU of :class:`CachedToken` with a per-entry deadline.

    ``clock`` is monotonic seconds (deadlines); ``wall_clock`` is epoch seconds (token expiry). Size and TTL are
    passed on each call so settings changes apply at once.
    """

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._clock = clock
        self._wall_clock = wall_clock
        self._entries: OrderedDict[str, tuple[float, CachedToken]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> CachedToken | None:
        """The entry for ``key`` if it is still within its deadline and the token has not expired."""
        with self._lock:
            item = self._entries.get(key)
            if item is None:
                return None
            deadline, entry = item
            if self._clock() >= deadline or self._wall_clock() >= entry.expires_at:
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return entry

    def put(self, key: str, entry: CachedToken, ttl: float, maxsize: int) -> None:
        """Keep ``entry`` for at most ``ttl`` seconds and never past its expiry; evict beyond ``maxsize``."""
        lifetime = min(ttl, entry.expires_at - self._wall_clock())
        if lifetime <= 0 or maxsize <= 0:
            return
        with self._lock:
            self._entries[key] = (self._clock() + lifetime, entry)
            self._entries.move_to_end(key)
            while len(self._entries) > maxsize:
                self._entries.popitem(last=False)

    def discard(self, key: str) -> None:
        with self._lock:
            self._entries.pop(key, None)

    def discard_user(self, user_pk: Any) -> None:
        """Drop every entry of the user with primary key ``user_pk`` (deactivated, changed or deleted)."""
        with self._lock:
            for key in [k for k, (_, e) in self._entries.items() if e.user is not None and e.user.pk == user_pk]:
                del self._entries[key]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


token_cache = TokenCache()
"""The process-wide cache used by :class:`mcp_resources.auth.OAuth2Authentication`."""
