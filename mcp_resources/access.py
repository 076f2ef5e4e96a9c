"""Access policies: who may use a template or a static resource.

A resource is ``public`` (anyone, no token needed) or ``protected`` (an authenticated caller holding every
``required_scopes``). The decision is a pure function of the policy and the caller's :class:`Principal`, made on
every request: nothing grants access for longer (a cursor, a session and a stream never do).
"""

from __future__ import annotations

from collections.abc import Iterable

from mcp_resources.exceptions import AuthenticationRequired, InsufficientScope
from mcp_resources.principal import Principal

PUBLIC = "public"
PROTECTED = "protected"
ACCESS_POLICIES = (PUBLIC, PROTECTED)


def authorize(access: str, scopes: Iterable[str], principal: Principal) -> None:
    """Raise :class:`AuthenticationRequired` (401) or :class:`InsufficientScope` (403) unless ``principal`` may use
    something with this ``access`` policy and these ``scopes``."""
    if access == PUBLIC:
        return
    required = tuple(scopes)
    if not principal.authenticated:
        raise AuthenticationRequired(required)
    if not principal.has_scopes(required):
        raise InsufficientScope(required)


def may_access(access: str, scopes: Iterable[str], principal: Principal) -> bool:
    """Whether :func:`authorize` would let ``principal`` through."""
    if access == PUBLIC:
        return True
    return principal.authenticated and principal.has_scopes(tuple(scopes))
