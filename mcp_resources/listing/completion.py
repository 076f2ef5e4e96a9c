"""``completion/complete`` for resource template variables: values only from the records the caller may read.

A template completes its URI variables through its ``complete()`` hook. When the hook returns ``None`` (the
default), a :class:`~mcp_resources.ModelResourceTemplate` answers the distinct values of the variable's lookup field
among the rows of its caller-scoped queryset (``get_queryset(request)``: the scope of list and read) that start with
the typed value, in byte order, at most 100 of them; values already chosen for the template's other variables
(``context.arguments``) filter the rows. Any other template completes nothing.

The prefix is a byte-order range, ``value >= prefix AND value < successor(prefix)``, compared like the listing's
keyset (``COLLATE "C"`` on PostgreSQL): an index on ``(scope columns, field COLLATE "C")`` serves it as an index
range, already in the order of the answer (docs/resources.md#completion). One query answers: the first 101 values
(the 101st only tells that there are more). A template that declares its scope runs it compiled once, as its listing
does (``listing/compiled.py``; the queryset is the fallback).
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from django.contrib.auth import get_user_model
from django.core.exceptions import FieldDoesNotExist, ImproperlyConfigured, ValidationError
from django.db import DEFAULT_DB_ALIAS, models, router
from django.db.models import F, TextField
from django.db.models.functions import Cast

from mcp_resources import fastpaths
from mcp_resources.cancellation import cancellable_queries
from mcp_resources.exceptions import InvalidParams
from mcp_resources.listing.compiled import CompiledQuery, scope_declared
from mcp_resources.listing.keyset import byte_ordered, keyset_filter
from mcp_resources.listing.sources import remaining_ms
from mcp_resources.ownership import owner_of
from mcp_resources.protocol.uris import MAX_URI_LENGTH
from mcp_resources.queries import statement_timeout
from mcp_resources.resources import Completion, ModelResourceTemplate, ResourceTemplate

if TYPE_CHECKING:
    from django.http import HttpRequest

    from mcp_resources.principal import Principal
    from mcp_resources.registries import ResourceRegistry

MAX_VALUES = 100
"""The most values one answer holds (the spec's bound)."""
MAX_NAME_LENGTH = 256
MAX_CONTEXT_ARGUMENTS = 64
RESOURCE_REF = "ref/resource"
PROMPT_REF = "ref/prompt"
_VALUE = "_mcp_completion"
_TEXT_FIELDS = (models.CharField, models.TextField)


@dataclass(frozen=True)
class CompletionRequest:
    """The parameters of one ``completion/complete`` request, validated.

    ``uri`` is the referenced URI template (``ref/resource``), ``prompt`` the referenced prompt's name
    (``ref/prompt``): exactly one is set. ``arguments`` are the already chosen values of ``context.arguments``.
    """

    argument: str
    value: str
    uri: str | None = None
    prompt: str | None = None
    arguments: dict[str, str] = field(default_factory=dict)


def completion_request(params: Mapping[str, Any]) -> CompletionRequest:
    """Validate the parameters of ``completion/complete``; raises ``-32602``."""
    ref = params.get("ref")
    if not isinstance(ref, Mapping):
        raise InvalidParams("params.ref must be an object")
    uri = prompt = None
    if ref.get("type") == RESOURCE_REF:
        uri = ref.get("uri")
        if not isinstance(uri, str) or not uri or len(uri) > MAX_URI_LENGTH:
            raise InvalidParams(f"ref.uri must be a URI template of at most {MAX_URI_LENGTH} characters")
    elif ref.get("type") == PROMPT_REF:
        prompt = ref.get("name")
        if not isinstance(prompt, str) or not prompt or len(prompt) > MAX_NAME_LENGTH:
            raise InvalidParams(f"ref.name must be a prompt name of at most {MAX_NAME_LENGTH} characters")
    else:
        raise InvalidParams('ref.type must be "ref/resource" or "ref/prompt"')
    argument = params.get("argument")
    if not isinstance(argument, Mapping):
        raise InvalidParams("params.argument must be an object with a name and a value")
    name, value = argument.get("name"), argument.get("value")
    if not isinstance(name, str) or not name or len(name) > MAX_NAME_LENGTH:
        raise InvalidParams(f"argument.name must be a string of 1 to {MAX_NAME_LENGTH} characters")
    value = _checked_text(value, "argument.value")
    context = params.get("context")
    if context is None:
        context = {}
    if not isinstance(context, Mapping):
        raise InvalidParams("params.context must be an object")
    chosen = context.get("arguments")
    if chosen is None:
        chosen = {}
    if not isinstance(chosen, Mapping) or len(chosen) > MAX_CONTEXT_ARGUMENTS:
        raise InvalidParams(f"context.arguments must be an object of at most {MAX_CONTEXT_ARGUMENTS} strings")
    for key, chosen_value in chosen.items():
        if not isinstance(key, str) or len(key) > MAX_NAME_LENGTH:
            raise InvalidParams("context.arguments names must be strings")
        _checked_text(chosen_value, "context.arguments values")
    return CompletionRequest(argument=name, value=value, uri=uri, prompt=prompt, arguments=dict(chosen))


def _checked_text(value: Any, what: str) -> str:
    if not isinstance(value, str) or len(value) > MAX_URI_LENGTH:
        raise InvalidParams(f"{what} must be a string of at most {MAX_URI_LENGTH} characters")
    # No URI holds control characters or lone surrogates (and databases refuse to compare them).
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F or 0xD800 <= ord(ch) <= 0xDFFF for ch in value):
        raise InvalidParams(f"{what} must not contain control characters")
    return value


