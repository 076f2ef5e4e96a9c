"""Keyset pagination over querysets (compound orderings) and prefix push-down into queryset filters.

Every page is ``WHERE (ordering) > (last) ORDER BY ordering LIMIT n + 1``: never OFFSET, never a collection
sliced in memory. String fields compare in byte order on every backend (see :mod:`mcp_resources.ordering`).
"""

from __future__ import annotations

import contextlib
import datetime
import decimal
import functools
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from django.conf import settings
from django.db import connections, models, transaction
from django.db.models import Q, QuerySet

from mcp_resources.ordering import byte_ordered
from mcp_resources.uris import SIMPLE_CLASS, Literal, URITemplate, Variable

_TEXT_FIELDS = (models.CharField, models.TextField)


class BadPosition(ValueError):
    """A stored keyset position does not fit the ordering (the cursor is unusable)."""


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


def encode_position(obj: models.Model, ordering: Sequence[str]) -> list[Any]:
    """The ordering values of ``obj`` as JSON-safe values for a cursor."""
    return [json_value(value) for value in position_values(obj, ordering)]


def position_values(obj: models.Model, ordering: Sequence[str]) -> tuple[Any, ...]:
    """The ordering values of ``obj`` as Python values."""
    return tuple(obj.pk if name == "pk" else getattr(obj, resolve_field(type(obj), name).attname) for name in ordering)


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


def keyset_page(
    queryset: QuerySet[Any], ordering: Sequence[str], after: Sequence[Any] | None, limit: int
) -> tuple[list[Any], bool]:
    """At most ``limit`` rows strictly after ``after`` in ``ordering``, and whether more exist."""
    rows = list(keyset_queryset(queryset, ordering, after, limit))
    return rows[:limit], len(rows) > limit


@contextlib.contextmanager
def statement_timeout(using: str, milliseconds: int) -> Iterator[None]:
    """Bound every query inside the block on PostgreSQL to ``milliseconds``; nothing outlives the block.

    In autocommit mode each query carries its own timeout, at no extra round trip:

    - with client-side parameter binding (Django's default for psycopg 3, and psycopg 2) the query is sent as
      ``SET LOCAL statement_timeout = N; <query>`` in one simple-protocol message;
    - with server-side binding (``OPTIONS["server_side_binding"]``, which lets psycopg prepare statements) the
      query follows ``set_config('statement_timeout', N, true)`` in one pipeline sync.

    Either way PostgreSQL runs both as one implicit transaction, so the timeout applies to the query and ends with
    it. Inside an enclosing transaction the block runs in a savepoint with ``SET LOCAL`` and the previous value is
    restored afterwards.
    """
    connection = connections[using]
    if connection.vendor != "postgresql" or milliseconds <= 0:
        yield
        return
    connection.ensure_connection()
    if not connection.in_atomic_block and connection.get_autocommit():
        if client_side_binding(connection):
            with connection.execute_wrapper(_TimeoutPrefix(int(milliseconds))):
                yield
            return
        if pipeline_supported():
            with connection.execute_wrapper(_TimeoutPipeline(int(milliseconds))):
                yield
            return
    # Inside an enclosing transaction (ATOMIC_REQUESTS, tests) SET LOCAL would outlive this block, since releasing
    # a savepoint keeps it: restore the previous value. A rolled-back savepoint undoes the SET by itself.
    nested = connection.in_atomic_block
    with transaction.atomic(using=using):
        with connection.cursor() as cursor:
            previous = None
            if nested:
                cursor.execute("SELECT current_setting('statement_timeout')")
                previous = cursor.fetchone()[0]
            cursor.execute(_SET_TIMEOUT, [str(int(milliseconds))])  # SET takes no parameter with server binding
        yield
        if previous is not None:
            with connection.cursor() as cursor:
                cursor.execute(_SET_TIMEOUT, [previous])


def client_side_binding(connection: Any) -> bool:
    """Whether queries reach PostgreSQL as one simple-protocol message (several statements allowed)."""
    from django.db.backends.postgresql.psycopg_any import is_psycopg3

    if not is_psycopg3:
        return True  # psycopg 2 always interpolates on the client
    return not connection.settings_dict.get("OPTIONS", {}).get("server_side_binding")


@functools.cache
def pipeline_supported() -> bool:
    """Whether the driver is psycopg 3 with a libpq that has pipeline mode (PostgreSQL 14's libpq and later)."""
    from django.db.backends.postgresql.psycopg_any import is_psycopg3

    if not is_psycopg3:
        return False
    import psycopg

    return bool(psycopg.Pipeline.is_supported())


def in_pipeline(raw: Any) -> bool:
    """Whether the psycopg connection ``raw`` is in pipeline mode (its commands wait for the next sync)."""
    from psycopg import pq

    return bool(raw.pgconn.pipeline_status != pq.PipelineStatus.OFF)


