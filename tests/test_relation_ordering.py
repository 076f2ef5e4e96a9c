"""Ordering through relations: ``ordering = ("project__name", "id")``, keyset-paginated and prefix-filtered.

Tickets are ordered by the name of their project (a forward, non-null foreign key), then by id. Every way a template
is listed is walked: the compiled listing (a declared scope, value rows), value rows through the queryset (a
``prefix``), model instances (no ``name_field``) and a computed scope (``get_queryset`` overridden). On SQLite and
PostgreSQL (``MCP_TEST_DB=postgres``): project names compare in byte order (``COLLATE "C"``), several projects
share a name, a project holds several tickets, and pages of two cut through all of that. The system check accepts
the path and refuses what cannot order a keyset (a nullable or many-valued relation, a relation at the end).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db.models import QuerySet
from django.http import HttpRequest

from mcp_resources.checks.templates import check_templates
from mcp_resources.listing.compiled import declared_listing
from mcp_resources.listing.keyset import keyset_queryset
from mcp_resources.listing.plan import list_plan
from mcp_resources.registries import ResourceRegistry
from mcp_resources.resources import ModelResourceTemplate
from testproject.library.models import Project, Team, Ticket
from tests.listing_support import SCOPE, configure, context, server_for, walk

pytestmark = pytest.mark.django_db

# Byte order: upper case before lower case, "Z" before "a", the accented after every ASCII letter.
PROJECT_NAMES = ["beta", "Zeta", "alpha", "Äpfel", "alpha", "a b", "été", "zulu"]


class ByProjectName(ModelResourceTemplate):
    """Declared scope and ``name_field``: listed through the compiled query from value rows."""

    model = Ticket
    name = "by-project"
    uri_template = "learn://by-project/{project}/{id}"
    lookup_fields = {"project": "project__name", "id": "id"}
    required_scopes = (SCOPE,)
    ordering = ("project__name", "id")
    name_field = "title"
    owner_field = "project__members"


class ByProjectNameInstances(ByProjectName):
    """No ``name_field``: listed from model instances (the key's relation path read in the page query)."""

    name_field = None


class ByProjectNameComputed(ByProjectName):
    """The scope computed by ``get_queryset``: listed through the ORM."""

    owner_field = None

    def get_queryset(self, request: HttpRequest) -> QuerySet[Ticket]:
        return Ticket.objects.filter(project__members=request.user.pk)  # one membership per member: no duplicates


class ByProjectForeignKey(ByProjectName):
    """The foreign key itself as the first key: its column, never the related model's ``Meta.ordering``."""

    ordering = ("project", "id")


def uri(ticket: Ticket) -> str:
    from urllib.parse import quote

    return f"learn://by-project/{quote(ticket.project.name, safe='')}/{ticket.pk}"


@pytest.fixture
def tickets(alice: Any, bob: Any) -> dict[str, list[Ticket]]:
    """Alice's and Bob's tickets, each list in the expected listing order (project name in bytes, then id)."""
    mine: list[Ticket] = []
    theirs: list[Ticket] = []
    for index, name in enumerate(PROJECT_NAMES):
        project = Project.objects.create(name=name, team=Team.objects.create(name=f"team {index}"))
        project.members.add(alice if index % 4 != 3 else bob)
        if index == 2:
            project.members.add(bob)  # shared: listed once for each member
        for number in range(3 if index % 2 else 2):
            ticket = Ticket.objects.create(project=project, title=f"{name} #{number}")
            (mine if alice in project.members.all() else []).append(ticket)
            (theirs if bob in project.members.all() else []).append(ticket)

    def order(items: list[Ticket]) -> list[Ticket]:
        return sorted(items, key=lambda t: (t.project.name.encode(), t.pk))

    return {"alice": order(mine), "bob": order(theirs)}


TEMPLATES = [ByProjectName, ByProjectNameInstances, ByProjectNameComputed]


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda t: t.__name__)
@pytest.mark.parametrize("page_size", [1, 2, 3, 50])
def test_pages_through_a_relation_are_complete_in_order_without_duplicates(
    settings: Any, alice: Any, bob: Any, tickets: dict[str, list[Ticket]], template: Any, page_size: int
) -> None:
    configure(settings, PAGE_SIZE=page_size)
    server = server_for(template)
    for user in (alice, bob):
        pages = walk(server, context(user))
        listed = [r["uri"] for page in pages for r in page["resources"]]
        assert listed == [uri(t) for t in tickets[user.username]]
        assert len(set(listed)) == len(listed)
        assert all(len(page["resources"]) <= page_size for page in pages)


