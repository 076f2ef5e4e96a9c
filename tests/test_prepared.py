"""Prepared statements for the app's precompiled queries (``mcp_resources.prepared``).

The SQL conversion is checked everywhere; the rest on a real PostgreSQL, in autocommit mode (``transaction=True``),
where statements are prepared: the rows stay the queryset's, each statement is prepared once per connection, and
every way a prepared statement can fail (gone, refused, already there, inside a transaction) still answers.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core import checks
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from mcp_resources import prepared
from mcp_resources.checks import check_settings
from mcp_resources.pagination import client_side_binding
from mcp_resources.precompiled import PrecompiledQuery
from mcp_resources.prepared import MAX_MISSES, prepared_form
from mcp_resources.tokenlookup import find_token
from testproject.library.models import Document
from tests.listing_support import DeclaredDocumentSource, configure, context, server_for, two_owners_documents, walk

T0 = datetime(2024, 1, 1, tzinfo=UTC)

pg_only = pytest.mark.skipif(
    connection.vendor != "postgresql" or not client_side_binding(connection),
    reason="SQL prepared statements: PostgreSQL with client-side binding (psycopg prepares with server-side binding)",
)


# The SQL conversion ---------------------------------------------------------------------------------------------


def test_the_prepared_form_numbers_the_parameters_and_keeps_percent_signs():
    form = prepared_form('SELECT "a" FROM "t" WHERE "b" = %s AND "c" LIKE \'x%%\' AND "d" > %s', 2)
    assert form is not None
    assert form.name.startswith("mcp_")
    assert form.prepare == f'PREPARE {form.name} AS SELECT "a" FROM "t" WHERE "b" = $1 AND "c" LIKE \'x%\' AND "d" > $2'
    assert form.execute == f"EXECUTE {form.name}(%s, %s)"
    bare = prepared_form('SELECT "a" FROM "t"', 0)
    assert bare is not None
    assert bare.execute == f"EXECUTE {bare.name}"  # no parentheses without parameters
    # The name is the query's: the same text, the same name; another text, another name.
    assert prepared_form("SELECT %s", 1).name == prepared_form("SELECT %s", 1).name
    assert prepared_form("SELECT %s", 1).name != prepared_form("SELECT %s + 1", 1).name


@pytest.mark.parametrize(("sql", "count"), [("SELECT %s", 2), ("SELECT %d", 0), ("SELECT 100%", 0), ("SELECT %%s", 1)])
def test_a_query_whose_placeholders_do_not_match_has_no_prepared_form(sql, count):
    assert prepared_form(sql, count) is None


def test_checks_refuse_a_prepared_statements_setting_that_is_not_a_boolean(settings):
    settings.MCP_RESOURCES = {"PREPARED_STATEMENTS": "no"}
    assert [m.id for m in check_settings() if m.level >= checks.ERROR] == ["mcp_resources.E020"]
    settings.MCP_RESOURCES = {"PREPARED_STATEMENTS": False}
    assert [m.id for m in check_settings() if m.level >= checks.ERROR] == []


# On PostgreSQL --------------------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def persistent_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    """Connections that outlive a request, where statements are prepared (Django's default, 0, closes them)."""
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", None)


@pytest.fixture
def documents(transactional_db: Any) -> list[Document]:
    return two_owners_documents(T0)


def by_owner(shape: Any, owner: Any) -> Any:
    return Document.objects.filter(owner__username=owner).order_by("title").values_list("id", "title", "created")


def expected(owner: str) -> list[tuple[Any, ...]]:
    return list(by_owner(None, owner))


def sent(call: Any) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        call()
    return [query["sql"] for query in queries.captured_queries]


def resources(pages: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    return [page["resources"] for page in pages]


def prepared_here() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM pg_prepared_statements")
        return {name for (name,) in cursor.fetchall() if name.startswith("mcp_")}


@pg_only
def test_a_precompiled_query_is_prepared_once_then_executed(documents):
    query = PrecompiledQuery("test.prepared.once", by_owner, arity=1)
    first = sent(lambda: query.rows("default", ["alice"]))
    assert first[0].startswith("PREPARE mcp_")
    assert first[1].startswith("EXECUTE mcp_")
    for owner in ("bob", "alice"):
        (only,) = sent(lambda owner=owner: query.rows("default", [owner]))
        assert only.startswith("EXECUTE mcp_")
        assert query.rows("default", [owner]) == expected(owner)
    assert prepared_here() == {first[1].split()[1].split("(")[0]}


@pg_only
def test_pages_are_the_same_prepared_or_not(documents, settings):
    configure(settings, PAGE_SIZE=2)
    alice = User.objects.get(username="alice")
    pages = walk(server_for(DeclaredDocumentSource), context(alice))
    assert prepared_here()
    configure(settings, PAGE_SIZE=2, PREPARED_STATEMENTS=False)
    plain = sent(lambda: walk(server_for(DeclaredDocumentSource), context(alice)))
    assert not [sql for sql in plain if "EXECUTE" in sql or "PREPARE" in sql]
    assert resources(walk(server_for(DeclaredDocumentSource), context(alice))) == resources(pages)
    assert sum(len(page["resources"]) for page in pages) == 5


@pg_only
def test_a_lost_statement_is_run_plain_at_once_and_prepared_again(documents):
    query = PrecompiledQuery("test.prepared.lost", by_owner, arity=1)
    query.rows("default", ["alice"])
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")  # as a pooler lending another server connection, or DISCARD ALL
    retried = sent(lambda: query.rows("default", ["bob"]))
    assert retried[0].startswith("EXECUTE mcp_")  # refused by PostgreSQL: the statement is gone
    assert retried[1].startswith("SELECT ")
    assert query.rows("default", ["bob"]) == expected("bob")  # prepared again
    assert len(prepared_here()) == 1


@pg_only
def test_a_connection_that_keeps_losing_statements_stops_preparing(documents, caplog):
    caplog.set_level(logging.INFO, logger="mcp_resources.prepared")
    query = PrecompiledQuery("test.prepared.pooled", by_owner, arity=1)
    for _ in range(MAX_MISSES):
        query.rows("default", ["alice"])
        with connection.cursor() as cursor:
            cursor.execute("DEALLOCATE ALL")
        assert query.rows("default", ["alice"]) == expected("alice")
    assert "run unprepared from now on" in caplog.text
    for owner in ("alice", "bob"):
        (only,) = sent(lambda owner=owner: query.rows("default", [owner]))
        assert only.startswith("SELECT ")
    assert query.rows("default", ["bob"]) == expected("bob")
    assert not prepared_here()
    connection.close()  # a new connection prepares again
    assert sent(lambda: query.rows("default", ["bob"]))[0].startswith("PREPARE mcp_")


@pg_only
def test_a_statement_already_prepared_under_its_name_is_executed(documents):
    query = PrecompiledQuery("test.prepared.there", by_owner, arity=1)
    form = query.statement("default", ["alice"]).compiled.prepared
    assert form is not None
    with connection.cursor() as cursor:
        cursor.execute(form.prepare, None)  # a pooled server connection that another client prepared it on
    first = sent(lambda: query.rows("default", ["alice"]))
    assert first[-1].startswith("EXECUTE mcp_")
    assert query.rows("default", ["alice"]) == expected("alice")


@pg_only
def test_a_query_postgresql_cannot_prepare_runs_plain(documents):
    def untyped(shape: Any, owner: Any, anything: Any) -> Any:
        return by_owner(shape, owner).extra(where=["%s IS NOT NULL"], params=[anything])

    query = PrecompiledQuery("test.prepared.refused", untyped, arity=2)
    first = sent(lambda: query.rows("default", ["alice", "x"]))
    assert first[0].startswith("PREPARE mcp_")  # refused: the type of "$2 IS NOT NULL" cannot be inferred
    assert first[1].startswith("SELECT ")
    (again,) = sent(lambda: query.rows("default", ["bob", "x"]))
    assert again.startswith("SELECT ")
    assert query.rows("default", ["bob", "x"]) == expected("bob")
    assert not prepared_here()


@pg_only
def test_inside_a_transaction_nothing_is_prepared(documents):
    query = PrecompiledQuery("test.prepared.atomic", by_owner, arity=1)
    with transaction.atomic():
        (only,) = sent(lambda: query.rows("default", ["alice"]))
        assert only.startswith("SELECT ")
        assert query.rows("default", ["alice"]) == expected("alice")
    assert not prepared_here()


@pg_only
def test_the_token_lookup_is_prepared(documents, settings):
    from oauth2_provider.models import get_access_token_model, get_application_model

    alice = User.objects.get(username="alice")
    app = get_application_model().objects.create(
        name="app", client_type="public", authorization_grant_type="authorization-code", user=alice
    )
    token = get_access_token_model().objects.create(
        user=alice, application=app, token="t" * 40, scope="a:read", expires=datetime.now(UTC) + timedelta(hours=1)
    )
    checksum = token.token_checksum
    find_token(checksum)
    (only,) = sent(lambda: find_token(checksum))
    assert only.startswith("EXECUTE mcp_")
    row = find_token(checksum)
    assert row is not None
    assert row.user == alice
    assert row.scope == "a:read"
    assert find_token("0" * 64) is None
    settings.MCP_RESOURCES = {"PREPARED_STATEMENTS": False}
    (plain,) = sent(lambda: find_token(checksum))
    assert plain.startswith("SELECT ")


@pg_only
def test_nothing_is_prepared_on_a_connection_closed_after_each_request(documents, monkeypatch):
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 0)
    query = PrecompiledQuery("test.prepared.per_request", by_owner, arity=1)
    for owner in ("alice", "bob"):
        (only,) = sent(lambda owner=owner: query.rows("default", [owner]))
        assert only.startswith("SELECT ")
    assert not prepared_here()


@pg_only
def test_usable_reads_the_setting_and_the_transaction_state(documents, settings):
    connection.ensure_connection()
    assert prepared.usable(connection)
    with transaction.atomic():
        assert not prepared.usable(connection)
    settings.MCP_RESOURCES = {"PREPARED_STATEMENTS": False}
    assert not prepared.usable(connection)
