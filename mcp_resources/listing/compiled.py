"""Page queries compiled once and run again with new values: the listing of a template whose scope is declared.

Building and compiling a queryset costs Django's ORM more than running it. A template that declares its scope
(``owner_field``, with ``queryset`` for the rest, and neither ``get_queryset()`` nor ``base_queryset()``
overridden) lists with a query of fixed shape: only the owner, the keyset position and the page size change (the
owner is bound inside the ``EXISTS`` subquery of a membership path, ``project__members``, as anywhere else). Its
page query is therefore built once with placeholders (:class:`Slot`, a query expression compiling to ``%s``),
compiled by Django's own compiler for the connection in use, and each later page runs the same SQL through
``connection.cursor()`` with the new values, converted as the ORM converts them. The rows are exactly those of the
queryset; every page reads the database.

This module is the only one of the package that uses the ORM's compiler (``get_compiler``, ``as_sql``,
``get_converters``, ``apply_converters``: not documented API). It sits behind one call,
:meth:`CompiledQuery.rows`, which answers ``None`` whenever the query cannot be compiled this way, and the caller
then runs the plain queryset. ``tests/test_compiled_listing.py`` checks that both give identical pages and errors;
docs/performance.md gives the measured worth.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.db import connections
from django.db.models import Expression, Field, QuerySet
from django.db.models.lookups import Lookup
from django.db.models.sql import Query
from django.db.models.sql.where import WhereNode

from mcp_resources import fastpaths
from mcp_resources.listing.keyset import keyset_queryset, order_after, resolve_field
from mcp_resources.ownership import owner_path
from mcp_resources.resources import ModelResourceTemplate

logger = logging.getLogger("mcp_resources.listing")

_COMPARISONS = frozenset({"exact", "gt", "gte", "lt", "lte"})


class _Marker:
    """The parameter a :class:`Slot` compiles to, found again by identity among the compiled parameters."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index


class Slot(Expression):
    """A typed placeholder: ``%s`` wherever it is used, filled at run time with a value converted by its field."""

    def __init__(self, index: int, output_field: Field[Any, Any]) -> None:
        super().__init__(output_field=output_field)
        self.marker = _Marker(index)

    def as_sql(self, compiler: Any, connection: Any) -> Any:
        return "%s", [self.marker]


class NotCompilable(Exception):
    """The query cannot be run from compiled SQL (the caller runs the queryset instead)."""


@dataclass(frozen=True)
class _Compiled:
    connection: Any
    sql: str
    params: tuple[Any, ...]
    positions: tuple[tuple[int, ...], ...]
    compiler: Any
    converters: dict[int, Any]


class CompiledQuery:
    """A query built by ``build(shape, *slots)``, compiled once per thread, database and ``shape``.

    ``fields`` gives the field of each slot (its values are converted by ``get_db_prep_value``); ``shape`` is any
    hashable value the SQL depends on (the page size, whether a position is given).
    """

    def __init__(self, name: str, build: Callable[..., QuerySet[Any]], fields: Sequence[Field[Any, Any]]) -> None:
        self.name = name
        self.build = build
        self.fields = tuple(fields)
        self.slots = tuple(Slot(i, field) for i, field in enumerate(self.fields))
        self._local = threading.local()
        self.failed = False
        _instances.add(self)

    def rows(self, using: str, values: Sequence[Any], shape: Hashable) -> list[tuple[Any, ...]] | None:
        """The rows of the query for ``values`` (the first ``len(values)`` slots) on ``using``, as ``values_list``
        returns them; ``None`` when the query cannot be compiled (run the queryset instead)."""
        if self.failed:
            return None
        try:
            compiled = self._compiled(using, shape, len(values))
        except NotCompilable as exc:
            logger.info("%s runs through the ORM on every page: %s", self.name, exc)
            self.failed = True
            return None
        connection = compiled.connection
        params = list(compiled.params)
        for field, value, positions in zip(self.fields, values, compiled.positions, strict=False):
            prepared = field.get_db_prep_value(value, connection, prepared=False)
            for position in positions:
                params[position] = prepared
        with connection.cursor() as cursor:
            cursor.execute(compiled.sql, params)
            rows = cursor.fetchall()
        if compiled.converters:
            return [tuple(row) for row in compiled.compiler.apply_converters(rows, compiled.converters)]
        return [tuple(row) for row in rows]

    def forget(self) -> None:
        """Drop this thread's compiled SQL (settings changed)."""
        self._local.__dict__.pop("compiled", None)

    def _compiled(self, using: str, shape: Hashable, used: int) -> _Compiled:
        cache: dict[tuple[str, Hashable], _Compiled] = self._local.__dict__.setdefault("compiled", {})
        compiled = cache.get((using, shape))
        if compiled is None or compiled.connection is not connections[using]:
            compiled = cache[(using, shape)] = self._compile(using, shape, used)
        return compiled

    def _compile(self, using: str, shape: Hashable, used: int) -> _Compiled:
        queryset = self.build(shape, *self.slots[:used]).using(using)
        _check_slot_lookups(queryset.query.where)
        compiler = queryset.query.get_compiler(using)
        try:
            sql, params = compiler.as_sql()
        except Exception as exc:  # an expression that cannot compile this way
            raise NotCompilable(f"compiling failed: {exc!r}") from exc
        params = tuple(params)
        positions = []
        for slot in self.slots[:used]:
            found = tuple(i for i, param in enumerate(params) if param is slot.marker)
            if not found:
                raise NotCompilable("a placeholder is missing from the compiled parameters")
            positions.append(found)
        if any(isinstance(param, _Marker) for i, param in enumerate(params) if not any(i in p for p in positions)):
            raise NotCompilable("a placeholder of another query is among the compiled parameters")
        converters = compiler.get_converters([column for column, _, _ in compiler.select])
        return _Compiled(connections[using], sql, params, tuple(positions), compiler, converters)


