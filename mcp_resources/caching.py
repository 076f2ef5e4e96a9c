"""Cache hints: how long, and for whom, a client may reuse an answer (``ttlMs`` and ``cacheScope``, 2026-07-28).

A template, a repository or a static resource may declare a hint, ``(scope, ttl_ms)``: ``scope`` is ``"public"``
(the same for every caller: any cache may serve it to anyone) or ``"private"`` (only within the same authorization
context), ``ttl_ms`` a lifetime in milliseconds, ``0`` meaning stale at once. Without one nothing is cached
(``ttl_ms`` 0). Several hints combine with private winning and the smallest lifetime applying
(:func:`combine`). Results in 2025-11-25 sessions carry no cache fields; the server core decides that.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

PUBLIC_SCOPE = "public"
PRIVATE_SCOPE = "private"
CACHE_SCOPES = (PUBLIC_SCOPE, PRIVATE_SCOPE)
MAX_TTL_MS = 2**53 - 1
"""The longest lifetime a hint may give: the largest integer every JSON reader (a JavaScript number) holds exactly."""


@dataclass(frozen=True)
class CacheHint:
    """A cache hint: ``scope`` (``"public"`` or ``"private"``) and ``ttl_ms`` (milliseconds, at least 0)."""

    scope: str
    ttl_ms: int

    @property
    def private(self) -> bool:
        return self.scope == PRIVATE_SCOPE

    def fields(self) -> dict[str, Any]:
        """The result fields of the hint: ``{"ttlMs": ..., "cacheScope": ...}``."""
        return {"ttlMs": self.ttl_ms, "cacheScope": self.scope}


NO_CACHE = CacheHint(PRIVATE_SCOPE, 0)
"""The default of a source that declares nothing: private, stale at once."""


def cache_hint(value: Any, what: str = "cache_control") -> CacheHint | None:
    """``value`` (a ``(scope, ttl_ms)`` pair, a :class:`CacheHint` or ``None``) as a hint; raises ``ValueError``
    naming ``what`` when it is none of these (a scope other than public or private, a negative or non-integer
    lifetime, a boolean)."""
    if value is None or isinstance(value, CacheHint):
        return value
    if isinstance(value, list | tuple) and len(value) == 2:
        scope, ttl = value
        if scope in CACHE_SCOPES and isinstance(ttl, int) and not isinstance(ttl, bool) and 0 <= ttl <= MAX_TTL_MS:
            return CacheHint(scope, ttl)
    raise ValueError(
        f"{what} must be None or a pair (scope, ttl_ms): scope 'public' or 'private', ttl_ms an integer from 0 to "
        f"{MAX_TTL_MS} (milliseconds); got {value!r:.200}"
    )


def default_hint(access: str) -> CacheHint:
    """The hint of something that declares none: not cached, public when anyone may read it (``access`` is the
    access policy, ``"public"`` or ``"protected"``)."""
    return CacheHint(PUBLIC_SCOPE if access == "public" else PRIVATE_SCOPE, 0)


def combine(hints: Iterable[CacheHint], default: CacheHint) -> CacheHint:
    """Several hints as one: private when any is, the smallest lifetime; ``default`` when there are none."""
    scope, ttl, seen = PUBLIC_SCOPE, MAX_TTL_MS, False
    for hint in hints:
        seen = True
        if hint.private:
            scope = PRIVATE_SCOPE
        ttl = min(ttl, hint.ttl_ms)
    return CacheHint(scope, ttl) if seen else default