class _TimeoutPipeline:
    """An execute wrapper queueing ``set_config('statement_timeout', N, true)`` before each query, in one pipeline.

    Statements between two pipeline syncs run as one implicit transaction in autocommit mode, so the timeout is
    local to the query. Inside a pipeline opened by the caller (:func:`mcp_resources.precompiled.rows_together`)
    both are queued there, and the caller's sync sends them.
    """

    def __init__(self, milliseconds: int) -> None:
        self.value = str(int(milliseconds))

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: dict[str, Any]) -> Any:
        if many:
            return execute(sql, params, many, context)
        connection = context["connection"]
        raw = connection.connection
        if in_pipeline(raw):
            raw.execute(_SET_TIMEOUT, [self.value])
            return execute(sql, params, many, context)
        with connection.wrap_database_errors, raw.pipeline():
            raw.execute(_SET_TIMEOUT, [self.value])
            return execute(sql, params, many, context)


_SET_TIMEOUT = "SELECT set_config('statement_timeout', %s, true)"


class _TimeoutPrefix:
    """An execute wrapper sending ``SET LOCAL statement_timeout`` in the same message as each query."""

    def __init__(self, milliseconds: int) -> None:
        self.prefix = f"SET LOCAL statement_timeout = {int(milliseconds)}; "

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: dict[str, Any]) -> Any:
        if many:
            return execute(sql, params, many, context)
        result = execute(self.prefix + sql, params, many, context)
        cursor = context["cursor"]
        if cursor.description is None:
            # psycopg 3 positions the cursor on the first result (the SET): move to the query's.
            cursor.nextset()
        return result


@contextlib.contextmanager
def native_timestamps(using: str) -> Iterator[None]:
    """Read ``timestamptz`` columns with psycopg's own (C) loader for the queries inside the block.

    Django loads every ``timestamptz`` through a Python subclass of psycopg's loader that re-attaches its own
    ``tzinfo`` (about 6 µs a value, a third of a 100-row page here). With ``USE_TZ`` on and the session time zone
    the one Django expects (Django sets it), psycopg's loader returns the same aware datetimes, tzinfo
    included: the block registers it on each query's cursor, and nothing else changes. Elsewhere (SQLite,
    psycopg 2, ``USE_TZ`` off, a session time zone that differs) the block does nothing.
    """
    connection = connections[using]
    if connection.vendor != "postgresql" or not settings.USE_TZ:
        yield
        return
    from django.db.backends.postgresql.psycopg_any import is_psycopg3

    if not is_psycopg3:
        yield
        return
    connection.ensure_connection()
    if connection.connection.info.timezone != connection.timezone:
        yield
        return
    with connection.execute_wrapper(_register_native_timestamps):
        yield


def _register_native_timestamps(execute: Any, sql: str, params: Any, many: bool, context: dict[str, Any]) -> Any:
    from psycopg.types.datetime import TimestamptzLoader

    # psycopg substitutes its C implementation for this class when it is available.
    context["cursor"].cursor.adapters.register_loader("timestamptz", TimestamptzLoader)
    return execute(sql, params, many, context)


# Prefix push-down -------------------------------------------------------------------------------------------


def prefix_variables(template: URITemplate, prefix: str) -> tuple[dict[str, str], tuple[str, str] | None] | None:
    """Split ``prefix`` along ``template``.

    Returns ``(complete, partial)``: the values of variables the prefix completes, and ``(name, start)`` for a
    variable the prefix ends inside (or ``None``); returns ``None`` when no URI of the template can start with
    ``prefix``. The result is a superset filter: callers still check every URI against the prefix.
    """
    import re
    from urllib.parse import unquote, unquote_to_bytes

    rest = prefix
    complete: dict[str, str] = {}
    parts = template.parts
    for index, part in enumerate(parts):
        if not rest:
            return complete, None
        if isinstance(part, Literal):
            if part.text.startswith(rest):
                return complete, None
            if not rest.startswith(part.text):
                return None
            rest = rest[len(part.text) :]
            continue
        assert isinstance(part, Variable)
        nxt = parts[index + 1] if index + 1 < len(parts) else None
        stop = None
        if not part.reserved and isinstance(nxt, Literal) and not re.fullmatch(SIMPLE_CLASS, nxt.text[0]):
            stop = rest.find(nxt.text[0])
        if stop is None or stop < 0:
            if isinstance(nxt, Literal) and nxt.text[0] in rest:
                # The variable's end cannot be told from the prefix: filter nothing here (a superset).
                return complete, None
            if part.reserved:
                return complete, (part.name, rest)
            value = re.sub(r"%[0-9A-Fa-f]?$", "", rest)
            if not re.fullmatch(f"{SIMPLE_CLASS}*", value):
                return None
            raw_value = unquote_to_bytes(value)
            try:
                start = raw_value.decode()
            except UnicodeDecodeError as exc:
                if exc.reason != "unexpected end of data":
                    return None  # not UTF-8: no expanded URI holds it
                # The prefix ends inside a percent-encoded character: filter on the characters before it.
                start = raw_value[: exc.start].decode()
            return complete, (part.name, start)
        raw = rest[:stop]
        if not raw or not re.fullmatch(f"{SIMPLE_CLASS}+", raw):
            return None
        complete[part.name] = raw if part.reserved else unquote(raw)
        rest = rest[stop:]
    return (complete, None) if not rest else None
