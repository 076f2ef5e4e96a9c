"""Keyset pagination over querysets: ``WHERE (ordering) > (last) ORDER BY ordering LIMIT n + 1``.

Never OFFSET, never a collection sliced in memory. Compound orderings are expanded into a condition whose first
conjunct starts an index range. String keys compare in byte (code point) order on every backend: SQLite's default
``BINARY`` collation already does; PostgreSQL needs ``COLLATE "C"`` on both the ``ORDER BY`` and the comparison,
or a locale collation would reorder keys and pages would skip or repeat rows.
"""

from __future__ import annotations

import datetime
import decimal
import uuid
from collections.abc import Sequence
from typing import Any

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
    if name == "pk":
        pk = model._meta.pk
        assert pk is not None
        return pk
    field = model._meta.get_field(name)
    assert isinstance(field, models.Field)
    return field


def _sort_expressions(queryset: QuerySet[Any], ordering: Sequence[str]) -> tuple[QuerySet[Any], list[str]]:
    """Annotate byte-ordered aliases for text fields; return the queryset and the names to order by."""
    names = []
    annotations = {}
    for i, name in enumerate(ordering):
        field = resolve_field(queryset.model, name)
        attname = field.name if name != "pk" else "pk"
        if isinstance(field, _TEXT_FIELDS):
            alias = f"_mcp_key_{i}"
            annotations[alias] = byte_ordered(field.name, queryset.db)
            names.append(alias)
        else:
            names.append(attname)
    if annotations:
        queryset = queryset.alias(**annotations)
    return queryset, names


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
