"""One ``resources/list`` traversal across sources: static resources first, then each inventory source in
registration order, continuing across source boundaries within a page, bounded in entries and in bytes.

A position is ``[phase, key]``: the phase is ``""`` for static resources or a source's name, and the key is the
last URI (static), the ordering values (model sources) or the callback's key (generic sources). Each page is
queried live: nothing is snapshotted, and the cursor never grants access.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain, repeat
from typing import TYPE_CHECKING, Any

from django.db import connections

from mcp_resources import jsonrpc
from mcp_resources.cancellation import RequestCancelled, cancellable_queries, token_for
from mcp_resources.ownership import OwnedListing, owner_of
from mcp_resources.pagination import (
    BadPosition,
    decode_position,
    encode_key,
    keyset_queryset,
    native_timestamps,
    prefix_variables,
    resolve_field,
    statement_timeout,
)
from mcp_resources.precompiled import Statement, together_supported
from mcp_resources.resources import InventoryPage, ModelResourceTemplate, ResourceTemplate
from mcp_resources.uris import MAX_URI_LENGTH, can_start_with

if TYPE_CHECKING:
    from django.http import HttpRequest

logger = logging.getLogger("mcp_resources.inventory")

STATIC_PHASE = ""
_KEY = re.compile(r"[\x21-\x7e]{1,256}")  # used with fullmatch: "$" would accept a trailing newline
_ALLOWED_FIELDS = {"uri", "name", "mimeType"}

Entry = tuple[Any, dict[str, Any]]


class InventoryError(Exception):
    """A source broke the list contract; the client gets a generic internal error, the log gets this."""


class DeadlineExceeded(Exception):
    """The listing ran past the request's deadline."""


class PositionError(Exception):
    """The cursor's position no longer fits the registered sources."""


@dataclass
class PageResult:
    resources: list[dict[str, Any]]
    next_position: list[Any] | None


def validate_page(
    template: ResourceTemplate,
    raw: Any,
    *,
    after: str | None,
    limit: int,
    prefix: str,
    seen: set[str] | None = None,
) -> tuple[list[Entry], bool]:
    """Check what a ``list`` callback returned against the contract; raise :class:`InventoryError`.

    ``seen`` holds the URIs already listed in this page (a source may be called several times for one page).
    """
    if isinstance(raw, InventoryPage):
        entries, has_more = raw.entries, raw.has_more
    elif isinstance(raw, tuple) and len(raw) == 2:
        entries, has_more = raw
    else:
        raise InventoryError(f"{template.name}: list() must return (entries, has_more) or an InventoryPage")
    if not isinstance(entries, Sequence) or not isinstance(has_more, bool):
        raise InventoryError(f"{template.name}: entries must be a sequence and has_more a bool")
    if len(entries) > limit:
        raise InventoryError(f"{template.name}: returned {len(entries)} entries for limit {limit}")
    if has_more and not entries:
        raise InventoryError(f"{template.name}: has_more is true on an empty page")
    previous = after
    seen = set() if seen is None else seen
    checked: list[Entry] = []
    for item in entries:
        if not (isinstance(item, tuple | list) and len(item) == 2):
            raise InventoryError(f"{template.name}: each entry must be (key, resource)")
        key, resource = item
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise InventoryError(f"{template.name}: key {key!r} is not 1-256 printable ASCII without spaces")
        if previous is not None and key.encode() <= previous.encode():
            raise InventoryError(f"{template.name}: keys are not strictly increasing in byte order")
        previous = key
        if not isinstance(resource, dict) or set(resource) - _ALLOWED_FIELDS:
            raise InventoryError(f"{template.name}: resource metadata may only hold uri, name and mimeType")
        uri, name, mime = resource.get("uri"), resource.get("name"), resource.get("mimeType")
        if not isinstance(uri, str) or not uri or len(uri) > MAX_URI_LENGTH:
            raise InventoryError(f"{template.name}: uri missing or over {MAX_URI_LENGTH} characters")
        if template.compiled.match(uri) is None:
            raise InventoryError(f"{template.name}: uri {uri[:200]!r} does not match {template.uri_template}")
        if uri in seen:
            raise InventoryError(f"{template.name}: uri {uri[:200]!r} repeated")
        seen.add(uri)
        if prefix and not uri.startswith(prefix):
            raise InventoryError(f"{template.name}: uri {uri[:200]!r} does not start with the prefix")
        if not isinstance(name, str) or not name or len(name) > 512:
            raise InventoryError(f"{template.name}: name missing or over 512 characters")
        if mime is not None and (not isinstance(mime, str) or len(mime) > 128):
            raise InventoryError(f"{template.name}: mimeType over 128 characters")
        checked.append((key, dict(resource)))
    return checked, has_more


