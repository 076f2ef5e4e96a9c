"""Queries compiled once per thread and connection (``mcp_resources.precompiled``), and their users.

Real database (SQLite and PostgreSQL), real models: the precompiled rows must be exactly the queryset's rows.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext

from mcp_resources.models import StaticResource, listing_page
from mcp_resources.precompiled import PrecompiledQuery
from testproject.library.models import Document
from tests.listing_support import two_owners_documents

pytestmark = pytest.mark.django_db

T0 = datetime(2024, 1, 1, tzinfo=UTC)


@pytest.fixture
def documents() -> list[Document]:
    return two_owners_documents(T0)


class Counting:
    """A build function that counts how often it is called (each call is one compilation)."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, limit: int, owner: Any, after: Any) -> Any:
        self.calls += 1
        return (
            Document.objects.filter(owner__username=owner, title__gt=after)
            .order_by("title")
            .values_list("id", "title", "created", "owner__username")[:limit]
        )


def expected(owner: str, after: str, limit: int) -> list[tuple[Any, ...]]:
    queryset = Document.objects.filter(owner__username=owner, title__gt=after).order_by("title")
    return list(queryset.values_list("id", "title", "created", "owner__username")[:limit])


def test_rows_are_the_querysets_and_compiled_once_per_shape(documents: list[Document]) -> None:
    build = Counting()
    query = PrecompiledQuery("test.rows", build, arity=2)
    for owner in ("alice", "bob"):
        for after in ("", documents[1].title, documents[-1].title):
            assert query.rows("default", [owner, after], shape=3) == expected(owner, after, 3)
    assert build.calls == 1
    rows = query.rows("default", ["alice", ""], shape=10)
    assert rows == expected("alice", "", 10)
    assert len(rows) == 5
    assert isinstance(rows[0][2], datetime)
    assert rows[0][2].tzinfo is not None  # the converters ran (SQLite stores text)
    assert build.calls == 2  # a new shape compiles again


def test_a_settings_change_and_another_thread_compile_again(documents: list[Document], settings: Any) -> None:
    build = Counting()
    query = PrecompiledQuery("test.threads", build, arity=2)
    query.rows("default", ["alice", ""], shape=2)
    settings.USE_TZ = True  # any change to the settings it depends on
    query.rows("default", ["alice", ""], shape=2)
    assert build.calls == 2
    if connection.vendor == "sqlite" and connection.settings_dict["NAME"].startswith("file:memorydb"):
        return  # an in-memory test database is not shared with another thread
    results: list[Any] = []

    def elsewhere() -> None:
        try:
            results.append(query.rows("default", ["alice", ""], shape=2))
        finally:
            connections.close_all()

    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join()
    assert build.calls == 3
    assert results == [[]]  # its own connection does not see this test's uncommitted rows


def test_a_placeholder_a_lookup_rewrites_is_refused(documents: list[Document]) -> None:
    query = PrecompiledQuery("test.like", lambda shape, prefix: Document.objects.filter(title__startswith=prefix), 1)
    with pytest.raises(RuntimeError, match="placeholder"):
        query.rows("default", ["alice"])


# The static phase of a listing --------------------------------------------------------------------------------


def make_static(uri: str, **fields: Any) -> StaticResource:
    return StaticResource.objects.create(uri=uri, name=uri.rsplit("/", 1)[-1], text="content " * 100, **fields)


def test_listing_page_is_byte_ordered_and_reads_no_contents() -> None:
    uris = ["res://b/é", "res://a/1", "res://b/z", "res://a/2", "other://x"]
    for uri in uris:
        make_static(uri)
    make_static("res://a/0", enabled=False)
    ordered = sorted(uris, key=str.encode)
    with CaptureQueriesContext(connection) as queries:
        first = listing_page(None, 3)
        rest = listing_page(first[-1].uri, 10)
        prefixed = listing_page(None, 10, "res://b/")
    assert [r.uri for r in first] == ordered[:3]
    assert [r.uri for r in rest] == ordered[3:]
    assert [r.uri for r in prefixed] == ["res://b/z", "res://b/é"]
    assert first[0].get_descriptor() == {"uri": ordered[0], "name": ordered[0].rsplit("/", 1)[-1]}
    for query in queries.captured_queries:
        assert '"text"' not in query["sql"]
        assert '"binary"' not in query["sql"]


# Typed placeholders -----------------------------------------------------------------------------------------


def test_typed_placeholders_are_converted_by_their_fields(documents: list[Document]) -> None:
    owner = Document._meta.get_field("owner")
    created = Document._meta.get_field("created")
    identifier = Document._meta.get_field("id")

    def build(limit: int, who: Any, when: Any, after: Any) -> Any:
        # ``when`` is used twice: each use is a parameter of its own.
        return (
            Document.objects.filter(owner=who, created__gte=when)
            .filter(created__gt=when, id__gt=after)
            .order_by("created", "id")
            .values_list("id", "title", "created")[:limit]
        )

    query = PrecompiledQuery("test.typed", build, fields=[owner, created, identifier])
    for doc in documents:
        for when in (T0, T0 + timedelta(minutes=2)):
            reference = list(build(10, doc.owner_id, when, 0))
            assert query.rows("default", [doc.owner_id, when, 0], shape=10) == reference
            after = list(build(3, doc.owner_id, when, doc.pk))
            assert query.rows("default", [doc.owner_id, when, doc.pk], shape=3) == after


def test_a_typed_placeholder_outside_a_comparison_is_refused(documents: list[Document]) -> None:
    title = Document._meta.get_field("title")
    query = PrecompiledQuery(
        "test.typed-like", lambda shape, prefix: Document.objects.filter(title__startswith=prefix), fields=[title]
    )
    with pytest.raises(RuntimeError, match="only comparisons"):
        query.rows("default", ["alice"])
