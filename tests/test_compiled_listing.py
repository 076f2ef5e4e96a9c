"""The compiled page queries (mcp_resources.listing.compiled) against the plain querysets they stand in for.

A template that declares its scope (``owner_field``, also through memberships: ``project__members``,
``project__team__memberships__user``) and the admin's static resources list through SQL compiled once; the
architecture rules require a differential test that both ways give identical pages, and a fallback to the queryset
whenever the query cannot be compiled. Every walk here runs twice, once with the compiled queries off, on SQLite and
on PostgreSQL (text keys in byte order, equal timestamps, soft-deleted rows, another owner's rows, projects shared
by several members, a member holding two roles in a team).
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from typing import Any

import pytest
from django.db.models import CharField, Exists, OuterRef
from django.test import RequestFactory
from django.utils import timezone

from mcp_resources.listing import compiled, sources
from mcp_resources.listing.compiled import CompiledQuery, NotCompilable, declared_listing
from mcp_resources.listing.plan import list_plan
from mcp_resources.models import StaticResource
from mcp_resources.protocol.cursors import CursorCodec
from mcp_resources.resources import ModelResourceTemplate
from testproject.library.models import Document, Membership, Note, Project, Team, Ticket
from tests.listing_support import (
    DeclaredDocumentSource,
    NoteSource,
    TeamTicketSource,
    TicketSource,
    configure,
    context,
    server_for,
    walk,
)

pytestmark = pytest.mark.django_db

KEY = "the compiled listing suite's cursor key"
T0 = timezone.now() - timedelta(days=3)
TITLES = ["a", "B", "b", "é", "e\u0301", "ü/é?", "a b", "100%", "café", "cafe", "漢字", "😀", "~", "same", "same"]


class DeclaredNotes(NoteSource):
    """A text keyset ``(title, id)`` in byte order, scope declared."""

    name = "declared-notes"
    uri_template = "learn://declared-notes/{id}"
    name_field = "title"
    owner_field = "owner"
    get_queryset = ModelResourceTemplate.get_queryset


class DeclaredByPk(DeclaredDocumentSource):
    """``pk`` as keyset, a name from the body."""

    name = "declared-by-pk"
    uri_template = "learn://declared-by-pk/{pk}"
    ordering = ("pk",)
    name_field = "body"


class TicketsByTitle(TicketSource):
    """A membership path with a text keyset ``(title, id)``."""

    name = "tickets-by-title"
    uri_template = "learn://tickets-by-title/{id}"
    ordering = ("title", "id")


class DatedDeclaredNotes(DeclaredNotes):
    """The metadata columns (``modified_field``, ``size_field``) in the compiled page query."""

    name = "dated-declared-notes"
    uri_template = "learn://dated-declared-notes/{id}"
    modified_field = "updated"
    size_field = "id"


DECLARED = [
    DeclaredDocumentSource,
    DeclaredNotes,
    DeclaredByPk,
    TicketSource,
    TeamTicketSource,
    TicketsByTitle,
    DatedDeclaredNotes,
]


def make_data(users: list[Any], *, same_time: bool) -> None:
    for u, user in enumerate(users):
        docs = Document.objects.bulk_create(
            Document(
                owner=user,
                title=f"{title} {u}",
                body=f"body {i} of {user.username}",
                created=T0 if same_time else T0 + timedelta(seconds=i % 4, microseconds=i),
            )
            for i, title in enumerate(TITLES * 2)
        )
        Document.objects.filter(pk__in=[d.pk for d in docs[::7]]).update(deleted_at=timezone.now())
        Note.objects.bulk_create(Note(owner=user, title=title, text="t") for title in TITLES)
    # Projects: one shared by every user, one of each user alone, one of nobody; teams: one of every user (the first
    # holds two roles), and one of nobody.
    everyone, nobody = Team.objects.create(name="everyone"), Team.objects.create(name="nobody")
    Membership.objects.bulk_create(Membership(team=everyone, user=user) for user in users)
    Membership.objects.create(team=everyone, user=users[0], role="admin")
    shared = Project.objects.create(name="shared", team=everyone)
    shared.members.add(*users)
    projects = [shared, Project.objects.create(name="nobody's", team=nobody)]
    for user in users:
        own = Project.objects.create(name=f"{user.username}'s")
        own.members.add(user)
        projects.append(own)
    for p, project in enumerate(projects):
        Ticket.objects.bulk_create(
            Ticket(
                project=project,
                title=f"{title} {p}",
                created=T0 if same_time else T0 + timedelta(seconds=i % 3, microseconds=i),
            )
            for i, title in enumerate(TITLES)
        )


def shape(codec: CursorCodec, pages: list[dict[str, Any]]) -> list[tuple[Any, Any]]:
    return [(p["resources"], codec.open(p["nextCursor"])["pos"] if "nextCursor" in p else None) for p in pages]


@pytest.fixture
def codec(settings: Any) -> CursorCodec:
    configure(settings, CURSOR_KEYS=[KEY])
    return CursorCodec([KEY])


@pytest.fixture
def compiled_off(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A switch: ``compiled_off()`` makes every listing run its plain queryset from then on."""

    def switch() -> None:
        monkeypatch.setattr(sources, "declared_listing", lambda template, columns: None)
        monkeypatch.setattr(sources._static_listing, "rows", lambda using, after, limit: None)

    return switch


