"""The three ways a ``ModelResourceTemplate`` page is read give the same listing.

- model instances (the default, and whenever a listing hook is overridden);
- ``list_fields``: instances with only the declared fields loaded (``QuerySet.only()``);
- ``name_field`` with the default hooks: value rows, no instances.

Plus the PostgreSQL statement timeout in autocommit mode (one message: ``SET LOCAL ...; SELECT ...``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.models import QuerySet
from django.http import HttpRequest
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from mcp_resources.listing.keyset import encode_key
from testproject.library.models import Document, Note
from tests.listing_support import (
    DocumentSource,
    NoteSource,
    assert_cut_by_the_deadline,
    configure,
    context,
    expected_documents,
    expected_notes,
    list_page,
    server_for,
    uris,
    walk,
)
from tests.wire_support import wire_trace

pytestmark = pytest.mark.django_db

T0 = timezone.now() - timedelta(days=30)


class FastDocuments(DocumentSource):
    name_field = "title"


class OnlyDocuments(DocumentSource):
    list_fields = ("title",)

    def get_resource_name(self, obj: Any) -> str:
        return f"{obj.title}"


class NamedDocuments(DocumentSource):
    name_field = "title"

    def get_resource_name(self, obj: Any) -> str:  # overridden: instances again
        return f"[{obj.title}]"


class FastNotes(NoteSource):
    name_field = "title"


class SlugDocuments(DocumentSource):
    """A string lookup that needs percent-encoding, expanded from value rows."""

    name = "slugs"
    uri_template = "learn://slugs/{title}"
    name_field = "title"


@pytest.fixture
def alice() -> Any:
    return get_user_model().objects.create_user("alice")


def make(owner: Any, count: int, *, same_time: bool = False) -> None:
    Document.objects.bulk_create(
        Document(
            owner=owner,
            title=f"{owner.username} doc {i} ü/é?",
            body="x" * 1000,
            created=T0 if same_time else T0 + timedelta(minutes=i % 7),
        )
        for i in range(count)
    )


def resources(server: Any, ctx: Any, **kwargs: Any) -> list[dict[str, Any]]:
    return [r for page in walk(server, ctx, **kwargs) for r in page["resources"]]


@pytest.mark.parametrize("same_time", [False, True])
def test_value_rows_list_exactly_what_instances_list(settings, alice, same_time):
    configure(settings, PAGE_SIZE=7)
    make(alice, 40, same_time=same_time)
    ctx = context(alice)
    reference = resources(server_for(DocumentSource), ctx)
    assert [r["uri"] for r in reference] == expected_documents(alice)
    assert resources(server_for(FastDocuments), ctx) == reference
    assert resources(server_for(OnlyDocuments), ctx) == reference
    assert [r["name"] for r in resources(server_for(NamedDocuments), ctx)] == [f"[{r['name']}]" for r in reference]


def test_value_rows_with_a_text_keyset_and_a_prefix(settings, alice):
    configure(settings, PAGE_SIZE=3)
    Note.objects.bulk_create(Note(owner=alice, title=t) for t in ["b", "B", "a", "é", "a", "Z", "zz", "a b"])
    ctx = context(alice)
    assert uris(walk(server_for(FastNotes), ctx)) == expected_notes(alice)
    assert resources(server_for(FastNotes), ctx) == resources(server_for(NoteSource), ctx)
    first = expected_notes(alice)[0]
    prefix = first[:-1]
    assert resources(server_for(FastNotes), ctx, prefix=prefix) == resources(server_for(NoteSource), ctx, prefix=prefix)


def test_value_rows_expand_uris_like_the_template(settings, alice):
    configure(settings, PAGE_SIZE=5)
    make(alice, 12)
    ctx = context(alice)
    template = SlugDocuments()
    listed = resources(server_for(SlugDocuments), ctx)
    docs = {d.title: d for d in Document.objects.filter(owner=alice)}
    assert sorted(r["uri"] for r in listed) == sorted(template.get_uri(d) for d in docs.values())
    assert all(r["name"] in docs for r in listed)


def test_the_plan_is_used_only_with_the_default_hooks():
    assert FastDocuments().list_plan() is not None
    assert FastNotes().list_plan() is not None
    assert DocumentSource().list_plan() is None  # no name_field: str(obj) needs an instance
    assert NamedDocuments().list_plan() is None
    assert OnlyDocuments().list_plan() is None

    class OwnerDocuments(DocumentSource):
        uri_template = "learn://by-owner/{owner}/{id}"
        name_field = "title"

    assert OwnerDocuments().list_plan() is None  # a relation: the hook would see the related object


def test_value_rows_read_only_the_needed_columns(settings, alice):
    make(alice, 3)
    with CaptureQueriesContext(connection) as queries:
        list_page(server_for(FastDocuments), context(alice))
    page_sql = [q["sql"] for q in queries.captured_queries if "library_document" in q["sql"]]
    assert page_sql
    assert all('"body"' not in sql for sql in page_sql)
    with CaptureQueriesContext(connection) as queries:
        list_page(server_for(OnlyDocuments), context(alice))
    page_sql = [q["sql"] for q in queries.captured_queries if "library_document" in q["sql"]]
    assert len(page_sql) == 1
    assert '"body"' not in page_sql[0]


def test_row_keys_encode_like_positions():
    when = timezone.now()
    assert encode_key((when, 5)) == [when.isoformat(), 5]


# PostgreSQL: the statement timeout in autocommit mode ------------------------------------------------------------


class SlowFast(FastDocuments):
    def get_queryset(self, request: HttpRequest) -> QuerySet[Document]:
        return super().get_queryset(request).extra(where=["(SELECT 1 FROM pg_sleep(1)) = 1"])


@pytest.mark.skipif(connection.vendor != "postgresql", reason="statement timeouts are a PostgreSQL feature")
@pytest.mark.django_db(transaction=True)
def test_autocommit_statement_timeout_cancels_and_does_not_linger(settings, binding):
    alice = get_user_model().objects.create_user("alice")
    make(alice, 3)
    assert connection.get_autocommit()
    assert not connection.in_atomic_block
    configure(settings, LIST_DEADLINE_SECONDS=0.2)
    assert_cut_by_the_deadline(lambda: list_page(server_for(SlowFast), context(alice)))
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == "0"


@pytest.mark.skipif(connection.vendor != "postgresql", reason="statement timeouts are a PostgreSQL feature")
@pytest.mark.django_db(transaction=True)
def test_inside_a_transaction_the_timeout_cancels_and_the_previous_one_is_restored(settings, binding):
    alice = get_user_model().objects.create_user("alice")
    make(alice, 3)
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL statement_timeout = 7000")
        assert len(list_page(server_for(FastDocuments), context(alice))["resources"]) == 3
        configure(settings, LIST_DEADLINE_SECONDS=0.2)
        assert_cut_by_the_deadline(lambda: list_page(server_for(SlowFast), context(alice)))
        # The listing's savepoint rolled back: the transaction goes on, with its own timeout.
        assert Document.objects.filter(owner=alice).count() == 3
        with connection.cursor() as cursor:
            cursor.execute("SHOW statement_timeout")
            assert cursor.fetchone()[0] == "7s"
    configure(settings, LIST_DEADLINE_SECONDS=10)
    for _ in range(2):  # under server-side binding psycopg prepares each statement at its second run
        list_page(server_for(FastDocuments), context(alice))
    with wire_trace() as wire:
        page = list_page(server_for(FastDocuments), context(alice))
    assert len(page["resources"]) == 3
    # Two round trips, the static resources and the page with its timeout: no BEGIN/SET/COMMIT around it.
    assert wire.round_trips == 2
    assert not [line for line in wire.lines if "BEGIN" in line or "COMMIT" in line]
    if binding == "client":
        (page_query,) = [q for q in wire.sent("Query") if "library_document" in q]
        assert '"SET LOCAL statement_timeout = ' in page_query
    else:
        assert not wire.sent("Query")
        assert not wire.sent("Parse")  # prepared: Bind, Execute and Sync only
        assert len(wire.sent("Sync")) == 2
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == "0"
