"""Keyset pagination over querysets: ``WHERE (ordering) > (last) ORDER BY ordering LIMIT n + 1``.

Never OFFSET, never a collection sliced in memory. Compound orderings are expanded into a condition whose first
conjunct starts an index range. String keys compare in byte (code point) order on every backend: SQLite's default
``BINARY`` collation already does; PostgreSQL needs ``COLLATE "C"`` on both the ``ORDER BY`` and the comparison,
or a locale collation would reorder keys and pages would skip or repeat rows.

An ordering field may follow forward relations (``organization__slug``): each hop a non-null ``ForeignKey`` or
``OneToOneField`` (``mcp_resources.E004`` refuses the others), so the join is an inner join that keeps each record
once with a non-null key. A key through a relation, and a foreign key itself, is ordered and compared through an
alias of its column (``F("organization__slug")``, byte-ordered for text): never through the related model's
``Meta.ordering``, which ``order_by("organization")`` would apply.
"""

from __future__ import annotations

import datetime
import decimal
import operator
import uuid
from collections.abc import Sequence
from typing import Any

from django.core.exceptions import FieldDoesNotExist
from django.db import connections, models
from django.db.models import F, Q, QuerySet
from django.db.models.expressions import Expression
from django.db.models.functions import Collate

from mcp_resources.exceptions import BadPosition

_TEXT_FIELDS = (models.CharField, models.TextField)


def byte_ordered(field: str | Expression, using: str = "default") -> Expression | F:
    """An expression for ``field`` (a field name or a text expression) that sorts and compares in byte order on
    the ``using`` database."""
    expression = F(field) if isinstance(field, str) else field
    vendor = connections[using].vendor
    if vendor == "postgresql":
        return Collate(expression, "C")
    if vendor == "mysql":
        return Collate(expression, "utf8mb4_bin")
    return expression


def order_after(queryset: QuerySet[Any], field: str, after: str | None, limit: int) -> QuerySet[Any]:
    """Rows with the text ``field`` strictly after ``after`` in byte order, the first ``limit`` of them."""
    qs = queryset.annotate(_byte_key=byte_ordered(field, queryset.db))
    if after is not None:
        qs = qs.filter(_byte_key__gt=after)
    return qs.order_by("_byte_key")[:limit]


def resolve_field(model: type[models.Model], name: str) -> models.Field[Any, Any]:
    """The concrete field an ordering name ends at: ``"pk"``, a field of ``model``, or a path through forward
    relations (``organization__slug``); ``FieldDoesNotExist`` for any other path."""
    current: Any = model
    parts = name.split("__")
    for index, part in enumerate(parts):
        field = current._meta.pk if part == "pk" else current._meta.get_field(part)
        if index == len(parts) - 1:
            assert isinstance(field, models.Field)
            return field
        if not (field.many_to_one or field.one_to_one) or not field.concrete or field.related_model is None:
            raise FieldDoesNotExist(f"{name!r} does not follow forward relations to one related record")
        current = field.related_model
    raise FieldDoesNotExist(name)  # pragma: no cover - split() returns at least one part


def follows_relation(model: type[models.Model], name: str) -> bool:
    """Whether the ordering name ``name`` is a path through a relation or a relation itself (a foreign key's
    value is its column): such a key is read from an alias of its column, not from the instance's own field."""
    return "__" in name or resolve_field(model, name).is_relation


def _sort_expressions(queryset: QuerySet[Any], ordering: Sequence[str]) -> tuple[QuerySet[Any], list[str]]:
    """Annotate byte-ordered aliases for text fields (and aliases of relation paths); return the queryset and the
    names to order by."""
    names = []
    annotations = {}
    for i, name in enumerate(ordering):
        field = resolve_field(queryset.model, name)
        if isinstance(field, _TEXT_FIELDS):
            alias = f"_mcp_key_{i}"
            annotations[alias] = byte_ordered(name if "__" in name else field.name, queryset.db)
            names.append(alias)
        elif follows_relation(queryset.model, name):
            alias = f"_mcp_key_{i}"
            annotations[alias] = F(name)
            names.append(alias)
        else:
            names.append(field.name if name != "pk" else "pk")
    if annotations:
        queryset = queryset.alias(**annotations)
    return queryset, names


def with_key_values(queryset: QuerySet[Any], ordering: Sequence[str]) -> tuple[QuerySet[Any], Any]:
    """``queryset`` selecting what a model instance does not hold of its ordering values (the values of relation
    paths, read in the page query itself: never a query per row), and a function giving an instance's key."""
    model = queryset.model
    getters: list[Any] = []
    annotations = {}
    for i, name in enumerate(ordering):
        if "__" in name:
            alias = f"_mcp_position_{i}"
            annotations[alias] = F(name)
            getters.append(operator.attrgetter(alias))
        else:
            getters.append(operator.attrgetter("pk" if name == "pk" else resolve_field(model, name).attname))
    if annotations:
        queryset = queryset.annotate(**annotations)
    return queryset, lambda obj: tuple([get(obj) for get in getters])


def keyset_filter(names: Sequence[str], values: Sequence[Any]) -> Q:
    """``(a, b, c) > (x, y, z)`` as ``a >= x AND (a > x OR (b >= y AND (b > y OR c > z)))``.

    The leading ``a >= x`` is what the planner turns into an index range start (a plain disjunction would be
    applied as a filter after scanning every earlier row); the nesting needs ``2n - 1`` comparisons for ``n``
    fields where the flat expansion ``a > x OR (a = x AND b > y) OR ...`` needs ``n(n + 1)/2``.
    """
    condition = Q(**{f"{names[-1]}__gt": values[-1]})
    for name, value in zip(reversed(names[:-1]), reversed(values[:-1]), strict=True):
        condition = Q(**{f"{name}__gte": value}) & (Q(**{f"{name}__gt": value}) | condition)
    return condition


def json_value(value: Any) -> Any:
    """An ordering value as a JSON-safe value for a cursor."""
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, uuid.UUID | decimal.Decimal):
        return str(value)
    return value


def encode_key(values: tuple[Any, ...]) -> list[Any]:
    """A listed row's keyset position (its ordering values, kept as a tuple of Python values until a cursor needs
    one: a page lists up to 100 rows and seals one position) as JSON-safe values."""
    return [json_value(value) for value in values]


def decode_position(model: type[models.Model], ordering: Sequence[str], raw: Any) -> list[Any]:
    if not isinstance(raw, list) or len(raw) != len(ordering):
        raise BadPosition("position does not match the ordering")
    values = []
    for name, value in zip(ordering, raw, strict=True):
        if value is None or isinstance(value, dict | list):
            raise BadPosition("bad position value")
        try:
            values.append(resolve_field(model, name).to_python(value))
        except Exception as exc:  # any conversion failure makes the cursor unusable
            raise BadPosition("bad position value") from exc
    return values


def keyset_queryset(
    queryset: QuerySet[Any], ordering: Sequence[str], after: Sequence[Any] | None, limit: int
) -> QuerySet[Any]:
    """The bounded keyset query: rows strictly after ``after`` in ``ordering``, ``limit + 1`` of them at most."""
    queryset, names = _sort_expressions(queryset, ordering)
    if after is not None:
        queryset = queryset.filter(keyset_filter(names, after))
    return queryset.order_by(*names)[: limit + 1]
