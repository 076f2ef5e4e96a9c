"""Byte-order comparison of string keys on every database backend.

Keys and URIs are compared in byte (code point) order. SQLite's default ``BINARY`` collation already does that;
PostgreSQL needs ``COLLATE "C"`` on both the ``ORDER BY`` and the ``WHERE`` comparison, or a locale collation
would reorder keys and keyset pages would skip or repeat rows.
"""

from __future__ import annotations

from typing import Any

from django.db import connections
from django.db.models import F, QuerySet
from django.db.models.expressions import Expression
from django.db.models.functions import Collate


def byte_ordered(field: str, using: str = "default") -> Expression | F:
    """An expression for ``field`` that sorts and compares in byte order on the ``using`` database."""
    vendor = connections[using].vendor
    if vendor == "postgresql":
        return Collate(F(field), "C")
    if vendor == "mysql":
        return Collate(F(field), "utf8mb4_bin")
    return F(field)


def order_after(queryset: QuerySet[Any], field: str, after: str | None, limit: int) -> QuerySet[Any]:
    """Rows with ``field`` strictly after ``after`` in byte order, first ``limit`` of them."""
    key = byte_ordered(field, queryset.db)
    qs = queryset.annotate(_byte_key=key)
    if after is not None:
        qs = qs.filter(_byte_key__gt=after)
    return qs.order_by("_byte_key")[:limit]
