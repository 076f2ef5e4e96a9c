"""Server-side prepared statements for the app's precompiled queries, on PostgreSQL with client-side binding.

The token lookup, a listing's static resources and a declared-scope page run on every request with the same SQL
text, and PostgreSQL parses and plans an unprepared query every time: about half of its CPU per request on the
benchmark machine. psycopg prepares statements only with server-side binding, which Django leaves off (and which
costs more Python per query than it saves here, see docs/benchmarks.md). So the precompiled queries are prepared in
SQL: once per connection ``PREPARE mcp_<digest> AS <query>``, then ``EXECUTE mcp_<digest>(...)`` with client-side
parameters. Each query stays one simple-protocol message, its statement timeout in front of it.

- The name is a digest of the SQL text: one name, one statement, on whichever server connection prepared it (a
  connection pooler that lends another server connection can hold nothing else under that name).
- Only on PostgreSQL with client-side binding (Django's default with psycopg 3, and psycopg 2), on connections that
  outlive a request (``CONN_MAX_AGE`` other than 0, or a pool), in autocommit mode outside ``atomic()``, where a
  failed statement leaves nothing behind and can be retried: otherwise the plain SQL runs.
- A query PostgreSQL refuses to prepare (a parameter whose type it cannot infer) runs plain on that connection.
- An ``EXECUTE`` the server connection cannot serve (the statement is gone: a pooler such as PgBouncer in
  transaction mode, ``DISCARD ALL``; or its plan is stale after a schema change) is run again as plain SQL at once,
  and the statement is prepared again on next use. After :data:`MAX_MISSES` such misses the connection stops
  preparing.
- ``MCP_RESOURCES["PREPARED_STATEMENTS"] = False`` turns it off.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

from django.db import DatabaseError

from mcp_resources.conf import mcp_settings

logger = logging.getLogger("mcp_resources.prepared")

MAX_MISSES = 3
"""Misses (an ``EXECUTE`` the server could not serve) after which a connection stops preparing."""

_MISS_STATES = frozenset(
    {
        "26000",  # invalid_sql_statement_name: the prepared statement does not exist on this server connection
        "0A000",  # feature_not_supported: "cached plan must not change result type" (the table changed)
    }
)
_DUPLICATE = "42P05"  # duplicate_prepared_statement: the same name, hence the same query, is already prepared
_PLACEHOLDER = re.compile(r"%([%s])")
_FORMAT_TOKEN = re.compile(r"%(.?)", re.DOTALL)


@dataclass(frozen=True)
class PreparedForm:
    """A query's prepared statement: its name, the ``PREPARE`` that creates it and the ``EXECUTE`` that runs it."""

    name: str
    prepare: str
    execute: str


def prepared_form(sql: str, param_count: int) -> PreparedForm | None:
    """The prepared form of ``sql`` (Django's SQL: ``%s`` for each of ``param_count`` parameters, ``%%`` for a
    percent sign), or ``None`` when its placeholders do not match ``param_count``."""
    tokens = _FORMAT_TOKEN.findall(sql)
    if any(token not in ("%", "s") for token in tokens) or tokens.count("s") != param_count:
        return None
    name = "mcp_" + hashlib.sha256(sql.encode()).hexdigest()[:24]
    numbers = iter(range(1, param_count + 1))
    body = _PLACEHOLDER.sub(lambda match: "%" if match.group(1) == "%" else f"${next(numbers)}", sql)
    arguments = f"({', '.join(['%s'] * param_count)})" if param_count else ""
    return PreparedForm(name=name, prepare=f"PREPARE {name} AS {body}", execute=f"EXECUTE {name}{arguments}")


@dataclass
class _ConnectionState:
    """What was prepared on one driver connection."""

    prepared: set[str] = field(default_factory=set)
    refused: set[str] = field(default_factory=set)
    misses: int = 0


# Keyed by the driver's connection (a pooled connection keeps its statements from one checkout to the next); each is
# used by one thread at a time, and the lock guards the map itself.
_states: weakref.WeakKeyDictionary[Any, _ConnectionState] = weakref.WeakKeyDictionary()
_states_lock = threading.Lock()


def _state(connection: Any) -> _ConnectionState:
    raw = connection.connection
    state = _states.get(raw)
    if state is None:
        with _states_lock:
            state = _states.setdefault(raw, _ConnectionState())
    return state


def usable(connection: Any) -> bool:
    """Whether statements may be prepared on ``connection`` now (Django's connection, already connected): the setting
    is on, the connection outlives the request (``CONN_MAX_AGE`` other than 0, or a connection pool: a statement
    prepared on a connection closed after one request would cost a round trip and save nothing), and it is in
    autocommit mode outside ``atomic()``."""
    return (
        not connection.in_atomic_block
        and connection.get_autocommit()
        and mcp_settings.prepared_statements
        and (
            connection.settings_dict.get("CONN_MAX_AGE", 0) != 0
            or bool(connection.settings_dict["OPTIONS"].get("pool"))
        )
        and _state(connection).misses < MAX_MISSES
    )


def execution(connection: Any, form: PreparedForm | None, sql: str) -> str:
    """The SQL to send for a query: the ``EXECUTE`` of its prepared statement where it is (or can now be) prepared
    on ``connection``, else ``sql`` itself. Both take the same parameters."""
    if form is None or not usable(connection):
        return sql
    state = _state(connection)
    if form.name in state.prepared:
        return form.execute
    if form.name in state.refused:
        return sql
    try:
        with connection.cursor() as cursor:
            cursor.execute(form.prepare, None)  # no parameters: sent as is, with the statement timeout if one applies
    except DatabaseError as exc:
        code = sqlstate(exc)
        if code == _DUPLICATE:
            state.prepared.add(form.name)
            return form.execute
        if code is None or code.startswith("57") or code.startswith("08"):
            raise  # cancelled, timed out or disconnected: not the statement's fault
        logger.debug("PostgreSQL refused to prepare %s (%s): it runs unprepared on this connection", form.name, code)
        state.refused.add(form.name)
        return sql
    state.prepared.add(form.name)
    return form.execute


def missed(connection: Any, exc: DatabaseError) -> bool:
    """Whether ``exc`` says an ``EXECUTE`` could not be served (the statement is gone or stale). The connection then
    prepares again on next use, up to :data:`MAX_MISSES` times, and the caller runs the plain SQL."""
    if sqlstate(exc) not in _MISS_STATES:
        return False
    state = _state(connection)
    state.prepared.clear()
    state.misses += 1
    if state.misses >= MAX_MISSES:
        logger.info(
            "prepared statements were lost %d times on one connection (a pooler in transaction mode?): "
            "its queries run unprepared from now on",
            state.misses,
        )
    return True


def sqlstate(exc: BaseException) -> str | None:
    """PostgreSQL's SQLSTATE for a database error raised through Django (psycopg 3 or psycopg 2)."""
    cause = exc.__cause__
    code = getattr(cause, "sqlstate", None) or getattr(cause, "pgcode", None)
    return str(code) if code else None
