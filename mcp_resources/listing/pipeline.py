"""The ``resources/list`` pipeline: open the cursor, read one page across the sources, seal the next cursor.

The server decides who may list what (the sources passed in are the accessible ones) and shapes the result for
the caller's protocol version; this module does the rest and calls nothing back.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcp_resources.caching import CacheHint
from mcp_resources.exceptions import InternalError, SourceContractError
from mcp_resources.listing.repository import RepositorySource
from mcp_resources.listing.sources import STATIC_PHASE, StaticSource, TemplateSource
from mcp_resources.listing.traversal import Source, Traversal
from mcp_resources.protocol.cursors import (
    MAX_CURSOR_LENGTH,
    Binding,
    CursorCodec,
    fingerprint,
    make_cursor,
    read_cursor,
)
from mcp_resources.protocol.uris import can_start_with
from mcp_resources.resources import ResourceRepository

if TYPE_CHECKING:
    from django.http import HttpRequest

    from mcp_resources.principal import Principal
    from mcp_resources.registries import ResourceRegistry
    from mcp_resources.resources import ResourceTemplate

logger = logging.getLogger("mcp_resources.listing")

CURSOR_OVERHEAD_BYTES = len(',"nextCursor":""')


def binding(method: str, principal: Principal, prefix: str, templates: Sequence[ResourceTemplate]) -> Binding:
    """What the cursors of one traversal are bound to: the method, the prefix, the caller and the sources."""
    sources = fingerprint(*(f"{t.name}\x00{t.uri_template}" for t in templates))
    # The prefix is bound by its digest: a 2,048-character prefix must not make every cursor too long to reuse.
    return Binding(method, fingerprint(prefix), fingerprint(*principal.fingerprint_parts()), sources)


def open_cursor(codec: CursorCodec, cursor: object, bound: Binding, ttl_seconds: int) -> tuple[Any, float]:
    """``(position, started)`` of ``cursor`` (``None``: the first page, starting now); raises ``InvalidCursor``."""
    if cursor is None:
        return None, time.time()
    return read_cursor(codec, cursor, bound, ttl_seconds)


def template_sources(templates: Sequence[ResourceTemplate], prefix: str) -> list[Source]:
    """The listing sources of ``templates`` that can hold a URI starting with ``prefix``."""
    return [
        RepositorySource(t) if isinstance(t, ResourceRepository) else TemplateSource(t)
        for t in templates
        if not prefix or can_start_with(t.compiled, prefix)
    ]


@dataclass
class ListedPage:
    """One page: its resources and next cursor, the phase of each resource (``""``: static) and the phases read."""

    resources: list[dict[str, Any]]
    next_cursor: str | None
    phases: list[str]
    read: set[str]

    def ttl_ms(
        self, source_hints: dict[str, CacheHint], static_ttl: Callable[[dict[str, Any]], int], default: int
    ) -> int:
        """The page's lifetime: the smallest of its resources' (a static one's from ``static_ttl(resource)``, any
        other's from its source's hint in ``source_hints``) and of every source the page read (an empty answer of a
        caller's inventory is still that caller's: 0); ``default`` for a page that lists and reads nothing else."""
        ttls = [source_hints[phase].ttl_ms for phase in self.read if phase != STATIC_PHASE and phase in source_hints]
        for phase, resource in zip(self.phases, self.resources, strict=True):
            ttls.append(static_ttl(resource) if phase == STATIC_PHASE else source_hints[phase].ttl_ms)
        return min(ttls) if ttls else default


def list_page(
    request: HttpRequest,
    principal: Principal,
    *,
    registry: ResourceRegistry,
    sources: Sequence[ResourceTemplate],
    all_sources: Sequence[ResourceTemplate],
    prefix: str,
    cursor: object,
    codec: CursorCodec,
    cursor_ttl_seconds: int,
    limit: int,
    max_bytes: int,
    base_bytes: int,
    deadline: float,
) -> ListedPage:
    """One page of the caller's inventory: static resources, then ``sources`` (the accessible templates, in
    registration order; ``all_sources`` are every listing template, accessible or not).

    ``base_bytes`` is the size of the response without its entries and cursor: the page is cut to fit
    ``max_bytes`` in all.
    """
    bound = binding("resources/list", principal, prefix, registry.templates)
    position, started = open_cursor(codec, cursor, bound, cursor_ttl_seconds)
    sealed: list[Any] = [None, None]  # the last position sealed to measure it, and its cursor

    def cursor_size(pos: list[Any]) -> int:
        sealed[:] = [pos, make_cursor(codec, bound, pos, started)]
        return CURSOR_OVERHEAD_BYTES + len(sealed[1])

    traversal = Traversal(
        request,
        sources=[StaticSource(registry, principal), *template_sources(sources, prefix)],
        all_names=[source.name for source in all_sources],
        prefix=prefix,
        limit=limit,
        max_bytes=max_bytes,
        base_bytes=base_bytes,
        deadline=deadline,
        cursor_size=cursor_size,
    )
    try:
        page = traversal.page(position)
    except SourceContractError as exc:
        logger.error("resources/list: a source broke the list contract: %s", exc)
        raise InternalError() from None
    next_cursor = None
    if page.next_position is not None:
        # The cursor measured for the byte bound is the one to send (sealing it again would only cost time).
        next_cursor = sealed[1] if sealed[0] == page.next_position else None
        if next_cursor is None:
            next_cursor = make_cursor(codec, bound, page.next_position, started)
        if len(next_cursor) > MAX_CURSOR_LENGTH:
            # A cursor that could never be opened again would strand the client: fail now, loudly.
            logger.error("resources/list: position too long for a cursor (ordering values too long?)")
            raise InternalError()
    return ListedPage(page.resources, next_cursor, page.phases, page.read)
