"""Templates whose scope is declared (``owner_field`` + ``queryset``), including ``owner_field`` paths through
foreign keys, many-to-many relations and reverse foreign keys (memberships).

Real database (SQLite and PostgreSQL), real models. The reference is the same template written the other way, with
an overridden ``get_queryset`` computing the same scope: both must list (and read) exactly the same resources.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser, Group, Permission
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, models
from django.db.models import QuerySet
from django.http import HttpRequest
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext, isolate_apps
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application

from mcp_resources.checks import check_templates
from mcp_resources.exceptions import INTERNAL_ERROR, INVALID_PARAMS, MCPError
from mcp_resources.ownership import owner_path
from mcp_resources.protocol import jsonrpc
from mcp_resources.protocol.versions import CLIENT_CAPABILITIES_META, PROTOCOL_VERSION_META, V2026_07_28
from mcp_resources.registries import ResourceRegistry
from mcp_resources.resources import ModelResourceTemplate, ResourceTemplate
from mcp_resources.transport.views import MCPView
from testproject.library.models import Document, Membership, Note, Project, Team, Ticket
from tests.listing_support import (
    SCOPE,
    DeclaredDocumentSource,
    DocumentSource,
    TeamTicketSource,
    TicketSource,
    anonymous,
    assert_cut_by_the_deadline,
    computed,
    configure,
    context,
    document_uri,
    expected_documents,
    expected_tickets,
    list_page,
    principal_for,
    server_for,
    ticket_uri,
    walk,
)

pytestmark = pytest.mark.django_db

T0 = timezone.now() - timedelta(days=30)


OwnedDocuments = DeclaredDocumentSource


class ComputedDocuments(DocumentSource):
    """The reference: the same scope computed by an overridden ``get_queryset``."""

    name_field = "title"


def make(owner: Any, count: int, *, same_time: bool = False, deleted: int = 0) -> list[Document]:
    docs = Document.objects.bulk_create(
        Document(
            owner=owner,
            title=f"{owner.username} doc {i} ü/é?",
            body=f"body {i}",
            created=T0 if same_time else T0 + timedelta(minutes=i % 7),
        )
        for i in range(count)
    )
    for doc in docs[:deleted]:
        doc.deleted_at = timezone.now()
        doc.save()
    return docs


def listed(server: Any, ctx: Any, **params: Any) -> list[dict[str, Any]]:
    return [r for page in walk(server, ctx, **params) for r in page["resources"]]


@pytest.mark.parametrize("same_time", [False, True])
def test_the_declared_scope_lists_exactly_what_get_queryset_lists(settings, alice, bob, same_time):
    configure(settings, PAGE_SIZE=7)
    make(alice, 40, same_time=same_time, deleted=3)
    make(bob, 25, same_time=same_time)
    for user in (alice, bob):
        ctx = context(user)
        reference = listed(server_for(ComputedDocuments), ctx)
        assert [r["uri"] for r in reference] == expected_documents(user)
        assert listed(server_for(OwnedDocuments), ctx) == reference


def test_an_anonymous_caller_owns_nothing(alice):
    make(alice, 3)
    request = RequestFactory().get("/")
    request.user = AnonymousUser()
    assert list(OwnedDocuments().get_queryset(request)) == []
    request.user = alice
    assert OwnedDocuments().get_queryset(request).count() == 3


def test_reads_are_scoped_by_the_declared_owner(alice, bob):
    (mine,) = make(alice, 1)
    (theirs,) = make(bob, 1)
    server = server_for(OwnedDocuments)
    ctx = context(alice)
    read = server.call("resources/read", {"uri": document_uri(mine)}, ctx)
    assert read["contents"][0]["text"] == mine.body
    with pytest.raises(MCPError) as refused:
        server.call("resources/read", {"uri": document_uri(theirs)}, ctx)
    assert refused.value.code == INVALID_PARAMS


def test_a_prefix_is_pushed_into_the_scoped_orm_query(settings, alice, bob):
    configure(settings, PAGE_SIZE=4)
    docs = make(alice, 30)
    make(bob, 30)
    prefix = document_uri(docs[0])[:-1]
    ctx = context(alice)
    owned = listed(server_for(OwnedDocuments), ctx, prefix=prefix)
    assert owned == listed(server_for(ComputedDocuments), ctx, prefix=prefix)
    assert owned
    assert {r["uri"] for r in owned} <= set(expected_documents(alice))


def test_an_overridden_get_queryset_refines_the_declared_scope(settings, alice, bob):
    """A subclass may narrow the declared scope with ``super().get_queryset()``: its listing follows the override."""

    class Overridden(OwnedDocuments):
        def get_queryset(self, request: HttpRequest) -> QuerySet[Document]:
            return super().get_queryset(request).filter(title__contains="doc 1")

    configure(settings, PAGE_SIZE=3)
    make(alice, 25)
    make(bob, 25)
    expected = [
        document_uri(d)
        for d in sorted(Document.objects.filter(owner=alice, title__contains="doc 1"), key=lambda d: (d.created, d.pk))
    ]
    assert len(expected) == 11
    assert [r["uri"] for r in listed(server_for(Overridden), context(alice))] == expected


def test_a_declared_scope_page_is_cut_by_the_deadline(settings, alice):
    configure(settings, LIST_DEADLINE_SECONDS=0.000001)
    make(alice, 5)
    with pytest.raises(MCPError) as failed:
        list_page(server_for(OwnedDocuments), context(alice))
    assert failed.value.code == INTERNAL_ERROR


# owner_field paths: a chain of foreign keys ending at the user -------------------------------------------------


class TokensOfMyApplications(ModelResourceTemplate):
    """Access tokens of the applications the caller owns: ``owner_field`` through ``application``."""

    model = AccessToken
    name = "tokens"
    uri_template = "learn://tokens/{id}"
    required_scopes = (SCOPE,)
    ordering = ("expires", "id")
    name_field = "scope"
    owner_field = "application__user"

    def get_contents(self, request: HttpRequest, obj: Any) -> Any:
        return obj.scope


class ComputedTokens(TokensOfMyApplications):
    owner_field = None

    def get_queryset(self, request: HttpRequest) -> QuerySet[AccessToken]:
        return AccessToken.objects.filter(application__user_id=request.user.pk)


def make_tokens(alice: Any, bob: Any) -> dict[str, list[AccessToken]]:
    """Tokens of alice's application (issued to either user) and of bob's; expiry times tie in pairs."""
    apps = {
        owner.username: Application.objects.create(
            name=f"{owner.username}'s app",
            user=owner,
            client_type=Application.CLIENT_CONFIDENTIAL,
            authorization_grant_type=Application.GRANT_CLIENT_CREDENTIALS,
        )
        for owner in (alice, bob)
    }
    expires = timezone.now() + timedelta(hours=1)
    return {
        name: [
            AccessToken.objects.create(
                user=(alice, bob)[i % 2],
                application=app,
                token=f"{name}-token-{i}",
                expires=expires + timedelta(minutes=i // 2),
                scope=f"scope {i} of {name}",
            )
            for i in range(9)
        ]
        for name, app in apps.items()
    }


def test_an_owner_field_path_lists_what_the_equivalent_get_queryset_lists(settings, alice, bob):
    configure(settings, PAGE_SIZE=4)
    tokens = make_tokens(alice, bob)
    for user in (alice, bob):
        ctx = context(user)
        declared = listed(server_for(TokensOfMyApplications), ctx)
        assert declared == listed(server_for(ComputedTokens), ctx)
        mine = sorted(tokens[user.username], key=lambda t: (t.expires, t.pk))
        assert [r["uri"] for r in declared] == [f"learn://tokens/{t.pk}" for t in mine]
        assert [r["name"] for r in declared] == [t.scope for t in mine]


def test_reads_follow_the_owner_field_path(alice, bob):
    tokens = make_tokens(alice, bob)
    server = server_for(TokensOfMyApplications)
    issued_to_bob_by_alices_app = tokens["alice"][1]
    assert issued_to_bob_by_alices_app.user == bob
    read = server.call("resources/read", {"uri": f"learn://tokens/{issued_to_bob_by_alices_app.pk}"}, context(alice))
    assert read["contents"][0]["text"] == issued_to_bob_by_alices_app.scope
    with pytest.raises(MCPError) as refused:
        server.call("resources/read", {"uri": f"learn://tokens/{issued_to_bob_by_alices_app.pk}"}, context(bob))
    assert refused.value.code == INVALID_PARAMS


def test_a_path_of_single_valued_relations_is_a_join_and_a_membership_path_a_semi_join():
    user_pk = get_user_model()._meta.pk
    for model, path in [(Document, "owner"), (AccessToken, "application__user")]:
        resolved = owner_path(model, path)
        assert (resolved.many_valued, resolved.semi_join, resolved.value_field) == (False, None, user_pk), path
    members = owner_path(Ticket, "project__members").semi_join
    assert members is not None
    assert (members.model, members.link, members.outer, members.owner) == (
        Project.members.through,
        "project",
        "project__id",
        "user__pk",
    )
    teams = owner_path(Ticket, "project__team__memberships__user").semi_join
    assert teams is not None
    assert (teams.model, teams.link, teams.outer, teams.owner) == (Membership, "team", "project__team__id", "user__pk")
    groups = owner_path(Permission, "group__user").semi_join  # two reverse many-to-many relations
    assert groups is not None
    assert (groups.model, groups.link, groups.outer, groups.owner) == (
        Group.permissions.through,
        "permission",
        "id",
        "group__user__pk",
    )


@pytest.mark.parametrize(
    ("model", "path", "reason"),
    [
        (Document, "title", "library.Document.title is not a relation."),
        (Document, "owner__username", "auth.User.username is not a relation."),
        (AccessToken, "application", "it ends at oauth2_provider.Application, not at auth.User."),
        (AccessToken, "application__name", "oauth2_provider.Application.name is not a relation."),
        (AccessToken, "nothing__user", "oauth2_provider.AccessToken has no field 'nothing'."),
        (Ticket, "project__team__memberships", "it ends at library.Membership, not at auth.User."),
        (Ticket, "project__members__username", "auth.User.username is not a relation."),
        (Document, "", "owner_field must be a non-empty path of relations to the user model."),
    ],
)
def test_owner_path_says_why_a_path_does_not_lead_to_the_user(model, path, reason):
    with pytest.raises(ImproperlyConfigured) as refused:
        owner_path(model, path)
    assert str(refused.value) == reason


# owner_field through memberships: many-to-many and reverse foreign keys -------------------------------------


class ProjectsOfMyTeams(ModelResourceTemplate):
    """The issue's example: ``team__memberships__user`` (a foreign key, then a reverse foreign key)."""

    model = Project
    name = "projects"
    uri_template = "learn://projects/{id}"
    required_scopes = (SCOPE,)
    ordering = ("name", "id")
    name_field = "name"
    owner_field = "team__memberships__user"