def test_the_compiled_listing_and_value_rows_serve_a_relation_ordering(alice, tickets):
    template = server_for(ByProjectName).registry.get_template("by-project")
    assert isinstance(template, ByProjectName)
    plan = list_plan(template)
    assert plan is not None
    assert "project__name" in plan.columns
    assert declared_listing(template, plan.columns) is not None
    assert list_plan(ByProjectNameInstances()) is None


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda t: t.__name__)
@pytest.mark.parametrize(
    ("prefix", "names"),
    [
        ("learn://by-project/alpha/", ["alpha"]),
        ("learn://by-project/a", ["a b", "alpha"]),
        ("learn://by-project/%C3%84", ["Äpfel"]),
        ("learn://by-project/", None),
        ("learn://by-project/nothing", []),
    ],
)
def test_a_prefix_filters_a_relation_ordering_across_pages(
    settings: Any, alice: Any, tickets: dict[str, list[Ticket]], template: Any, prefix: str, names: Any
) -> None:
    configure(settings, PAGE_SIZE=2)
    expected = [uri(t) for t in tickets["alice"] if names is None or t.project.name in names]
    pages = walk(server_for(template), context(alice), prefix=prefix)
    listed = [r["uri"] for page in pages for r in page["resources"]]
    assert listed == expected
    assert all(u.startswith(prefix) for u in listed)


def test_every_listed_uri_reads(alice, tickets):
    server = server_for(ByProjectName)
    ctx = context(alice)
    for resource in (r for page in walk(server, ctx) for r in page["resources"]):
        (content,) = server.call("resources/read", {"uri": resource["uri"]}, ctx)["contents"]
        assert content["uri"] == resource["uri"]


def test_a_foreign_key_orders_by_its_column(settings, alice, tickets, monkeypatch):
    # Were the related model's Meta.ordering applied (order_by("project")), the pages would follow project names
    # while the keyset compares project ids: rows would be skipped or repeated.
    monkeypatch.setattr(Project._meta, "ordering", ["-name"])
    query = str(keyset_queryset(Ticket.objects.all(), ["project", "id"], None, 2).query)
    assert "ORDER BY" in query
    assert "name" not in query.split("ORDER BY")[1]
    configure(settings, PAGE_SIZE=2)
    listed = [r["uri"] for page in walk(server_for(ByProjectForeignKey), context(alice)) for r in page["resources"]]
    assert listed == [uri(t) for t in sorted(tickets["alice"], key=lambda t: (t.project_id, t.pk))]


# The check ---------------------------------------------------------------------------------------------------


def check(**attributes: Any) -> list[Any]:
    registry = ResourceRegistry()
    registry.register(type("Checked", (ByProjectName,), {"__module__": __name__, **attributes}))
    return [m for m in check_templates(registry) if m.id in ("mcp_resources.E004", "mcp_resources.W002")]


def test_e004_accepts_an_ordering_through_non_null_relations():
    assert check() == []
    assert check(ordering=("project", "id")) == []
    assert check(ordering=("project__name", "project__id", "created", "pk")) == []


@pytest.mark.parametrize(
    ("ordering", "says"),
    [
        (("project__team__name", "id"), "nullable relation 'team'"),
        (("project__members__username", "id"), "relation to many records"),
        (("project__tickets__title", "id"), "relation to many records"),
        (("title__lower", "id"), "which is not a relation"),
        (("project__nothing", "id"), "unknown field 'project__nothing'"),
        (("id", "project__name"), "must end in a unique, non-null field of library.Ticket"),
        (("id", "project__id"), "must end in a unique, non-null field of library.Ticket"),
    ],
)
def test_e004_refuses_what_cannot_order_a_keyset_through_relations(ordering, says):
    (message,) = check(ordering=ordering)
    assert message.id == "mcp_resources.E004"
    assert says in message.msg