def test_the_compiled_queries_serve_declared_scopes_only() -> None:
    for template in DECLARED:
        instance = template()
        plan = list_plan(instance)
        assert plan is not None
        assert declared_listing(instance, plan.columns) is not None
    computed = NoteSource()  # the scope is computed by get_queryset(): its SQL is not known before it runs
    assert declared_listing(computed, ("title", "id")) is None


@pytest.mark.parametrize("same_time", [False, True], ids=["times", "same-time"])
@pytest.mark.parametrize("page_size", [1, 4, 100])
@pytest.mark.parametrize("template", DECLARED, ids=lambda t: t.__name__)
def test_compiled_and_plain_queries_list_identical_pages(
    settings, codec, compiled_off, alice, bob, template, page_size, same_time
):
    configure(settings, PAGE_SIZE=page_size)
    make_data([alice, bob], same_time=same_time)
    StaticResource.objects.bulk_create(
        StaticResource(uri=f"learn://static/{i}/{title}", name=f"s{i}", text="x") for i, title in enumerate(TITLES)
    )
    # Rows with the metadata columns set (a size computed on save, annotations, icons as JSON).
    StaticResource.objects.create(
        uri="learn://static/meta",
        name="meta",
        text="é" * 3,
        audience="user assistant",
        priority=0.25,
        icons=[{"src": "https://example.com/i.png", "sizes": ["48x48"]}],
    )
    StaticResource.objects.create(uri="learn://static/blob", name="blob", binary=b"\x00\x01\x02")
    server = server_for(template)
    fast = {user.username: shape(codec, walk(server, context(user))) for user in (alice, bob)}
    listing = declared_listing(server.sources()[0], list_plan(server.sources()[0]).columns)
    assert listing is not None
    assert not listing.query.failed
    assert listing.query._local.compiled, "the compiled query was not used"
    compiled_off()
    plain = {user.username: shape(codec, walk(server, context(user))) for user in (alice, bob)}
    assert fast == plain
    listed = [r["uri"] for resources, _ in fast["alice"] for r in resources]
    assert len(listed) == len(set(listed)) > len(TITLES)


