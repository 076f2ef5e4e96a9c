"""The sources a ``resources/list`` traversal reads, each one page at a time.

- :class:`StaticSource`: the static resources (registered from code, and ``StaticResource`` rows of the admin) the
  caller may access, in URI byte order. Always the first phase.
- :class:`TemplateSource`: a protected, discoverable template. A :class:`~mcp_resources.ModelResourceTemplate` pages
  its caller-scoped queryset by keyset, with the prefix pushed into the query; any other template's ``list()``
  callback is called and what it returns is checked against the list contract.
- A repository (:class:`~mcp_resources.resources.ResourceRepository`) pages with its pager's own token:
  :mod:`mcp_resources.listing.repository`.

Every source returns ``(entries, has_more)``: at most ``limit`` entries ``(key, resource)`` after ``after`` in its
key order. Keys are the last URI (static), the ordering values (models), the callback's key (other templates) or a
token position (repositories).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from django.db import DEFAULT_DB_ALIAS, router

from mcp_resources import fastpaths
from mcp_resources.access import may_access
from mcp_resources.cancellation import cancellable_queries
from mcp_resources.exceptions import BadPosition, DeadlineExceeded, SourceContractError
from mcp_resources.listing.compiled import DeclaredListing, StaticListing, declared_listing
from mcp_resources.listing.keyset import decode_position, keyset_queryset, order_after, with_key_values
from mcp_resources.listing.plan import NAME_MAX_LENGTH, ListPlan, list_plan, over_limit
from mcp_resources.listing.prefix import prefix_variables
from mcp_resources.models import StaticResource
from mcp_resources.ownership import owner_of
from mcp_resources.protocol.uris import MAX_URI_LENGTH
from mcp_resources.queries import native_timestamps, statement_timeout
from mcp_resources.resources import InventoryPage, ModelResourceTemplate, ResourceTemplate

if TYPE_CHECKING:
    from django.http import HttpRequest

    from mcp_resources.principal import Principal
    from mcp_resources.registries import ResourceRegistry

Entry = tuple[Any, dict[str, Any]]
Page = tuple[list[Entry], bool]

STATIC_PHASE = ""
KEY_MAX_LENGTH = 256
MIME_TYPE_MAX_LENGTH = 128
_ALLOWED_FIELDS = {"uri", "name", "mimeType"}
_KEY = re.compile(rf"[\x21-\x7e]{{1,{KEY_MAX_LENGTH}}}")  # used with fullmatch: "$" would accept a trailing newline

STATIC_FIELDS = (
    "uri",
    "name",
    "title",
    "description",
    "mime_type",
    "access",
    "required_scopes",
    "audience",
    "priority",
    "icons",
    "size",
    "updated",
)
"""What a listing reads of a ``StaticResource`` row (never its contents: ``size`` is stored when it is saved), in
the model's field order (``Model.from_db`` takes them so)."""

_static_listing = StaticListing(STATIC_FIELDS)


def remaining_ms(deadline: float) -> int:
    """Milliseconds left until ``deadline`` (a ``time.monotonic()`` value); raises once it has passed."""
    remaining = int((deadline - time.monotonic()) * 1000)
    if remaining <= 0:
        raise DeadlineExceeded()
    return remaining