class PermissionsOfMyGroups(ModelResourceTemplate):
    """Two reverse many-to-many relations (``Group.permissions``, then ``User.groups``), from contrib.auth."""

    model = Permission
    name = "permissions"
    uri_template = "learn://permissions/{id}"
    required_scopes = (SCOPE,)
    ordering = ("id",)
    name_field = "codename"
    owner_field = "group__user"


MEMBERSHIP_TEMPLATES = [TicketSource, TeamTicketSource, ProjectsOfMyTeams, PermissionsOfMyGroups]


def make_projects(alice: Any, bob: Any, carol: Any) -> dict[str, Project]:
    """Projects with members and teams with memberships; alice holds two roles in team t1 (two membership rows:
    a plain join would list each t1 ticket twice for her). Tickets tie on their creation time in pairs."""
    t1, t2 = Team.objects.create(name="t1"), Team.objects.create(name="t2")
    Membership.objects.bulk_create(
        [
            Membership(team=t1, user=alice, role="member"),
            Membership(team=t1, user=alice, role="admin"),
            Membership(team=t1, user=bob),
            Membership(team=t2, user=bob),
        ]
    )
    projects = {
        "p1": Project.objects.create(name="p1 ü", team=t1),
        "p2": Project.objects.create(name="p2", team=t2),
        "p3": Project.objects.create(name="P3"),
        "p4": Project.objects.create(name="p4", team=t1),
    }
    projects["p1"].members.add(alice, bob)
    projects["p2"].members.add(bob, carol)
    projects["p3"].members.add(alice)
    for n, project in enumerate(projects.values()):
        Ticket.objects.bulk_create(
            Ticket(
                project=project, title=f"{project.name} ticket {i}", body=f"body {i}", created=T0 + timedelta(i // 2)
            )
            for i in range(6 - n)
        )
    groups = [Group.objects.create(name=f"g{i}") for i in range(3)]
    permissions = list(Permission.objects.order_by("id")[:12])
    groups[0].permissions.set(permissions[:6])
    groups[1].permissions.set(permissions[3:9])  # permissions 3 to 5 through both of alice's groups
    groups[2].permissions.set(permissions[6:])
    alice.groups.add(groups[0], groups[1])
    bob.groups.add(groups[2])
    return projects


@pytest.fixture
def carol(db: None) -> Any:
    return get_user_model().objects.create_user("carol", password="carol")


def distinct_expected(template: type[ModelResourceTemplate], user: Any) -> list[str]:
    """What ``template`` must list for ``user``: the rows the plain join selects, each once, in its ordering."""
    assert template.model is not None
    assert template.owner_field is not None
    rows = template.model._default_manager.filter(**{template.owner_field: user.pk}).order_by(*template.ordering)
    pks = list(dict.fromkeys(rows.values_list("pk", flat=True)))
    if template.ordering == ("name", "id"):
        by_pk = {p.pk: p for p in Project.objects.filter(pk__in=pks)}
        pks = sorted(pks, key=lambda pk: (by_pk[pk].name.encode(), pk))  # text keys list in byte order
    return [template.uri_template.replace("{id}", str(pk)) for pk in pks]


@pytest.mark.parametrize("page_size", [1, 2, 100])
@pytest.mark.parametrize("template", MEMBERSHIP_TEMPLATES, ids=lambda t: t.__name__)
def test_a_membership_path_lists_each_record_once_what_the_reference_lists(
    settings, alice, bob, carol, template, page_size
):
    configure(settings, PAGE_SIZE=page_size)
    make_projects(alice, bob, carol)
    duplicated = False
    for user in (alice, bob, carol):
        ctx = context(user)
        declared = listed(server_for(template), ctx)
        uris = [r["uri"] for r in declared]
        assert uris == distinct_expected(template, user)
        assert len(set(uris)) == len(uris)
        assert declared == listed(server_for(computed(template)), ctx)
        joined = template.model._default_manager.filter(**{template.owner_field: user.pk}).count()
        duplicated |= joined > len(uris)
    if template in (TeamTicketSource, ProjectsOfMyTeams, PermissionsOfMyGroups):
        assert duplicated, "the data must make the plain join repeat rows, or this test proves nothing"
    assert [r["uri"] for r in listed(server_for(TicketSource), context(carol))] == expected_tickets(carol)


def test_a_membership_scope_is_one_page_query_with_an_exists_subquery(alice, bob, carol):
    make_projects(alice, bob, carol)
    for template in (TicketSource, TeamTicketSource):
        with CaptureQueriesContext(connection) as queries:
            list_page(server_for(template), context(alice))
        (sql,) = [q["sql"] for q in queries.captured_queries if "library_ticket" in q["sql"]]
        assert sql.count("EXISTS") == 1, sql
        assert "DISTINCT" not in sql.upper(), sql
        outer = sql.split("EXISTS", 1)[0]
        assert "project_members" not in outer, sql  # the memberships are not joined: no row is repeated
        assert "library_membership" not in outer, sql


@pytest.mark.parametrize("template", [OwnedDocuments, *MEMBERSHIP_TEMPLATES], ids=lambda t: t.__name__)
def test_access_decided_for_many_callers_at_once_is_what_each_caller_is_decided(alice, bob, carol, template):
    """``MCPServer.may_read_each`` (one change, many subscribers) answers exactly as ``may_read`` caller by caller,
    in one query for the record whatever the number of callers; a caller without the scope, an anonymous caller
    and URIs of no record are among them."""
    make_projects(alice, bob, carol)
    make(alice, 2)
    make(bob, 1)
    server = server_for(template)
    assert template.model is not None
    callers = [context(alice), context(bob), context(carol), anonymous(), context(alice, scopes=()), context(bob)]
    pks = list(template.model._default_manager.order_by("pk").values_list("pk", flat=True)[:8])
    uris = [template.uri_template.replace("{id}", str(pk)) for pk in [*pks, 10**9, "x"]]
    seen_both = set()
    for uri in uris:
        expected = [server.may_read(uri, ctx) for ctx in callers]
        with CaptureQueriesContext(connection) as queries:
            assert server.may_read_each(uri, callers) == expected, uri
        record_queries = [q for q in queries.captured_queries if template.model._meta.db_table in q["sql"]]
        assert len(record_queries) <= 1, record_queries
        seen_both |= set(expected)
    assert seen_both == {True, False}, "the data must give some callers access and refuse others"
    assert template().decides_readers_in_one_query
    assert not computed(template)().decides_readers_in_one_query  # an overridden get_queryset: caller by caller


def test_subscription_access_checks_follow_membership_changes(alice, bob, carol):
    """Before each update a subscription re-checks that its caller may still read the record
    (``MCPServer.may_read``): through a membership, that is the membership as it is at that moment."""
    projects = make_projects(alice, bob, carol)
    ticket = Ticket.objects.filter(project=projects["p1"]).first()
    assert ticket is not None
    for template in (TicketSource, TeamTicketSource):
        server, uri = server_for(template), ticket_uri(ticket, template)
        assert server.may_read(uri, context(bob))
        assert not server.may_read(uri, context(carol))
    projects["p1"].members.remove(bob)
    Membership.objects.filter(user=bob, team=projects["p1"].team).delete()
    for template in (TicketSource, TeamTicketSource):
        assert not server_for(template).may_read(ticket_uri(ticket, template), context(bob))
    Membership.objects.filter(user=alice, team=projects["p1"].team, role="admin").delete()  # one role of two left
    assert server_for(TeamTicketSource).may_read(ticket_uri(ticket, TeamTicketSource), context(alice))


def test_reads_follow_membership_changes(alice, bob, carol):
    projects = make_projects(alice, bob, carol)
    ticket = Ticket.objects.filter(project=projects["p2"]).first()
    assert ticket is not None
    uri = ticket_uri(ticket)
    server = server_for(TicketSource)
    assert server.call("resources/read", {"uri": uri}, context(carol))["contents"][0]["text"] == ticket.body
    no_user = context(None, principal=principal_for(None, subject=None))  # a client-credentials token
    for outsider in (context(alice), no_user):
        with pytest.raises(MCPError) as refused:
            server.call("resources/read", {"uri": uri}, outsider)
        assert refused.value.code == INVALID_PARAMS
    projects["p2"].members.remove(carol)
    with pytest.raises(MCPError) as removed:
        server.call("resources/read", {"uri": uri}, context(carol))
    assert removed.value.code == INVALID_PARAMS
    projects["p2"].members.add(alice)
    assert server.call("resources/read", {"uri": uri}, context(alice))["contents"][0]["text"] == ticket.body


def test_an_anonymous_caller_is_a_member_of_nothing(alice, bob, carol):
    make_projects(alice, bob, carol)
    request = RequestFactory().get("/")
    request.user = AnonymousUser()
    for template in MEMBERSHIP_TEMPLATES:
        assert list(template().get_queryset(request)) == [], template


def test_a_prefix_is_pushed_into_a_membership_scope(settings, alice, bob, carol):
    configure(settings, PAGE_SIZE=2)
    make_projects(alice, bob, carol)
    prefix = expected_tickets(bob, TeamTicketSource)[0][:-1]
    ctx = context(bob)
    found = listed(server_for(TeamTicketSource), ctx, prefix=prefix)
    assert found
    assert found == listed(server_for(computed(TeamTicketSource)), ctx, prefix=prefix)
    assert [r["uri"] for r in found] == [u for u in expected_tickets(bob, TeamTicketSource) if u.startswith(prefix)]


# The page query of a declared scope starts an index range (PostgreSQL) ------------------------------------------


@pytest.mark.skipif(connection.vendor != "postgresql", reason="a PostgreSQL plan")
def test_a_declared_scope_keyset_page_starts_an_index_range(settings, alice, bob):
    """The query a later page of a declared-scope listing runs reads the (owner, created, id) index from the
    position on: it never scans the owner's earlier rows (nor anyone else's) to filter them."""
    configure(settings, PAGE_SIZE=50)
    for owner in (alice, bob):
        Document.objects.bulk_create(
            Document(owner=owner, title=f"t{i}", created=T0 + timedelta(seconds=i)) for i in range(3000)
        )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE library_document")  # the planner sees thousands of rows per owner, as in production
    server = server_for(OwnedDocuments)
    cursor = list_page(server, context(alice))["nextCursor"]
    for _ in range(20):
        cursor = list_page(server, context(alice), cursor=cursor)["nextCursor"]
    with CaptureQueriesContext(connection) as queries:
        list_page(server, context(alice), cursor=cursor)
    (sql,) = [q["sql"] for q in queries.captured_queries if "library_document" in q["sql"]]
    sql = re.sub(r"^SET LOCAL statement_timeout = \d+; ", "", sql)
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    index_condition = next(line for line in plan.splitlines() if "Index Cond" in line)
    assert "library_doc_owner_keyset" in plan, plan
    assert "owner_id" in index_condition, plan
    assert "created" in index_condition, plan
    assert ">=" in index_condition, plan


def explain_next_page(server: Any, ctx: Any, table: str, pages: int) -> str:
    """The plan of the query that the page after ``pages`` pages runs on ``table``."""
    cursor = list_page(server, ctx)["nextCursor"]
    for _ in range(pages):
        cursor = list_page(server, ctx, cursor=cursor)["nextCursor"]
    with CaptureQueriesContext(connection) as queries:
        list_page(server, ctx, cursor=cursor)
    (sql,) = [q["sql"] for q in queries.captured_queries if f'"{table}"' in q["sql"]]
    sql = re.sub(r"^SET LOCAL statement_timeout = \d+; ", "", sql)
    with connection.cursor() as explain:
        explain.execute("EXPLAIN " + sql)
        return "\n".join(row[0] for row in explain.fetchall())


def index_ranges(plan: str) -> dict[str, str]:
    """``{index: its Index Cond}`` of every index scan (plain, index-only or bitmap) in ``plan``."""
    ranges: dict[str, str] = {}
    scan = None
    for line in plan.splitlines():
        found = re.search(r"(?:Index Scan|Index Only Scan) (?:Backward )?using (\w+)|Bitmap Index Scan on (\w+)", line)
        if found:
            scan = found.group(1) or found.group(2)
        elif "Index Cond:" in line and scan is not None:
            ranges[scan] = line.split("Index Cond:", 1)[1].strip()
            scan = None
    return ranges


def shared_tickets(projects: int, tickets: int, mine: int, user: Any) -> None:
    """``projects`` projects of ``tickets`` tickets each (one team each), three other members in every project and
    team; ``user`` a member of the first ``mine`` (and of their teams). Ticket times interleave the projects."""
    others = [get_user_model().objects.create_user(f"member {i}") for i in range(12)]
    teams = Team.objects.bulk_create(Team(name=f"team {i}") for i in range(projects))
    rows = Project.objects.bulk_create(Project(name=f"project {i}", team=teams[i]) for i in range(projects))
    through = Project.members.through
    through.objects.bulk_create(
        through(project=project, user=others[(i + k) % 12]) for i, project in enumerate(rows) for k in range(3)
    )
    through.objects.bulk_create(through(project=project, user=user) for project in rows[:mine])
    Membership.objects.bulk_create(
        Membership(team=team, user=others[(i + k) % 12]) for i, team in enumerate(teams) for k in range(3)
    )
    Membership.objects.bulk_create(Membership(team=team, user=user) for team in teams[:mine])
    Ticket.objects.bulk_create(
        Ticket(project=project, title=f"t{j}", created=T0 + timedelta(seconds=j * projects + i))
        for j in range(tickets)
        for i, project in enumerate(rows)
    )
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # no pending trigger events before ANALYZE
        cursor.execute("ANALYZE library_ticket, library_project, library_project_members, library_membership")


@pytest.mark.skipif(connection.vendor != "postgresql", reason="a PostgreSQL plan")
@pytest.mark.parametrize("template", [TicketSource, TeamTicketSource], ids=["project__members", "team-memberships"])
def test_a_membership_scope_keyset_page_reads_each_project_from_the_position(settings, alice, template):
    """A caller in a few of many projects: the page query reads the caller's memberships, then the (project,
    created, id) index of each of their projects from the position on (an index range per project, started by the
    keyset's leading >=); never the tickets of other projects, never the table."""
    configure(settings, PAGE_SIZE=20)
    shared_tickets(projects=300, tickets=30, mine=3, user=alice)
    plan = explain_next_page(server_for(template), context(alice), "library_ticket", pages=2)
    condition = index_ranges(plan).get("library_ticket_project_keyset", "")
    assert "project_id = " in condition, plan
    assert "created >= " in condition, plan
    assert "Seq Scan on library_ticket" not in plan, plan


@pytest.mark.skipif(connection.vendor != "postgresql", reason="a PostgreSQL plan")
@pytest.mark.parametrize("template", [TicketSource, TeamTicketSource], ids=["project__members", "team-memberships"])
def test_a_membership_scope_keyset_page_walks_the_ordering_index_for_a_large_share(settings, alice, template):
    """A caller in half of the projects: the page query walks the (created, id) index from the position on and
    keeps the rows the caller's memberships reach (a semi-join probe per row), stopping at the page's end."""
    configure(settings, PAGE_SIZE=20)
    shared_tickets(projects=40, tickets=150, mine=20, user=alice)
    plan = explain_next_page(server_for(template), context(alice), "library_ticket", pages=2)
    condition = index_ranges(plan).get("library_ticket_keyset", "")
    assert condition.startswith("(created >= "), plan
    assert "Sort" not in plan, plan  # read in the order of the index: the page ends after its rows
    assert "Seq Scan on library_ticket" not in plan, plan


# The statement timeout bounds a declared scope's page as any other (PostgreSQL) ---------------------------------


class SlowOwnedDocuments(OwnedDocuments):
    queryset = Document.objects.extra(where=["(SELECT 1 FROM pg_sleep(1)) = 1"])


@pytest.mark.skipif(connection.vendor != "postgresql", reason="statement timeouts are a PostgreSQL feature")
@pytest.mark.django_db(transaction=True)
def test_a_declared_scope_page_runs_under_the_statement_timeout(settings, binding, alice):
    make(alice, 3)
    configure(settings, LIST_DEADLINE_SECONDS=0.2)
    assert_cut_by_the_deadline(lambda: list_page(server_for(SlowOwnedDocuments), context(alice)))
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == "0"
    configure(settings, LIST_DEADLINE_SECONDS=10)
    assert len(list_page(server_for(OwnedDocuments), context(alice))["resources"]) == 3


# System checks ---------------------------------------------------------------------------------------------


def check_ids(template: type[ModelResourceTemplate]) -> list[str]:
    registry = ResourceRegistry()
    registry.register(template)
    return [m.id for m in check_templates(registry) if m.level >= checks.ERROR]


def test_checks_accept_a_declared_scope_and_refuse_a_wrong_one():
    assert check_ids(OwnedDocuments) == []

    class NotAUser(OwnedDocuments):
        owner_field = "title"

    class Unknown(OwnedDocuments):
        owner_field = "author"

    class OtherModel(OwnedDocuments):
        queryset = Note.objects.all()

    class Nothing(OwnedDocuments):
        owner_field = None

    assert check_ids(NotAUser) == ["mcp_resources.E019"]
    assert check_ids(Unknown) == ["mcp_resources.E019"]
    assert check_ids(OtherModel) == ["mcp_resources.E019"]
    assert check_ids(Nothing) == ["mcp_resources.E005"]


def test_checks_accept_an_owner_field_path_to_the_user_and_refuse_any_other():
    assert check_ids(TokensOfMyApplications) == []

    class ToTheApplication(TokensOfMyApplications):
        owner_field = "application"

    class PastTheRelation(TokensOfMyApplications):
        owner_field = "application__name"

    class PastTheUser(TokensOfMyApplications):
        owner_field = "application__user__username"

    for template in (ToTheApplication, PastTheRelation, PastTheUser):
        assert check_ids(template) == ["mcp_resources.E019"], template


def check_messages(template: type[ModelResourceTemplate]) -> list[str]:
    registry = ResourceRegistry()
    registry.register(template)
    return [f"{m.id}: {m.msg}" for m in check_templates(registry) if m.level >= checks.ERROR]


def test_checks_accept_a_path_through_a_many_to_many():
    assert check_messages(TicketSource) == []  # project__members


def test_checks_accept_a_path_through_a_reverse_foreign_key():
    assert check_messages(ProjectsOfMyTeams) == []  # team__memberships__user
    assert check_messages(TeamTicketSource) == []  # project__team__memberships__user


def test_checks_accept_a_path_through_reverse_many_to_many_relations():
    assert check_messages(PermissionsOfMyGroups) == []  # group__user


def test_checks_refuse_a_membership_path_that_does_not_end_at_the_user_model():
    class ToTheMembership(TicketSource):
        owner_field = "project__team__memberships"

    assert check_messages(ToTheMembership) == [
        "mcp_resources.E019: ToTheMembership.owner_field 'project__team__memberships' does not lead to auth.User: "
        "it ends at library.Membership, not at auth.User."
    ]


def test_checks_refuse_a_step_that_is_not_a_relation_and_name_it():
    class PastTheMembers(TicketSource):
        owner_field = "project__members__username"

    class ProjectName(TicketSource):
        owner_field = "project__name"

    assert check_messages(PastTheMembers) == [
        "mcp_resources.E019: PastTheMembers.owner_field 'project__members__username' does not lead to auth.User: "
        "auth.User.username is not a relation."
    ]
    assert check_messages(ProjectName) == [
        "mcp_resources.E019: ProjectName.owner_field 'project__name' does not lead to auth.User: "
        "library.Project.name is not a relation."
    ]


def test_checks_refuse_an_unknown_step_and_name_it():
    class Misspelt(TicketSource):
        owner_field = "project__member"

    assert check_messages(Misspelt) == [
        "mcp_resources.E019: Misspelt.owner_field 'project__member' does not lead to auth.User: "
        "library.Project has no field 'member'."
    ]


@isolate_apps("testproject.library")
def test_checks_refuse_a_relation_that_owner_field_does_not_follow():
    """A ``ForeignObject`` (or a ``GenericRelation``) is a relation, but not one the scope can follow."""

    class Holder(models.Model):  # noqa: DJ008
        class Meta:
            app_label = "library"

    class Held(models.Model):  # noqa: DJ008
        holder_id = models.IntegerField()
        holder = models.ForeignObject(Holder, models.CASCADE, from_fields=["holder_id"], to_fields=["id"])

        class Meta:
            app_label = "library"

    class HeldResource(TicketSource):
        model = Held
        queryset = None
        ordering = ("id",)
        owner_field = "holder__id"

    assert check_messages(HeldResource) == [
        "mcp_resources.E019: HeldResource.owner_field 'holder__id' does not lead to auth.User: library.Held.holder "
        "is a ForeignObject; owner_field follows ForeignKey, OneToOneField, ManyToManyField and their reverse "
        "relations."
    ]


# Which results take the plain (orjson) encoder -----------------------------------------------------------------


def test_template_annotations_keep_the_strict_encoder(settings):
    """A template's annotations may hold floats: a NaN priority is refused, never sent as ``null``."""

    class Odd(ResourceTemplate):
        name = "odd"
        uri_template = "odd://{id}"
        access = "public"
        annotations = {"priority": float("nan")}

    settings.ALLOWED_HOSTS = ["testserver"]
    view = MCPView.as_view(server=server_for(Odd))
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "resources/templates/list",
        "params": {
            "_meta": {
                PROTOCOL_VERSION_META: V2026_07_28,
                CLIENT_CAPABILITIES_META: {},
            }
        },
    }
    request = RequestFactory().post(
        "/mcp",
        data=jsonrpc.dumps(body),
        content_type="application/json",
        HTTP_MCP_PROTOCOL_VERSION=V2026_07_28,
        HTTP_MCP_METHOD="resources/templates/list",
    )
    answer = json.loads(view(request).content)
    assert "result" not in answer
    assert answer["error"]["code"] == INTERNAL_ERROR