def model_page(
    template: ModelResourceTemplate,
    request: HttpRequest,
    *,
    after: Any,
    limit: int,
    prefix: str,
    deadline: float,
    prefetch: Prefetch | None = None,
) -> tuple[list[Entry], bool]:
    """One keyset page of a model template's scoped queryset, with the prefix pushed into the query."""
    assert template.model is not None
    ordering = list(template.ordering)
    owned = None if prefix else template.owned_listing()
    if owned is not None:
        return _owned_page(template, owned, request, after=after, limit=limit, deadline=deadline, prefetch=prefetch)
    queryset = template.get_queryset(request)
    if prefix:
        split = prefix_variables(template.compiled, prefix)
        if split is None:
            return [], False
        complete, partial = split
        lookups = template.get_lookups()
        filters: dict[str, Any] = {}
        for var, value in complete.items():
            filters[lookups[var]] = value
        if partial is not None and partial[1]:
            filters[f"{lookups[partial[0]]}__startswith"] = partial[1]
        if any(isinstance(value, str) and "\x00" in value for value in filters.values()):
            # A NUL (from "%00") names no row, and PostgreSQL refuses to compare it (DataError, not a miss).
            return [], False
        try:
            queryset = queryset.filter(**filters)
        except (ValueError, TypeError):
            return [], False
    position = _position(template, ordering, after)
    remaining_ms = _remaining_ms(deadline)
    plan = template.list_plan()
    try:
        query = keyset_queryset(queryset, ordering, position, limit)
        if plan is not None:
            query = query.values_list(*plan.columns)
        elif template.list_fields is not None:
            query = query.only(*_only_fields(template))
        with (
            statement_timeout(query.db, remaining_ms),
            native_timestamps(query.db),
            cancellable_queries(request, query.db),
        ):
            rows = list(query)
    except (ValueError, TypeError):
        # A completed prefix variable that does not fit the field's type names no record.
        return [], False
    has_more = len(rows) > limit
    del rows[limit:]
    entries: list[Entry] = []
    if plan is not None:
        at = plan.ordering
        for row in rows:
            resource = plan.resource(row)
            if prefix and not resource["uri"].startswith(prefix):
                continue
            entries.append((tuple([row[i] for i in at]), resource))
        last = tuple([rows[-1][i] for i in at]) if rows else None
    else:
        attnames = [resolve_field(template.model, name).attname if name != "pk" else "pk" for name in ordering]
        for obj in rows:
            resource = template.get_resource(request, obj)
            if prefix and not resource["uri"].startswith(prefix):
                continue
            entries.append((tuple([getattr(obj, a) for a in attnames]), resource))
        last = tuple([getattr(rows[-1], a) for a in attnames]) if rows else None
    if not entries and has_more and last is not None:
        # Every row of this batch fell outside the prefix after encoding: continue after the last one.
        return [(last, {})], True
    return entries, has_more


def _position(template: ModelResourceTemplate, ordering: list[Any], after: Any) -> list[Any] | None:
    """The keyset position ``after`` as Python values (a cursor's JSON values are converted by the fields)."""
    if isinstance(after, tuple):
        return list(after)  # a key of this page's previous batch: already Python values (a cursor's are a list)
    assert template.model is not None
    try:
        return decode_position(template.model, ordering, after) if after is not None else None
    except BadPosition as exc:
        raise PositionError(str(exc)) from exc


def _remaining_ms(deadline: float) -> int:
    remaining_ms = int((deadline - time.monotonic()) * 1000)
    if remaining_ms <= 0:
        raise DeadlineExceeded()
    return remaining_ms


def _owned_page(
    template: ModelResourceTemplate,
    owned: OwnedListing,
    request: HttpRequest,
    *,
    after: Any,
    limit: int,
    deadline: float,
    prefetch: Prefetch | None = None,
) -> tuple[list[Entry], bool]:
    """One page of an owner-scoped template through its precompiled query (no prefix)."""
    owner = owner_of(request)
    if owner is None:
        return [], False
    rows = prefetch.take(template, limit) if prefetch is not None and after is None else None
    if rows is None:
        position = _position(template, list(template.ordering), after)
        remaining_ms = _remaining_ms(deadline)
        using = owned.using()
        with statement_timeout(using, remaining_ms), native_timestamps(using), cancellable_queries(request, using):
            rows = owned.rows(using, owner, position, limit)
    has_more = len(rows) > limit
    del rows[limit:]
    plan = template.list_plan()
    assert plan is not None
    return list(plan.entries(rows)), has_more