class StaticSource:
    """Static resources from code and from the admin that ``principal`` may access, in URI byte order."""

    name = STATIC_PHASE

    def __init__(self, registry: ResourceRegistry, principal: Principal) -> None:
        self.registry = registry
        self.principal = principal

    @staticmethod
    def rows(
        request: HttpRequest, using: str, after: str | None, limit: int, prefix: str, deadline: float
    ) -> list[Any]:
        """Up to ``limit`` enabled ``StaticResource`` rows after ``after`` (``STATIC_FIELDS`` values)."""
        with statement_timeout(using, remaining_ms(deadline)), cancellable_queries(request, using):
            rows = None if prefix else _static_listing.rows(using, after, limit)
            if rows is None:
                queryset = StaticResource.objects.using(using).filter(enabled=True)
                if prefix:
                    queryset = queryset.filter(uri__startswith=prefix)
                rows = list(order_after(queryset, "uri", after, limit).values_list(*STATIC_FIELDS))
        return rows

    def page(
        self, request: HttpRequest, *, after: Any, limit: int, prefix: str, deadline: float, seen: set[str]
    ) -> Page:
        if after is not None and not isinstance(after, str):
            raise BadPosition("static positions are URIs")
        code = {r.uri: r for r in self.registry.iter_resources()}
        entries: list[Entry] = [
            (uri, resource.get_descriptor())
            for uri, resource in code.items()
            if (after is None or uri.encode() > after.encode())
            and uri.startswith(prefix)
            and may_access(resource.access, resource.scopes, self.principal)
        ][: limit + 1]
        # Admin rows, in batches until enough accessible ones are found (protected rows may be skipped).
        found, position = 0, after
        using = router.db_for_read(StaticResource) or DEFAULT_DB_ALIAS
        while found <= limit:
            rows = self.rows(request, using, position, limit + 1, prefix, deadline)
            for row in rows:
                static = StaticResource.from_db(using, STATIC_FIELDS, row)
                if static.uri not in code and may_access(static.access, static.scopes, self.principal):
                    entries.append((static.uri, static.get_descriptor()))
                    found += 1
            if len(rows) <= limit:
                break
            position = rows[-1][0]
        entries.sort(key=lambda item: item[0].encode())
        return entries[:limit], len(entries) > limit


class TemplateSource:
    """One protected, discoverable template as a listing source."""

    def __init__(self, template: ResourceTemplate) -> None:
        self.template = template
        self.name = template.name

    def page(
        self, request: HttpRequest, *, after: Any, limit: int, prefix: str, deadline: float, seen: set[str]
    ) -> Page:
        template = self.template
        if isinstance(template, ModelResourceTemplate):
            return model_page(template, request, after=after, limit=limit, prefix=prefix, deadline=deadline)
        if after is not None and not isinstance(after, str):
            raise BadPosition("generic sources take string keys")
        raw = template.list(request, after=after, limit=limit, prefix=prefix, deadline=deadline)
        return validate_page(template, raw, after=after, limit=limit, prefix=prefix, seen=seen)