def completion_template(registry: ResourceRegistry, uri: str) -> ResourceTemplate:
    """The discoverable template whose URI template is ``uri``; ``-32602`` for any other reference."""
    for template in registry.templates:
        if template.discoverable and template.uri_template == uri:
            return template
    raise InvalidParams("Unknown resource template", data={"uri": uri})


def complete_argument(
    template: ResourceTemplate,
    request: HttpRequest,
    principal: Principal,
    wanted: CompletionRequest,
    deadline: float,
) -> dict[str, Any]:
    """The ``completion`` object for one variable of ``template``, for the caller of ``request``.

    The caller is already authorized for the template (as for a read); the values come from what it may read.
    """
    variables = template.compiled.variables
    if wanted.argument not in variables:
        raise InvalidParams("Unknown argument", data={"argument": wanted.argument})
    chosen = {name: value for name, value in wanted.arguments.items() if name in variables and name != wanted.argument}
    result = template.complete(request, wanted.argument, wanted.value, chosen)
    if result is None:
        if not isinstance(template, ModelResourceTemplate):
            result = Completion(values=[], total=0)
        elif template.requires_subject and not principal.subject:
            # As in listings: a subject-owned source never falls back to an unrestricted query.
            result = Completion(values=[], total=0)
        else:
            result = complete_model(template, request, wanted.argument, wanted.value, chosen, deadline)
    return wire_completion(template, result)


def wire_completion(template: ResourceTemplate, result: Any) -> dict[str, Any]:
    """What a hook returned (a :class:`Completion` or a sequence of strings) as the wire's ``completion``."""
    if isinstance(result, Completion):
        values, total, has_more = result.values, result.total, result.has_more
    elif isinstance(result, Sequence) and not isinstance(result, str | bytes):
        values, total, has_more = list(result), len(result), False
    else:
        raise TypeError(f"{template.name}: complete() must return a Completion, a list of strings or None")
    if not all(isinstance(value, str) for value in values):
        raise TypeError(f"{template.name}: completion values must be strings")
    if total is not None and (not isinstance(total, int) or isinstance(total, bool) or total < 0):
        raise TypeError(f"{template.name}: Completion.total must be a non-negative integer or None")
    if not isinstance(has_more, bool):
        raise TypeError(f"{template.name}: Completion.has_more must be a bool")
    if len(values) > MAX_VALUES:
        values, has_more = values[:MAX_VALUES], True
    if total is not None and total < len(values):
        total = len(values)
    completion: dict[str, Any] = {"values": list(values)}
    if total is not None:
        completion["total"] = total
    completion["hasMore"] = has_more or (total is not None and total > len(values))
    return completion


