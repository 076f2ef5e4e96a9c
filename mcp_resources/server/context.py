"""One request as the server core sees it: who calls, with which protocol version, in which session."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from mcp_resources.principal import ANONYMOUS, Principal
from mcp_resources.protocol.versions import LATEST_VERSION, V2026_07_28

if TYPE_CHECKING:
    from django.http import HttpRequest


class SessionSubscriptions(Protocol):
    """The subscriptions of a 2025-11-25 session, as the transport keeps them (``resources/subscribe``)."""

    def subscribe(self, uri: str, limit: int) -> bool:
        """Record a subscription to ``uri``; ``False`` when the session already holds ``limit`` of them."""
        ...

    def unsubscribe(self, uri: str) -> None: ...


@dataclass
class CallContext:
    """The caller of one request: its Django request, protocol version, principal and session, and whether its
    transport serves streams."""

    request: HttpRequest
    protocol_version: str = LATEST_VERSION
    principal: Principal = ANONYMOUS
    session: SessionSubscriptions | None = None
    streams: bool = False
    """Whether the transport serving this request can deliver notifications on a stream (subscriptions are offered
    only then: under WSGI nothing could ever be delivered)."""
    static_uris: frozenset[str] | None = field(default=None, repr=False)
    """The enabled ``StaticResource`` URIs as an open stream's decision knows them
    (:mod:`~mcp_resources.server.static_uris`): a URI not in them is no admin resource, without a query; ``None``
    (every request) queries the table."""
    readers: dict[str, tuple[Any, bool]] = field(default_factory=dict, repr=False)
    """While :meth:`MCPServer.may_read_each` decides several callers of one URI: the URI's template and whether this
    caller reads it, from one query for all of them (``check_readable`` answers from it)."""

    def at_least(self, version: str) -> bool:
        """Whether the request speaks ``version`` or a later one (versions are dates)."""
        return self.protocol_version >= version

    @property
    def stateless(self) -> bool:
        """Protocol 2026-07-28 and later: ``_meta`` on every request, cache hints and ``resultType`` in results."""
        return self.at_least(V2026_07_28)
