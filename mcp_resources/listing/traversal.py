"""One ``resources/list`` page across sources: static resources first, then each template source in registration
order, continuing across source boundaries within a page, bounded in entries and in bytes.

A position is ``[phase, key]``: the phase is ``""`` for static resources or a source's name, and the key is the
source's own (see :mod:`mcp_resources.listing.sources`): the last URI, ordering values, a callback's key, or a
:class:`~mcp_resources.protocol.cursors.TokenPosition` (a repository's pager token). Each page is queried live:
nothing is snapshotted, and a position never grants access.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import TYPE_CHECKING, Any, Protocol

from mcp_resources.cancellation import token_for
from mcp_resources.exceptions import BadPosition, DeadlineExceeded, RequestCancelled, SourceContractError
from mcp_resources.listing.keyset import encode_key
from mcp_resources.listing.sources import Page
from mcp_resources.protocol import jsonrpc
from mcp_resources.protocol.cursors import TokenPosition

if TYPE_CHECKING:
    from django.http import HttpRequest

logger = logging.getLogger("mcp_resources.listing")


class Source(Protocol):
    """What a traversal reads: a named phase that returns pages of ``(key, resource)`` entries."""

    name: str

    def page(
        self, request: HttpRequest, *, after: Any, limit: int, prefix: str, deadline: float, seen: set[str]
    ) -> Page: ...


@dataclass
class PageResult:
    """One page: its resources, the position of the next page (``None``: the last), the phase each resource comes
    from (in order), and every phase the page read (look-ahead included), for the page's cache hint."""

    resources: list[dict[str, Any]]
    next_position: list[Any] | None
    phases: list[str] = field(default_factory=list)
    read: set[str] = field(default_factory=set)


def _entry_size(resource: dict[str, Any]) -> int:
    """Bytes one resource adds to the result: its JSON and a separating comma."""
    return len(jsonrpc.dumps_plain(resource)) + 1


def _batch_size(resources: list[dict[str, Any]]) -> int:
    """Exactly ``sum(_entry_size(r) for r in resources)``, with one encoding: ``[a,b]`` is 1 byte shorter."""
    return len(jsonrpc.dumps_plain(resources)) - 1 if resources else 0


def _encoded(position: list[Any]) -> list[Any]:
    """A position with its key JSON-safe, as a cursor holds it."""
    phase, key = position
    if isinstance(key, TokenPosition):
        return [phase, key.to_json()]
    return [phase, encode_key(key) if isinstance(key, tuple) else key]