class Prefetch:
    """The first batch of a page's first source, read in the same round trip as the static phase.

    Made for a first page without a prefix whose first source declares its scope (``owner_field``), on a connection
    that takes several statements in one message (:func:`~mcp_resources.precompiled.together_supported`): every
    first page reads the static resources, and this saves the second round trip. The source's query runs with its
    own statement timeout and cancellation; its first fetch then takes the rows it needs from ``rows``.
    """

    def __init__(
        self, source: ModelResourceTemplate, statement: Statement, request: HttpRequest, limit: int, deadline: float
    ) -> None:
        self.source = source
        self.statement = statement
        self.request = request
        self.limit = limit
        self.deadline = deadline
        self.using = statement.connection.alias
        self.rows: list[tuple[Any, ...]] | None = None

    @classmethod
    def for_source(cls, source: ResourceTemplate, request: HttpRequest, limit: int, deadline: float) -> Prefetch | None:
        if not isinstance(source, ModelResourceTemplate):
            return None
        owned = source.owned_listing()
        owner = owner_of(request) if owned is not None else None
        if owned is None or owner is None:
            return None
        using = owned.using()
        if not together_supported(connections[using]):
            return None
        return cls(source, owned.first.statement(using, [owner], shape=limit), request, limit, deadline)

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """The source's query settings around the shared round trip: statement timeout, timestamps, cancellation."""
        remaining_ms = _remaining_ms(self.deadline)
        with (
            statement_timeout(self.using, remaining_ms),
            native_timestamps(self.using),
            cancellable_queries(self.request, self.using),
        ):
            yield

    def take(self, source: ResourceTemplate, limit: int) -> list[tuple[Any, ...]] | None:
        """The first ``limit + 1`` rows of ``source`` when they were read (what its own query would return)."""
        if source is not self.source or self.rows is None or limit > self.limit:
            return None
        rows, self.rows = self.rows, None
        return rows[: limit + 1]


def _only_fields(template: ModelResourceTemplate) -> list[str]:
    """``list_fields`` plus what the listing itself reads: ordering fields and the lookups' first fields."""
    assert template.model is not None
    names = [*(template.list_fields or ()), *template.ordering]
    names += [lookup.split("__", 1)[0] for lookup in template.get_lookups().values()]
    return list(dict.fromkeys(names))


def source_page(
    template: ResourceTemplate,
    request: HttpRequest,
    *,
    after: Any,
    limit: int,
    prefix: str,
    deadline: float,
    seen: set[str] | None = None,
    prefetch: Prefetch | None = None,
) -> tuple[list[Entry], bool]:
    if isinstance(template, ModelResourceTemplate):
        return model_page(
            template, request, after=after, limit=limit, prefix=prefix, deadline=deadline, prefetch=prefetch
        )
    if after is not None and not isinstance(after, str):
        raise PositionError("generic sources take string keys")
    raw = template.list(request, after=after, limit=limit, prefix=prefix, deadline=deadline)
    return validate_page(template, raw, after=after, limit=limit, prefix=prefix, seen=seen)


def _entry_size(resource: dict[str, Any]) -> int:
    """Bytes one resource adds to the result: its JSON and a separating comma."""
    return len(jsonrpc.dumps_plain(resource)) + 1


def _batch_size(resources: list[dict[str, Any]]) -> int:
    """Exactly ``sum(_entry_size(r) for r in resources)``, with one encoding: ``[a,b]`` is 1 byte shorter."""
    return len(jsonrpc.dumps_plain(resources)) - 1 if resources else 0


def _size_bound(resources: list[dict[str, Any]]) -> int | None:
    """An upper bound of :func:`_batch_size` without encoding, or ``None`` (a skip marker, a value that is not a
    string). Each character of a key or a value encodes to at most 6 bytes (a ``\\u`` escape: a control character
    or a lone surrogate), a pair adds ``"":"",`` and an entry ``{}`` and its comma."""
    if not all(resources):
        return None
    try:
        characters = len("".join(chain.from_iterable(chain.from_iterable(map(dict.items, resources)))))
    except TypeError:
        return None
    return 6 * characters + 6 * sum(map(len, resources)) + 3 * len(resources)


def _encoded(position: list[Any]) -> list[Any]:
    """A position with its key JSON-safe, as a cursor holds it."""
    phase, key = position
    return [phase, encode_key(key) if isinstance(key, tuple) else key]