def _check_slot_lookups(node: Any) -> None:
    """A slot may only be compared: a pattern lookup (``startswith``) would take it unescaped. Subqueries (the
    ``EXISTS`` of a membership path) are checked as well."""
    if isinstance(node, Lookup) and isinstance(node.rhs, Slot) and node.lookup_name not in _COMPARISONS:
        raise NotCompilable(f"a placeholder is used by the lookup {node.lookup_name!r}")
    if isinstance(node, Query):
        _check_slot_lookups(node.where)
        return
    children = node.children if isinstance(node, WhereNode) else getattr(node, "get_source_expressions", list)()
    for child in children:
        if child is not None:
            _check_slot_lookups(child)


class DeclaredListing:
    """The page queries of a template whose scope is declared: the first page, and the pages after a position."""

    def __init__(self, template: ModelResourceTemplate, columns: Sequence[str]) -> None:
        assert template.model is not None
        assert template.owner_field is not None
        self.template = template
        self.owner = owner_path(template.model, template.owner_field)
        self.ordering = list(template.ordering)
        self.columns = tuple(columns)
        keys = [resolve_field(template.model, name) for name in self.ordering]
        self.query = CompiledQuery(f"the listing of {template.name!r}", self._build, [self.owner.value_field, *keys])

    def _build(self, shape: tuple[int, bool], owner: Any, *position: Any) -> QuerySet[Any]:
        limit, _ = shape
        queryset = self.template.base_queryset().filter(self.owner.scope(owner))
        return keyset_queryset(queryset, self.ordering, list(position) or None, limit).values_list(*self.columns)

    def rows(self, using: str, owner: Any, position: Sequence[Any] | None, limit: int) -> list[tuple[Any, ...]] | None:
        """Up to ``limit + 1`` value rows of ``owner``'s records after ``position``; ``None``: use the queryset."""
        values = [owner, *(position or ())]
        return self.query.rows(using, values, (limit, position is not None))


_declared: weakref.WeakKeyDictionary[ModelResourceTemplate, DeclaredListing | None] = weakref.WeakKeyDictionary()


def scope_declared(template: ModelResourceTemplate, *paths: str) -> bool:
    """Whether ``template`` declares ``paths`` and the scope a compiled query is built from: ``owner_field`` over
    rows that cannot change per request, and no per-record permission."""
    return (
        all(path in template.fast_paths for path in paths)
        and template.model is not None
        and template.fixed_rows  # never a manager that may filter per request
        and template.owner_field is not None
        and not template.object_permissions  # each record is checked by the template
    )


def declared_listing(template: ModelResourceTemplate, columns: Sequence[str]) -> DeclaredListing | None:
    """The compiled page queries of ``template`` when its scope is declared, else ``None`` (computed once)."""
    try:
        return _declared[template]
    except KeyError:
        pass
    listing = None
    if scope_declared(template, fastpaths.COMPILED_LISTING):
        try:
            listing = DeclaredListing(template, columns)
        except ImproperlyConfigured:
            listing = None  # an owner_field that does not resolve (E019): the queryset raises it for the caller
    _declared[template] = listing
    return listing