class Traversal:
    """Assemble one page from ``sources`` (the accessible ones, static first).

    ``all_names`` are the names of every source in registration order, accessible or not: a position in a source
    that became inaccessible since the last page continues with the sources after it. ``cursor_size(position)``
    is the encoded size of the cursor that would carry ``position``, counted against ``max_bytes`` with the
    entries (``base_bytes`` is the size of the rest of the response).
    """

    def __init__(
        self,
        request: HttpRequest,
        *,
        sources: Sequence[Source],
        all_names: Sequence[str],
        prefix: str,
        limit: int,
        max_bytes: int,
        base_bytes: int,
        deadline: float,
        cursor_size: Callable[[list[Any]], int] = lambda position: 0,
    ) -> None:
        self.request = request
        self.sources = list(sources)
        self.phases = [source.name for source in self.sources]
        self.all_names = list(all_names)
        self.prefix = prefix
        self.limit = limit
        self.max_bytes = max_bytes
        self.base_bytes = base_bytes
        self.deadline = deadline
        self.cursor_size = cursor_size
        self.cancellation = token_for(request)
        self._seen: set[str] = set()
        self._read: set[str] = set()

    def _start(self, position: list[Any] | None) -> tuple[int, Any]:
        if position is None:
            return 0, None
        if not (isinstance(position, list) and len(position) == 2 and isinstance(position[0], str)):
            raise BadPosition("malformed position")
        phase, key = position
        if phase in self.phases:
            return self.phases.index(phase), key
        if phase not in self.all_names:
            raise BadPosition("unknown phase")
        # The source became inaccessible since the last page: continue with the sources after it.
        order = self.all_names.index(phase)
        for index, name in enumerate(self.phases):
            if name in self.all_names and self.all_names.index(name) > order:
                return index, None
        return len(self.phases), None

    def _check(self) -> None:
        """Stop when the client has disconnected or the deadline has passed."""
        if self.cancellation is not None and self.cancellation.cancelled:
            raise RequestCancelled()
        if time.monotonic() > self.deadline:
            raise DeadlineExceeded()

    def _fetch(self, index: int, after: Any, limit: int) -> Page:
        self._check()
        self._read.add(self.phases[index])
        result = self.sources[index].page(
            self.request, after=after, limit=limit, prefix=self.prefix, deadline=self.deadline, seen=self._seen
        )
        # Work that finished late (or for a client that has gone) fails too: a page is answered within the deadline
        # or not at all, and what a cancelled source returned is discarded.
        self._check()
        return result

    def page(self, position: list[Any] | None) -> PageResult:
        """One page from ``position``; raises :exc:`DeadlineExceeded` or :exc:`RequestCancelled` when cut short."""
        try:
            return self._page(position)
        except RequestCancelled:
            logger.info("resources/list cancelled: the client disconnected")
            raise

    def _page(self, position: list[Any] | None) -> PageResult:
        index, after = self._start(position)
        resources: list[dict[str, Any]] = []
        starts: list[tuple[str, Any]] = []  # the position at which each listed resource starts (keys not encoded)
        used = self.base_bytes
        self._seen = set()
        self._read = set()

        def done(next_position: list[Any] | None) -> PageResult:
            # The next cursor counts against the byte bound too: give back entries until it fits.
            nonlocal used
            if next_position is not None:
                cursor = self.cursor_size(_encoded(next_position))
                while used + cursor > self.max_bytes:
                    if len(resources) <= 1:
                        raise SourceContractError("a single resource and its cursor cannot fit in a page")
                    used -= _entry_size(resources.pop())
                    next_position = list(starts.pop())
                    cursor = self.cursor_size(_encoded(next_position))
            return PageResult(
                resources,
                None if next_position is None else _encoded(next_position),
                [phase for phase, _ in starts],
                self._read,
            )

        while index < len(self.phases):
            entries, has_more = self._fetch(index, after, self.limit - len(resources))
            phase = self.phases[index]
            batch = [resource for _, resource in entries]
            total = _batch_size(batch) if all(batch) else None
            if total is not None and used + total <= self.max_bytes:
                # The whole batch fits (the usual case): one encoding measures it.
                if entries:
                    keys = [key for key, _ in entries]
                    starts.extend(zip(repeat(phase), [after, *keys[:-1]]))
                    resources.extend(batch)
                    after = keys[-1]
                    used += total
            else:
                for key, resource in entries:
                    if not resource:  # a skip marker: nothing listable in this batch
                        after = key
                        continue
                    size = _entry_size(resource)
                    if used + size > self.max_bytes:
                        if not resources:
                            raise SourceContractError(f"a single resource ({size} bytes) cannot fit in a page")
                        return done([phase, after])
                    starts.append((phase, after))
                    used += size
                    resources.append(resource)
                    after = key
            if has_more:
                if len(resources) >= self.limit:
                    return done([phase, after])
                continue  # a short batch (filtered by the prefix): keep reading this phase
            index, after = index + 1, None
            if len(resources) >= self.limit:
                return done(self._peek(index))
        return done(None)

    def _peek(self, index: int) -> list[Any] | None:
        """The next non-empty phase at or after ``index``, for a page that filled up at a phase boundary."""
        while index < len(self.phases):
            entries, _ = self._fetch(index, None, 1)
            if entries:
                return [self.phases[index], None]
            index += 1
        return None