def complete_model(
    template: ModelResourceTemplate,
    request: HttpRequest,
    argument: str,
    value: str,
    context: Mapping[str, str],
    deadline: float,
) -> Completion:
    """The distinct values of ``argument``'s lookup field starting with ``value`` among the caller's rows.

    One query, for the first 101 values in byte order: 100 are answered, the 101st tells that there are more (then
    ``total`` is unknown and left out). A value the field cannot hold (in ``context``) names no record: nothing is
    completed. A template whose scope is declared runs the query compiled once (:class:`DeclaredCompletion`).
    """
    lookups = template.get_lookups()
    lookup = lookups.get(argument)
    if lookup is None:
        return Completion(values=[], total=0)
    filters = {lookups[name]: chosen for name, chosen in context.items() if name in lookups}
    if template.object_permissions:
        try:
            return complete_permitted(template, request, lookup, value, filters, deadline)
        except (ValueError, TypeError, ValidationError, OverflowError):
            return Completion(values=[], total=0)
    declared = None if filters else declared_completion(template)
    try:
        if declared is not None:
            owner = owner_of(request)
            if owner is None:
                return Completion(values=[], total=0)
            using = declared.using()
            with statement_timeout(using, remaining_ms(deadline)), cancellable_queries(request, using):
                values = declared.values(using, owner, lookup, value)
        else:
            values = None
        if values is None:
            queryset = template.get_queryset(request).filter(**filters)
            query = values_query(queryset, lookup, value, prefix_successor(value), strict=not value)
            with statement_timeout(query.db, remaining_ms(deadline)), cancellable_queries(request, query.db):
                values = list(query)
    except (ValueError, TypeError, ValidationError, OverflowError):
        return Completion(values=[], total=0)
    if len(values) > MAX_VALUES:
        return Completion(values=[str(v) for v in values[:MAX_VALUES]], total=None, has_more=True)
    return Completion(values=[str(v) for v in values], total=len(values))


CHECKED_RECORDS = 1_000
"""The most records one completion checks one by one, for a template that declares ``object_permissions``."""
_BATCH = MAX_VALUES + 1  # every record allowed, each with its own value: one query, as without the checks


def complete_permitted(
    template: ModelResourceTemplate,
    request: HttpRequest,
    lookup: str,
    value: str,
    filters: Mapping[str, Any],
    deadline: float,
) -> Completion:
    """The values of ``lookup`` starting with ``value`` among the caller's records that the template's
    ``has_object_permission`` allows (``object_permissions = True``): values only of records that read.

    The records are read in ``(value, pk)`` byte order, a batch at a time (keyset pages, never an offset), and
    checked one by one; a value is offered once, when a record holding it is allowed. At most
    :data:`CHECKED_RECORDS` records are checked: past them the answer says that there may be more.
    """
    queryset = template.get_queryset(request).filter(**filters)
    queryset = queryset.annotate(**{_VALUE: completion_expression(queryset.model, lookup, queryset.db)})
    queryset = queryset.filter(**{f"{_VALUE}__gte" if value else f"{_VALUE}__gt": value})
    upper = prefix_successor(value)
    if upper is not None:
        queryset = queryset.filter(**{f"{_VALUE}__lt": upper})
    values: list[Any] = []
    checked = 0
    after: tuple[Any, Any] | None = None
    while checked < CHECKED_RECORDS:
        page = queryset if after is None else queryset.filter(keyset_filter([_VALUE, "pk"], after))
        page = page.order_by(_VALUE, "pk")[:_BATCH]
        with statement_timeout(page.db, remaining_ms(deadline)), cancellable_queries(request, page.db):
            records = list(page)
        checked += len(records)
        # A value already offered needs no other record of it checked (the records come in value order).
        candidates = [obj for obj in records if not values or getattr(obj, _VALUE) != values[-1]]
        for obj, allowed in zip(candidates, template.has_object_permissions(request, candidates), strict=True):
            found = getattr(obj, _VALUE)
            if allowed and (not values or values[-1] != found):
                values.append(found)
                if len(values) > MAX_VALUES:
                    return Completion(values=[str(v) for v in values[:MAX_VALUES]], total=None, has_more=True)
        if len(records) < _BATCH:
            return Completion(values=[str(v) for v in values], total=len(values))
        after = (getattr(records[-1], _VALUE), records[-1].pk)
    return Completion(values=[str(v) for v in values], total=None, has_more=True)


def values_query(
    queryset: models.QuerySet[Any], lookup: str, lower: Any, upper: Any, *, strict: bool
) -> models.QuerySet[Any]:
    """The first ``MAX_VALUES + 1`` distinct values of ``lookup`` in ``queryset`` from ``lower`` (excluded when
    ``strict``) to ``upper`` (excluded; ``None``: no bound), in byte order."""
    expression = completion_expression(queryset.model, lookup, queryset.db)
    queryset = queryset.annotate(**{_VALUE: expression})
    queryset = queryset.filter(**{f"{_VALUE}__gt" if strict else f"{_VALUE}__gte": lower})
    if upper is not None:
        queryset = queryset.filter(**{f"{_VALUE}__lt": upper})
    return queryset.order_by(_VALUE).values_list(_VALUE, flat=True).distinct()[: MAX_VALUES + 1]