def model_page(
    template: ModelResourceTemplate, request: HttpRequest, *, after: Any, limit: int, prefix: str, deadline: float
) -> Page:
    """One keyset page of a model template's scoped queryset, with the prefix pushed into the query."""
    assert template.model is not None
    ordering = list(template.ordering)
    position = _position(template, ordering, after)
    plan = list_plan(template)
    if plan is not None and not prefix:
        declared = declared_listing(template, plan.columns)
        if declared is not None:
            return _declared_page(declared, template, request, plan, position, limit, deadline)
    queryset = template.get_queryset(request)
    if prefix:
        split = prefix_variables(template.compiled, prefix)
        if split is None:
            return [], False
        complete, partial = split
        lookups = template.get_lookups()
        filters: dict[str, Any] = {lookups[var]: value for var, value in complete.items()}
        if partial is not None and partial[1]:
            filters[f"{lookups[partial[0]]}__startswith"] = partial[1]
        if any(isinstance(value, str) and "\x00" in value for value in filters.values()):
            # A NUL (from "%00") names no row, and PostgreSQL refuses to compare it (DataError, not a miss).
            return [], False
        try:
            queryset = queryset.filter(**filters)
        except (ValueError, TypeError):
            return [], False
    key_of: Any = None
    try:
        if plan is None:
            queryset, key_of = with_key_values(queryset, ordering)
        query = keyset_queryset(queryset, ordering, position, limit)
        if plan is not None:
            query = query.values_list(*plan.columns)
        elif template.list_fields is not None:
            query = query.only(*_only_fields(template))
        with (
            statement_timeout(query.db, remaining_ms(deadline)),
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
        pairs = plan.entries(rows)
    else:
        pairs = [(key_of(obj), template.get_resource(request, obj)) for obj in rows]
        # URIs are checked to read back only where a hook could spell them otherwise than the template does.
        spelled = fastpaths.VALUE_ROWS not in template.fast_paths
        for key, resource in pairs:
            check_model_resource(template, key, resource, reads=spelled)
    listed = [index for index, (_, resource) in enumerate(pairs) if not prefix or resource["uri"].startswith(prefix)]
    if template.object_permissions:
        # A record its object permission refuses reads not found: it is not listed either (instances: no plan).
        allowed = template.has_object_permissions(request, [rows[index] for index in listed])
        listed = [index for index, permitted in zip(listed, allowed, strict=True) if permitted]
    entries = [pairs[index] for index in listed]
    if not entries and has_more and pairs:
        # Every row of this batch fell outside the prefix once encoded, or was refused: continue after the last one.
        return [(pairs[-1][0], {})], True
    return entries, has_more


def _declared_page(
    declared: DeclaredListing,
    template: ModelResourceTemplate,
    request: HttpRequest,
    plan: ListPlan,
    position: list[Any] | None,
    limit: int,
    deadline: float,
) -> Page:
    """A page of a template whose scope is declared, through its compiled query (the queryset when it cannot be)."""
    owner = owner_of(request)
    if owner is None:
        return [], False
    assert template.model is not None
    using = template.queryset.db if template.queryset is not None else router.db_for_read(template.model)
    try:
        with (
            statement_timeout(using, remaining_ms(deadline)),
            native_timestamps(using),
            cancellable_queries(request, using),
        ):
            rows = declared.rows(using, owner, position, limit)
            if rows is None:
                query = keyset_queryset(template.get_queryset(request), list(template.ordering), position, limit)
                rows = list(query.values_list(*plan.columns))
    except (ValueError, TypeError):
        return [], False  # a position value the field cannot take names no record
    has_more = len(rows) > limit
    return plan.entries(rows[:limit]), has_more


def _position(template: ModelResourceTemplate, ordering: list[Any], after: Any) -> list[Any] | None:
    """The keyset position ``after`` as Python values (a cursor's JSON values are converted by the fields)."""
    if isinstance(after, tuple):
        return list(after)  # a key of this page's previous batch: already Python values (a cursor's are a list)
    assert template.model is not None
    return decode_position(template.model, ordering, after) if after is not None else None


def _only_fields(template: ModelResourceTemplate) -> list[str]:
    """``list_fields`` plus what the listing itself reads: ordering fields, the lookups' first fields, and the
    modification and size fields."""
    names = [*(template.list_fields or ()), *(name.split("__", 1)[0] for name in template.ordering)]
    names += [path.split("__", 1)[0] for path in (template.modified_field, template.size_field) if path is not None]
    names += [lookup.split("__", 1)[0] for lookup in template.get_lookups().values()]
    return list(dict.fromkeys(names))


def check_model_resource(template: ModelResourceTemplate, key: Any, resource: Any, *, reads: bool = True) -> None:
    """What ``get_resource()`` returned for the record at ``key`` honours the list contract of ``list()``
    callbacks: a URI of at most 2,048 characters that reads this record back (checked when ``reads``: the base
    hooks expand the template from the record's own values, which always reads back), a name of at most 512
    characters, a ``mimeType`` of at most 128. Raises :class:`SourceContractError` (a generic error, and the detail
    in the log)."""
    name = template.name
    uri = resource.get("uri") if isinstance(resource, dict) else None
    if not isinstance(uri, str) or not isinstance(resource.get("name"), str):
        raise SourceContractError(f"{name}: get_resource() for the record at {key!r} gave no uri or name string")
    if len(uri) > MAX_URI_LENGTH or len(resource["name"]) > NAME_MAX_LENGTH:
        raise SourceContractError(over_limit(template, key, resource))
    mime = resource.get("mimeType")
    if mime is not None and (not isinstance(mime, str) or len(mime) > MIME_TYPE_MAX_LENGTH):
        raise SourceContractError(
            f"{name}: the record at {key!r} has a mimeType over {MIME_TYPE_MAX_LENGTH} characters"
        )
    if reads and not reads_back(template, uri):
        raise SourceContractError(
            f"{name}: the record at {key!r} is listed as {uri[:200]!r}, which is not its template's one spelling"
        )


def reads_back(template: ResourceTemplate, uri: str) -> bool:
    """Whether a read of ``uri`` routes to ``template``'s record: ``uri`` matches and is its canonical spelling."""
    try:
        return template.resolve_uri(uri) is not None
    except Exception:
        # A parse_uri override that refuses the URI (ResourceError) or fails: the URI could never be read.
        return False


def validate_page(
    template: ResourceTemplate,
    raw: Any,
    *,
    after: str | None,
    limit: int,
    prefix: str,
    seen: set[str] | None = None,
) -> Page:
    """Check what a ``list`` callback returned against the contract; raise :class:`SourceContractError`.

    ``seen`` holds the URIs already listed in this page (a source may be called several times for one page).
    """
    name = template.name
    if isinstance(raw, InventoryPage):
        entries, has_more = raw.entries, raw.has_more
    elif isinstance(raw, tuple) and len(raw) == 2:
        entries, has_more = raw
    else:
        raise SourceContractError(f"{name}: list() must return (entries, has_more) or an InventoryPage")
    if not isinstance(entries, Sequence) or not isinstance(has_more, bool):
        raise SourceContractError(f"{name}: entries must be a sequence and has_more a bool")
    if len(entries) > limit:
        raise SourceContractError(f"{name}: returned {len(entries)} entries for limit {limit}")
    if has_more and not entries:
        raise SourceContractError(f"{name}: has_more is true on an empty page")
    previous = after
    seen = set() if seen is None else seen
    checked: list[Entry] = []
    for item in entries:
        if not (isinstance(item, tuple | list) and len(item) == 2):
            raise SourceContractError(f"{name}: each entry must be (key, resource)")
        key, resource = item
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise SourceContractError(f"{name}: key {key!r} is not 1-256 printable ASCII without spaces")
        if previous is not None and key.encode() <= previous.encode():
            raise SourceContractError(f"{name}: keys are not strictly increasing in byte order")
        previous = key
        if not isinstance(resource, dict) or set(resource) - _ALLOWED_FIELDS:
            raise SourceContractError(f"{name}: resource metadata may only hold uri, name and mimeType")
        uri, title, mime = resource.get("uri"), resource.get("name"), resource.get("mimeType")
        if not isinstance(uri, str) or not uri or len(uri) > MAX_URI_LENGTH:
            raise SourceContractError(f"{name}: uri missing or over {MAX_URI_LENGTH} characters")
        if not reads_back(template, uri):
            raise SourceContractError(
                f"{name}: uri {uri[:200]!r} is not a URI of {template.uri_template} in the one spelling it reads"
            )
        if uri in seen:
            raise SourceContractError(f"{name}: uri {uri[:200]!r} repeated")
        seen.add(uri)
        if prefix and not uri.startswith(prefix):
            raise SourceContractError(f"{name}: uri {uri[:200]!r} does not start with the prefix")
        if not isinstance(title, str) or not title or len(title) > NAME_MAX_LENGTH:
            raise SourceContractError(f"{name}: name missing or over {NAME_MAX_LENGTH} characters")
        if mime is not None and (not isinstance(mime, str) or len(mime) > MIME_TYPE_MAX_LENGTH):
            raise SourceContractError(f"{name}: mimeType over {MIME_TYPE_MAX_LENGTH} characters")
        checked.append((key, dict(resource)))
    return checked, has_more