class DeclaredAccess:
    """The access query of a template whose scope is declared: whether the owner's records hold the one a URI's
    variables name (:meth:`~mcp_resources.resources.ModelResourceTemplate.get_object`'s answer, without the object)."""

    def __init__(self, template: ModelResourceTemplate, targets: dict[str, Field[Any, Any]]) -> None:
        assert template.model is not None
        assert template.owner_field is not None
        self.template = template
        self.owner = owner_path(template.model, template.owner_field)
        self.lookups = {variable: template.get_lookups()[variable] for variable in targets}
        self.fields = list(targets.values())
        self.query = CompiledQuery(
            f"the access check of {template.name!r}", self._build, [self.owner.value_field, *self.fields]
        )

    def _build(self, shape: None, owner: Any, *values: Any) -> QuerySet[Any]:
        queryset = self.template.base_queryset().filter(self.owner.scope(owner))
        return queryset.filter(**dict(zip(self.lookups.values(), values, strict=True))).values_list("pk")[:2]

    def holds(self, owner: Any, variables: Mapping[str, Any]) -> bool | None:
        """Whether ``owner``'s records hold the record of ``variables`` (``False`` for a value that names no row, as
        ``get_object`` finds none); ``None`` when ``get_object`` must answer (not compiled, or two rows match)."""
        values = [variables[variable] for variable in self.lookups]
        using = self.template.base_queryset().db
        connection = connections[using]
        for field, value in zip(self.fields, values, strict=True):
            if isinstance(value, str) and "\x00" in value:
                return False  # a NUL (from "%00") names no row
            try:
                prepared = field.get_db_prep_value(value, connection, prepared=False)
            except (ValidationError, ValueError, TypeError, OverflowError):
                return False
            target = getattr(field, "target_field", field)  # a foreign key compares its target's values
            low, high = connection.ops.integer_field_ranges.get(target.get_internal_type(), (None, None))
            if (
                prepared is not None
                and isinstance(prepared, int)
                and not ((low is None or prepared >= low) and (high is None or prepared <= high))
            ):
                return False  # out of the column's range: the ORM finds no row (it never sends the value)
        rows = self.query.rows(using, [owner, *values], None)
        if rows is None or len(rows) > 1:
            return None  # get_object raises MultipleObjectsReturned for two
        return bool(rows)


_accesses: weakref.WeakKeyDictionary[ModelResourceTemplate, DeclaredAccess | None] = weakref.WeakKeyDictionary()


def declared_access(template: ModelResourceTemplate) -> DeclaredAccess | None:
    """The compiled access query of ``template`` when its scope and lookups are declared, else ``None`` (computed
    once)."""
    try:
        return _accesses[template]
    except KeyError:
        pass
    access = None
    if scope_declared(template, fastpaths.COMPILED_ACCESS, fastpaths.OBJECT_ACCESS):
        targets = {variable: field for variable, field in template._lookup_targets().items() if field is not None}
        if targets and len(targets) == len(template.get_lookups()):  # every lookup compares a field of its own
            try:
                access = DeclaredAccess(template, targets)
            except ImproperlyConfigured:
                access = None  # an owner_field that does not resolve (E019): the queryset raises it for the caller
    _accesses[template] = access
    return access


class StaticListing:
    """The page query of the admin's static resources (``StaticResource`` rows) without a prefix."""

    def __init__(self, columns: Sequence[str]) -> None:
        from mcp_resources.models import StaticResource

        self.model = StaticResource
        self.columns = tuple(columns)
        self.query = CompiledQuery(
            "the static resources' listing", self._build, [StaticResource._meta.get_field("uri")]
        )

    def _build(self, shape: tuple[int, bool], after: Any = None) -> QuerySet[Any]:
        limit, _ = shape
        queryset = self.model._default_manager.filter(enabled=True)
        return order_after(queryset, "uri", after, limit).values_list(*self.columns)

    def rows(self, using: str, after: str | None, limit: int) -> list[tuple[Any, ...]] | None:
        """Up to ``limit`` enabled rows after the URI ``after`` in byte order; ``None``: use the queryset."""
        return self.query.rows(using, [] if after is None else [after], (limit, after is not None))


_instances: weakref.WeakSet[CompiledQuery] = weakref.WeakSet()


def settings_changed(setting: str) -> None:
    """Forget the compiled queries when a setting they depend on changes (``override_settings``; connected in
    :mod:`mcp_resources.receivers`)."""
    # Only this thread's copies can be dropped here; other threads compile again when their connection changes.
    if setting in ("DATABASES", "USE_TZ", "AUTH_USER_MODEL"):
        for query in _instances:
            query.forget()
            query.failed = False
