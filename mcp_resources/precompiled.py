"""Queries of this app compiled once per thread and database connection, then executed with new values.

Building and compiling a queryset costs the ORM about as much as a round trip to the database. The app's own
fixed-shape queries (the token lookup, the static resources of a listing) are therefore compiled once: the
queryset is built with placeholder values, compiled by Django's own compiler for the connection in use, and each
later call executes that SQL with the placeholders replaced and applies the compiler's converters to the rows, so
the values are exactly those a queryset would return. Only the SQL text is kept; every call reads the database.

Placeholders are strings and stand for values compared with text columns; they must reach the SQL as plain
parameters (``field=value``, ``field__gt=value``...). A lookup that rewrites its value (``startswith`` builds a
LIKE pattern) cannot take one, and compiling such a query raises.

Typed placeholders (``fields=``) are :class:`Slot` expressions: each compiles to ``%s`` and may appear several
times; at run time its value is converted with its field's ``get_db_prep_value``, as the ORM converts the
right-hand side of a comparison. They may only be compared (``exact``, ``gt``, ``gte``, ``lt``, ``lte``).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from django.core.signals import setting_changed
from django.db import DatabaseError, connections
from django.db.models import Expression, Field, QuerySet
from django.db.models.sql.where import WhereNode

from mcp_resources import prepared
from mcp_resources.pagination import client_side_binding, pipeline_supported
from mcp_resources.prepared import PreparedForm, prepared_form


@dataclass(frozen=True)
class _Compiled:
    connection: Any
    dependencies: tuple[Any, ...]
    sql: str
    params: tuple[Any, ...]
    positions: tuple[tuple[int, ...], ...]
    compiler: Any
    converters: dict[int, Any]
    prepared: PreparedForm | None  # where PREPARE/EXECUTE applies (mcp_resources.prepared)


class Placeholder(str):
    """A value standing in for a parameter at compile time (a distinct string per placeholder)."""

    __slots__ = ()


class _Marker:
    """The parameter a :class:`Slot` compiles to, found by identity (shared by the slot's copies)."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index


class Slot(Expression):
    """A typed placeholder: one ``%s`` per use, filled at run time with a value converted by ``output_field``."""

    def __init__(self, index: int, output_field: Field[Any, Any]) -> None:
        super().__init__(output_field=output_field)
        self.marker = _Marker(index)

    def as_sql(self, compiler: Any, connection: Any) -> Any:
        return "%s", [self.marker]


_COMPARISONS = frozenset({"exact", "gt", "gte", "lt", "lte"})


def _check_slot_lookups(node: Any) -> None:
    """Refuse a slot used by anything but a plain comparison (a LIKE pattern would take it unescaped)."""
    for child in getattr(node, "children", ()):
        if isinstance(child, WhereNode):
            _check_slot_lookups(child)
        elif isinstance(getattr(child, "rhs", None), Slot) and getattr(child, "lookup_name", None) not in _COMPARISONS:
            raise RuntimeError(f"a typed placeholder is used by the lookup {child.lookup_name!r}: only comparisons")


class PrecompiledQuery:
    """A query built by ``build(shape, *placeholders)`` and compiled once per thread, connection and ``shape``.

    ``shape`` is any hashable value the query's SQL depends on (a LIMIT, whether a condition is present);
    ``dependencies()`` returns what else it depends on (swappable models), compared by identity on each call.
    With ``fields`` (one per placeholder) the placeholders are typed :class:`Slot` expressions.
    """

    def __init__(
        self,
        name: str,
        build: Callable[..., QuerySet[Any]],
        arity: int = 0,
        dependencies: Callable[[], tuple[Any, ...]] = tuple,
        fields: Sequence[Field[Any, Any]] | None = None,
    ) -> None:
        self.fields = tuple(fields) if fields is not None else None
        self.placeholders: tuple[Any, ...] = (
            tuple(Slot(i, field) for i, field in enumerate(self.fields))
            if self.fields is not None
            else tuple(Placeholder(f"\x00mcp_resources.{name}.{i}\x00") for i in range(arity))
        )
        self.build = build
        self.dependencies = dependencies
        self._local = threading.local()
        _instances.add(self)

    def rows(self, using: str, values: Sequence[Any], shape: Hashable = None) -> list[tuple[Any, ...]]:
        """The rows of the query for ``values`` (one per placeholder) on database ``using``."""
        return rows_together([self.statement(using, values, shape)])[0]

    def statement(self, using: str, values: Sequence[Any], shape: Hashable = None) -> Statement:
        """The query for ``values`` as SQL and parameters, to run alone or with others (:func:`rows_together`)."""
        compiled = self._compiled(using, shape)
        params = list(compiled.params)
        if self.fields is not None:
            connection = compiled.connection
            values = [
                field.get_db_prep_value(value, connection, prepared=False)
                for field, value in zip(self.fields, values, strict=True)
            ]
        for positions, value in zip(compiled.positions, values, strict=True):
            for position in positions:
                params[position] = value
        return Statement(compiled, params)

    def forget(self) -> None:
        """Drop this thread's compiled SQL (done when settings change)."""
        self._local.__dict__.pop("compiled", None)

    def _compiled(self, using: str, shape: Hashable) -> _Compiled:
        cache: dict[tuple[str, Hashable], _Compiled] = self._local.__dict__.setdefault("compiled", {})
        compiled = cache.get((using, shape))
        dependencies = self.dependencies()
        if (
            compiled is None
            or compiled.connection is not connections[using]
            or len(compiled.dependencies) != len(dependencies)
            or any(a is not b for a, b in zip(compiled.dependencies, dependencies, strict=True))
        ):
            compiled = cache[(using, shape)] = self._compile(using, shape, dependencies)
        return compiled

    def _compile(self, using: str, shape: Hashable, dependencies: tuple[Any, ...]) -> _Compiled:
        queryset = self.build(shape, *self.placeholders).using(using)
        compiler = queryset.query.get_compiler(using)
        sql, params = compiler.as_sql()
        params = tuple(params)
        positions: list[tuple[int, ...]] = []
        if self.fields is not None:
            _check_slot_lookups(queryset.query.where)
            for slot in self.placeholders:
                found = tuple(i for i, param in enumerate(params) if param is slot.marker)
                if not found:
                    raise RuntimeError("a typed placeholder is missing from the compiled parameters")
                positions.append(found)
        else:
            for placeholder in self.placeholders:
                found = tuple(i for i, param in enumerate(params) if param == placeholder)
                if len(found) != 1:
                    raise RuntimeError(f"a placeholder appears {len(found)} times among the compiled parameters")
                positions.append(found)
            taken = {position for found in positions for position in found}
            for i, param in enumerate(params):
                if i not in taken and isinstance(param, str) and "\x00mcp_resources." in param:
                    raise RuntimeError("a placeholder was rewritten by its lookup: the query cannot be precompiled")
        converters = compiler.get_converters([column for column, _, _ in compiler.select])
        connection = connections[using]
        preparable = connection.vendor == "postgresql" and client_side_binding(connection)
        return _Compiled(
            connection=connection,
            dependencies=dependencies,
            sql=sql,
            params=params,
            positions=tuple(positions),
            compiler=compiler,
            converters=converters,
            prepared=prepared_form(sql, len(params)) if preparable else None,
        )


class Statement:
    """One execution of a precompiled query: its SQL, its parameters, and the conversion of its rows."""

    __slots__ = ("compiled", "params")

    def __init__(self, compiled: _Compiled, params: list[Any]) -> None:
        self.compiled = compiled
        self.params = params

    @property
    def connection(self) -> Any:
        return self.compiled.connection

    @property
    def sql(self) -> str:
        """The query's SQL (what :meth:`execution` sends when the query is not prepared)."""
        return self.compiled.sql

    def execution(self) -> str:
        """The SQL to send with :attr:`params`: the ``EXECUTE`` of its prepared statement where the connection has
        it or can prepare it now (:mod:`mcp_resources.prepared`), else :attr:`sql`."""
        return prepared.execution(self.compiled.connection, self.compiled.prepared, self.compiled.sql)

    def finish(self, rows: list[Any]) -> list[tuple[Any, ...]]:
        """The fetched rows with the compiler's converters applied, as a queryset would return them."""
        compiled = self.compiled
        if compiled.converters:
            return [tuple(row) for row in compiled.compiler.apply_converters(rows, compiled.converters)]
        return rows


def together_supported(connection: Any) -> bool:
    """Whether several statements can be sent in one round trip on ``connection``, each result read in turn:
    PostgreSQL with psycopg 3, in one message with client-side binding (Django's default; psycopg 2 returns only
    the last result), or in one pipeline sync with server-side binding."""
    if connection.vendor != "postgresql":
        return False
    from django.db.backends.postgresql.psycopg_any import is_psycopg3

    return bool(is_psycopg3) and (client_side_binding(connection) or pipeline_supported())


def rows_together(statements: Sequence[Statement]) -> list[list[tuple[Any, ...]]]:
    """The rows of each statement, all sent in one round trip where :func:`together_supported`, else one after
    the other. The statements must share one connection."""
    connection = statements[0].connection
    if any(statement.connection is not connection for statement in statements):
        raise ValueError("statements of different connections cannot run together")
    together = len(statements) > 1 and together_supported(connection)
    if together and not client_side_binding(connection):
        return _rows_pipelined(connection, statements)
    connection.ensure_connection()
    if not together:
        return [_rows_of([statement])[0] for statement in statements]
    return _rows_of(statements)


def _rows_of(statements: Sequence[Statement]) -> list[list[tuple[Any, ...]]]:
    """The rows of ``statements`` sent in one message (prepared where they can be). Should the server connection
    have lost a prepared statement, the plain SQL is sent again at once."""
    connection = statements[0].connection
    with connection.cursor() as cursor:
        sent = [statement.execution() for statement in statements]
        params = [p for s in statements for p in s.params]
        try:
            cursor.execute("; ".join(sent), params)
        except DatabaseError as exc:
            if all(sql == s.sql for sql, s in zip(sent, statements, strict=True)) or not prepared.missed(
                connection, exc
            ):
                raise
            cursor.execute("; ".join(s.sql for s in statements), params)
        results = [statements[0].finish(cursor.fetchall())]
        for statement in statements[1:]:
            if not cursor.nextset():
                raise RuntimeError("a statement sent together returned no result")
            results.append(statement.finish(cursor.fetchall()))
        return results


def _rows_pipelined(connection: Any, statements: Sequence[Statement]) -> list[list[tuple[Any, ...]]]:
    """:func:`rows_together` with server-side binding: one cursor a statement, all queued in one pipeline sync
    (in autocommit mode, one implicit transaction), and each cursor read after the sync."""
    connection.ensure_connection()
    cursors = [connection.cursor() for _ in statements]
    try:
        with connection.wrap_database_errors, connection.connection.pipeline():
            for cursor, statement in zip(cursors, statements, strict=True):
                cursor.execute(statement.sql, statement.params)
        return [statement.finish(cursor.fetchall()) for cursor, statement in zip(cursors, statements, strict=True)]
    finally:
        for cursor in cursors:
            cursor.close()


_instances: weakref.WeakSet[PrecompiledQuery] = weakref.WeakSet()


def _forget(*, setting: str, **kwargs: Any) -> None:
    # Only the current thread's copies can be dropped here; other threads recompile when their connection or a
    # dependency differs from the one they compiled for.
    if setting in ("AUTH_USER_MODEL", "OAUTH2_PROVIDER", "DATABASES", "OAUTH2_PROVIDER_ACCESS_TOKEN_MODEL", "USE_TZ"):
        for query in _instances:
            query.forget()


setting_changed.connect(_forget, dispatch_uid="mcp_resources.precompiled.forget")