class DeclaredCompletion:
    """The completion query of a template whose scope is declared, compiled once per variable and range shape.

    The query of the queryset path, built on the template's own (default) ``get_queryset()`` for a caller whose
    user's primary key is a placeholder, and run through :class:`~mcp_resources.listing.compiled.CompiledQuery`
    with the owner and the range's bounds as parameters: whatever ``owner_field`` scopes (a foreign key, a path of
    relations), the compiled query scopes alike. ``None`` from :meth:`values` means: run the queryset instead. Used
    without ``context`` arguments only (their values are the client's, converted by the queryset path).
    """

    def __init__(self, template: ModelResourceTemplate) -> None:
        assert template.model is not None
        self.template = template
        user_pk = get_user_model()._meta.pk
        assert user_pk is not None
        self.query = CompiledQuery(
            f"the completion of {template.name!r}", self._build, [user_pk, TextField(), TextField()]
        )

    def _build(self, shape: tuple[str, bool, bool], owner: Any, lower: Any, upper: Any = None) -> models.QuerySet[Any]:
        lookup, strict, _bounded = shape
        queryset = self.template.get_queryset(_caller(owner))
        return values_query(queryset, lookup, lower, upper, strict=strict)

    def using(self) -> str:
        assert self.template.model is not None
        if self.template.queryset is not None:
            return self.template.queryset.db
        return router.db_for_read(self.template.model) or DEFAULT_DB_ALIAS

    def values(self, using: str, owner: Any, lookup: str, value: str) -> list[Any] | None:
        """The first 101 values of ``owner``'s rows starting with ``value``; ``None``: run the queryset instead."""
        upper = prefix_successor(value)
        parameters = [owner, value] if upper is None else [owner, value, upper]
        try:
            rows = self.query.rows(using, parameters, (lookup, not value, upper is not None))
        except ImproperlyConfigured:
            return None  # an owner_field that does not resolve (E019): the queryset raises it for the caller
        return None if rows is None else [row[0] for row in rows]


def _caller(owner: Any) -> HttpRequest:
    """A request of a signed-in user whose primary key is ``owner``: what the default ``get_queryset()`` reads."""
    from django.http import HttpRequest

    request = HttpRequest()
    request.user = SimpleNamespace(is_authenticated=True, pk=owner)  # type: ignore[assignment]
    return request


_declared: weakref.WeakKeyDictionary[ModelResourceTemplate, DeclaredCompletion | None] = weakref.WeakKeyDictionary()


def declared_completion(template: ModelResourceTemplate) -> DeclaredCompletion | None:
    """The compiled completion of ``template`` when its scope is declared (as for its listing), else ``None``."""
    try:
        return _declared[template]
    except KeyError:
        pass
    declared = scope_declared(template, fastpaths.COMPILED_COMPLETION)
    result = _declared[template] = DeclaredCompletion(template) if declared else None
    return result


def completion_expression(model: type[models.Model], lookup: str, using: str) -> Any:
    """``lookup`` as text compared in byte order: the field itself for text fields, else cast to text."""
    expression: Any = F(lookup)
    if not isinstance(_final_field(model, lookup), _TEXT_FIELDS):
        expression = Cast(expression, TextField())
    return byte_ordered(expression, using)


def _final_field(model: type[models.Model], lookup: str) -> Any:
    """The field ``lookup`` ends at (``pk`` and relation paths resolved), or ``None``."""
    current: Any = model
    found: Any = None
    for name in lookup.split("__"):
        try:
            found = current._meta.pk if name == "pk" else current._meta.get_field(name)
        except FieldDoesNotExist:
            return None
        if found.is_relation and found.related_model is not None:
            current = found.related_model
    return found


def prefix_successor(prefix: str) -> str | None:
    """The first string after every string that starts with ``prefix`` in code point (byte) order; ``None`` when
    there is none (an empty prefix, or one made of U+10FFFF only). Surrogates are skipped: no stored text holds one.
    """
    chars = list(prefix)
    while chars:
        code = ord(chars[-1]) + 1
        if code == 0xD800:
            code = 0xE000
        if code <= 0x10FFFF:
            chars[-1] = chr(code)
            return "".join(chars)
        chars.pop()
    return None
