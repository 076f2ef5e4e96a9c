"""Settings for the app's own queries on PostgreSQL: a statement timeout, and psycopg's own timestamp loader.

Both are context managers around a query (a listing's page, a bearer token's row); elsewhere they do nothing.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.db import connections, transaction


@contextlib.contextmanager
def statement_timeout(using: str, milliseconds: int) -> Iterator[None]:
    """Bound every query inside the block on PostgreSQL to ``milliseconds``; nothing outlives the block.

    In autocommit mode each query carries its own timeout, at no extra round trip; PostgreSQL runs the two as one
    implicit transaction, so the timeout applies to that query alone:

    - with client-side parameter binding (Django's default for psycopg) the query is sent as
      ``SET LOCAL statement_timeout = N; <query>`` in one message;
    - with server-side binding (``OPTIONS["server_side_binding"]``, which lets psycopg prepare repeated statements)
      ``set_config('statement_timeout', N, true)`` and the query are sent in one pipeline sync (psycopg's pipeline
      mode, PostgreSQL 14's libpq and later).

    Otherwise (inside an enclosing transaction, or without pipeline mode) the block runs in ``atomic()`` after
    ``SET LOCAL``, and an enclosing transaction gets its previous value back afterwards.
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


_SET_TIMEOUT = "SELECT set_config('statement_timeout', %s, true)"


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


class _TimeoutPipeline:
    """An execute wrapper sending ``set_config('statement_timeout', N, true)`` and each query in one pipeline sync.

    The query itself still runs through Django's cursor (query logging, other execute wrappers); only the timeout
    is queued on the driver's connection (``connection.connection``) first.
    """

    def __init__(self, milliseconds: int) -> None:
        self.value = str(int(milliseconds))

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: dict[str, Any]) -> Any:
        if many:
            return execute(sql, params, many, context)
        connection = context["connection"]
        raw = connection.connection
        with connection.wrap_database_errors, raw.pipeline():
            raw.execute(_SET_TIMEOUT, [self.value])
            return execute(sql, params, many, context)


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