class Traversal:
    """Assemble one page across the static phase and the accessible sources."""

    def __init__(
        self,
        request: HttpRequest,
        *,
        static_page: Callable[[str | None, int, str, Prefetch | None], list[Entry]],
        sources: list[ResourceTemplate],
        all_sources: list[ResourceTemplate],
        prefix: str,
        limit: int,
        max_bytes: int,
        base_bytes: int,
        deadline: float,
        cursor_bytes: Callable[[list[Any]], int] = lambda position: 0,
    ) -> None:
        self.request = request
        self.static_page = static_page
        self.sources = [s for s in sources if not prefix or can_start_with(s.compiled, prefix)]
        self.all_names = [s.name for s in all_sources]
        self.prefix = prefix
        self.limit = limit
        self.max_bytes = max_bytes
        self.base_bytes = base_bytes
        self.deadline = deadline
        self.cursor_bytes = cursor_bytes
        self.cancellation = token_for(request)
        self._seen: set[str] = set()
        self._prefetch: Prefetch | None = None

    def _phases(self) -> list[str]:
        return [STATIC_PHASE] + [s.name for s in self.sources]

    def _start(self, position: list[Any] | None) -> tuple[int, Any]:
        phases = self._phases()
        if position is None:
            return 0, None
        if not (isinstance(position, list) and len(position) == 2 and isinstance(position[0], str)):
            raise PositionError("malformed position")
        phase, key = position
        if phase in phases:
            return phases.index(phase), key
        if phase not in self.all_names:
            raise PositionError("unknown phase")
        # The source became inaccessible since the last page: continue with the sources after it.
        order = self.all_names.index(phase)
        for index, name in enumerate(phases[1:], start=1):
            if self.all_names.index(name) > order:
                return index, None
        return len(phases), None

    def _check(self) -> None:
        """Stop when the client has disconnected or the deadline has passed."""
        if self.cancellation is not None and self.cancellation.cancelled:
            raise RequestCancelled()
        if time.monotonic() > self.deadline:
            raise DeadlineExceeded()

    def _fetch(self, phase_index: int, after: Any, limit: int) -> tuple[list[Entry], bool]:
        self._check()
        if phase_index == 0:
            rows = self.static_page(after, limit + 1, self.prefix, self._prefetch if after is None else None)
            result = rows[:limit], len(rows) > limit
        else:
            source = self.sources[phase_index - 1]
            result = source_page(
                source,
                self.request,
                after=after,
                limit=limit,
                prefix=self.prefix,
                deadline=self.deadline,
                seen=self._seen,
                prefetch=self._prefetch,
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
        phases = self._phases()
        index, after = self._start(position)
        if index == 0 and after is None and not self.prefix and self.sources:
            # A first page: the first source's first batch is read in the static phase's round trip.
            self._prefetch = Prefetch.for_source(self.sources[0], self.request, self.limit, self.deadline)
        resources: list[dict[str, Any]] = []
        starts: list[tuple[str, Any]] = []  # the position at which each listed resource starts (keys not encoded)
        used = self.base_bytes  # exact bytes, but for the batches in ``pending``
        pending: list[list[dict[str, Any]]] = []  # batches accepted on their size bound, not yet encoded
        pending_bound = 0
        self._seen = set()

        def settle() -> None:
            # Encode the batches accepted on their bound: every decision after this one is on exact sizes.
            nonlocal used, pending_bound
            used += sum(_batch_size(batch) for batch in pending)
            pending.clear()
            pending_bound = 0

        def done(next_position: list[Any] | None) -> PageResult:
            # The next cursor counts against the byte bound too: give back entries until it fits.
            nonlocal used
            if next_position is not None:
                cursor = self.cursor_bytes(_encoded(next_position))
                if used + pending_bound + cursor > self.max_bytes:
                    settle()
                    while used + cursor > self.max_bytes:
                        if len(resources) <= 1:
                            raise InventoryError("a single resource and its cursor cannot fit in a page")
                        used -= _entry_size(resources.pop())
                        next_position = list(starts.pop())
                        cursor = self.cursor_bytes(_encoded(next_position))
            return PageResult(resources, None if next_position is None else _encoded(next_position))

        while index < len(phases):
            remaining = self.limit - len(resources)
            entries, has_more = self._fetch(index, after, remaining)
            phase = phases[index]
            batch = [resource for _, resource in entries]
            bound = _size_bound(batch)
            if bound is not None and used + pending_bound + bound <= self.max_bytes:
                # The whole batch fits even at its largest possible encoding (the usual case): measure it only if a
                # later decision needs exact sizes.
                keys = [key for key, _ in entries]
                starts.extend(zip(repeat(phase, len(keys)), [after, *keys][:-1], strict=True))
                resources.extend(batch)
                if keys:
                    after = keys[-1]
                pending.append(batch)
                pending_bound += bound
            else:
                settle()
                total = _batch_size(batch) if all(batch) else None
                if total is not None and used + total <= self.max_bytes:
                    # The whole batch fits: one encoding measures it exactly.
                    for key, resource in entries:
                        starts.append((phase, after))
                        resources.append(resource)
                        after = key
                    used += total
                else:
                    for key, resource in entries:
                        if not resource:  # a skip marker: nothing listable in this batch
                            after = key
                            continue
                        size = _entry_size(resource)
                        if used + size > self.max_bytes:
                            if not resources:
                                raise InventoryError(f"a single resource ({size} bytes) cannot fit in a page")
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
        phases = self._phases()
        while index < len(phases):
            entries, _ = self._fetch(index, None, 1)
            if entries:
                return [phases[index], None]
            index += 1
        return None