def test_the_static_listing_reads_the_same_rows_from_every_position(compiled_off):
    uris = [f"learn://s/{title}" for title in TITLES[:-1]] + ["learn://s/", "learn://t", "z://"]
    StaticResource.objects.bulk_create(StaticResource(uri=uri, name=uri, text="x") for uri in uris)
    StaticResource.objects.create(uri="learn://s/meta", name="m", text="ü", audience="user", icons=[{"src": "data:,"}])
    uris.append("learn://s/meta")
    StaticResource.objects.filter(uri="learn://t").update(enabled=False)
    positions = [None, *sorted(uris, key=str.encode), "learn://s/é0", "\U0010ffff"]
    fast = {
        (after, limit): sources._static_listing.rows("default", after, limit)
        for after in positions
        for limit in (1, 3, 50)
    }
    assert any(fast.values())
    compiled_off()
    for (after, limit), rows in fast.items():
        request = RequestFactory().post("/mcp")
        plain = sources.StaticSource.rows(request, "default", after, limit, "", time.monotonic() + 60)
        assert rows == plain, (after, limit)


def test_a_query_that_cannot_be_compiled_runs_as_a_queryset(settings, codec, alice, monkeypatch, caplog):
    configure(settings, PAGE_SIZE=3)
    make_data([alice], same_time=True)
    server = server_for(DeclaredNotes)
    expected = shape(codec, walk(server, context(alice)))

    def refuse(self: CompiledQuery, using: str, shape: Any, used: int) -> Any:
        raise NotCompilable("refused by the test")

    monkeypatch.setattr(CompiledQuery, "_compile", refuse)
    listing = declared_listing(server.sources()[0], list_plan(server.sources()[0]).columns)
    assert listing is not None
    listing.query.forget()
    with caplog.at_level(logging.INFO, logger="mcp_resources.listing"):
        assert shape(codec, walk(server, context(alice))) == expected
    assert listing.query.failed
    assert "runs through the ORM on every page" in caplog.text
    listing.query.failed = False


def test_a_placeholder_in_a_pattern_lookup_is_refused():
    from django.db.models import CharField

    query = CompiledQuery(
        "a pattern", lambda shape, title: Note.objects.filter(title__startswith=title).values_list("id"), [CharField()]
    )
    assert query.rows("default", ["a"], None) is None
    assert query.failed


def test_a_placeholder_in_a_pattern_lookup_inside_a_subquery_is_refused():
    def build(shape: Any, title: Any) -> Any:
        return Note.objects.filter(Exists(Note.objects.filter(pk=OuterRef("pk"), title__startswith=title)))

    query = CompiledQuery(
        "a pattern in a subquery", lambda shape, title: build(shape, title).values_list("id"), [CharField()]
    )
    assert query.rows("default", ["a"], None) is None
    assert query.failed


def test_a_membership_scope_binds_the_owner_inside_its_exists_subquery(alice, bob):
    """The compiled SQL of a membership path holds the owner's placeholder in the subquery, once."""
    make_data([alice, bob], same_time=False)
    template = TeamTicketSource()
    listing = declared_listing(template, list_plan(template).columns)
    assert listing is not None
    rows = listing.rows("default", alice.pk, None, 100)
    assert rows is not None
    expected = Ticket.objects.filter(pk__in=Ticket.objects.filter(project__team__memberships__user=alice).values("pk"))
    assert sorted(row[1] for row in rows) == sorted(expected.values_list("pk", flat=True))
    ((sql, positions),) = [(c.sql, c.positions) for c in listing.query._local.compiled.values()]
    assert sql.count("EXISTS") == 1
    assert len(positions[0]) == 1
    assert "%s" in sql.split("EXISTS", 1)[1]


def test_compiled_queries_forget_their_sql_when_the_databases_change(settings, alice):
    template = DeclaredNotes()
    listing = declared_listing(template, list_plan(template).columns)
    assert listing is not None
    listing.rows("default", alice.pk, None, 5)
    assert listing.query._local.compiled
    settings.USE_TZ = True  # any change of the settings the SQL depends on (DATABASES, USE_TZ...)
    assert not getattr(listing.query._local, "compiled", None)
    assert compiled._instances  # the registry of compiled queries is weak but holds the live ones
