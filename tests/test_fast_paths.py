"""The fast paths (compiled listing, value rows, compiled completion, batched readers, compiled access): chosen from
declarations,
never compiled from what may change per request, bounded for records shared by thousands of readers.

Real database (SQLite and PostgreSQL with ``MCP_TEST_DB=postgres``), real models of ``testproject.agreement``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext

from mcp_resources import fastpaths
from mcp_resources.checks import check_fast_paths
from mcp_resources.listing.compiled import declared_access
from mcp_resources.protocol.versions import V2026_07_28
from mcp_resources.registries import ResourceRegistry
from mcp_resources.resources import ModelResourceTemplate
from mcp_resources.server import CallContext, MCPServer
from mcp_resources.transport.views import FORCED_PRINCIPAL, MCPView, StreamAccess
from testproject.agreement.models import Record, Seat, Workspace, current_tenant
from tests.listing_support import SCOPE, anonymous, context, principal_for, server_for, uris, walk

pytestmark = pytest.mark.django_db


class TenantRecords(ModelResourceTemplate):
    """Records owned by the caller, through the model's default manager (which filters by the current tenant)."""

    model = Record
    name = "records"
    uri_template = "agree://records/{slug}"
    required_scopes = (SCOPE,)
    ordering = ("slug",)
    name_field = "title"
    owner_field = "owner"


class SharedRecords(TenantRecords):
    """Records of the workspaces the caller has a seat in (a many-to-many through ``Seat``)."""

    name = "shared-records"
    uri_template = "agree://shared/{slug}"
    queryset = Record.everything.all()
    owner_field = "workspace__members"


@pytest.fixture
def tenant() -> Iterator[Any]:
    """Set the current tenant (reset after the test)."""
    tokens = []

    def use(name: str | None) -> None:
        tokens.append(current_tenant.set(name))

    yield use
    for token in reversed(tokens):
        current_tenant.reset(token)


def complete_slug(server: Any, ctx: Any, value: str = "") -> list[str]:
    body = {
        "ref": {"type": "ref/resource", "uri": TenantRecords.uri_template},
        "argument": {"name": "slug", "value": value},
    }
    values: list[str] = server.call("completion/complete", body, ctx)["completion"]["values"]
    return values


# 1. The default manager is never compiled -------------------------------------------------------------------------


def test_a_default_manager_that_filters_per_request_is_asked_on_every_request(alice: Any, tenant: Any) -> None:
    """Switching the tenant from A to B changes the listing and the completion. Before, the listing and the
    completion were compiled once per thread from the default manager: B's caller got A's record."""
    space = Workspace.objects.create(name="w")
    Record.objects.create(owner=alice, workspace=space, tenant="a", slug="a-record", title="A")
    Record.objects.create(owner=alice, workspace=space, tenant="b", slug="b-record", title="B")
    server = server_for(TenantRecords)
    ctx = context(alice)
    for name, expected in (("a", "a-record"), ("b", "b-record"), ("a", "a-record")):
        tenant(name)
        assert uris(walk(server, ctx)) == [f"agree://records/{expected}"], name
        assert complete_slug(server, ctx) == [expected], name
        assert server.call("resources/read", {"uri": f"agree://records/{expected}"}, ctx)["contents"]


# 2. A record shared by thousands of readers -----------------------------------------------------------------------


def test_a_record_with_5000_readers_is_decided_for_each_of_them(alice: Any) -> None:
    """One record, 5,000 subscribed readers and 100 callers who may not read it: every decision is right, in
    queries of bounded width, and the streams of a change (``StreamAccess.check_each``, what the fan-out delivers by)
    are told exactly the readers. Before, one SELECT had a column per caller: past 1,664 on PostgreSQL (about 2,000 on
    SQLite) it failed and every stream of the record ended."""
    User = get_user_model()
    User.objects.bulk_create(User(username=f"reader{i}") for i in range(5100))
    users = list(User.objects.filter(username__startswith="reader").order_by("pk"))
    readers, others = users[:5000], users[5000:]
    space = Workspace.objects.create(name="company")
    Seat.objects.bulk_create(Seat(workspace=space, user=user) for user in readers)
    record = Record.objects.create(owner=alice, workspace=space, slug="handbook", title="Handbook")
    server = server_for(SharedRecords)
    uri = f"agree://shared/{record.slug}"
    callers = [context(user) for user in users]
    with CaptureQueriesContext(connection) as queries:
        decisions = server.may_read_each(uri, callers)
    assert decisions == [True] * len(readers) + [False] * len(others)
    assert len(queries) <= 2 + len(users) // SharedRecords.readers_per_query
    # As the streams of a change decide it: each stream's caller authenticated again, all decided together.
    view = MCPView(server=server)
    accesses = []
    for user in users:
        request = RequestFactory().post("/mcp")
        setattr(request, FORCED_PRINCIPAL, (principal_for(user), user))
        accesses.append(StreamAccess(view, request, V2026_07_28))
    assert StreamAccess.check_each(uri, accesses) == [True] * len(readers) + [False] * len(others)


# 5. Fast paths are declared, and an override that turns one off is named -------------------------------------------


class OverriddenRecords(SharedRecords):
    """A no-op override of ``get_queryset``: the template says its rows are its own."""

    name = "overridden-records"
    uri_template = "agree://overridden/{slug}"

    def get_queryset(self, request: Any) -> Any:
        return super().get_queryset(request)


class DeclaredOverriddenRecords(OverriddenRecords):
    """The same override, with the fast paths it does not change declared back."""

    name = "declared-overridden-records"
    uri_template = "agree://declared-overridden/{slug}"
    fast_paths = fastpaths.ALL


def test_fast_paths_follow_the_declaration() -> None:
    """Undeclared, a class has every fast path its own hooks do not stand in front of; declared, exactly those."""
    assert SharedRecords.fast_paths == fastpaths.ALL
    assert OverriddenRecords.fast_paths == {fastpaths.VALUE_ROWS, fastpaths.OBJECT_ACCESS}
    assert DeclaredOverriddenRecords.fast_paths == fastpaths.ALL
    assert type("Sub", (DeclaredOverriddenRecords,), {}).fast_paths == fastpaths.ALL  # inherited as declared
    with pytest.raises(ImproperlyConfigured, match="unknown fast paths \\['compiled'\\]"):
        type("Wrong", (SharedRecords,), {"fast_paths": {"compiled"}})


def readers_queries(template: type[ModelResourceTemplate], server_class: type[MCPServer] = MCPServer) -> int:
    """The queries deciding 50 callers (25 readers) of one record of ``template``; the decisions are checked."""
    User = get_user_model()
    User.objects.bulk_create(User(username=f"{template.name}-{i}") for i in range(50))
    users = list(User.objects.filter(username__startswith=f"{template.name}-").order_by("pk"))
    space = Workspace.objects.create(name=template.name)
    Seat.objects.bulk_create(Seat(workspace=space, user=user) for user in users[:25])
    record = Record.objects.create(owner=users[0], workspace=space, slug=template.name, title="t")
    server = server_class(server_for(template).registry)
    uri = template.uri_template.replace("{slug}", record.slug)
    with CaptureQueriesContext(connection) as queries:
        decisions = server.may_read_each(uri, [context(user) for user in users])
    assert decisions == [True] * 25 + [False] * 25
    return len(queries)


def test_a_declared_template_decides_its_readers_in_one_query_and_an_override_is_asked_per_caller() -> None:
    """The batched readers: 2 queries for 50 subscribers where the template declares them (its override is a
    declared no-op), one per subscriber where its override turned them off."""
    assert readers_queries(SharedRecords) == 2
    assert readers_queries(DeclaredOverriddenRecords) == 2
    assert readers_queries(OverriddenRecords) > 50


class AuditingServer(MCPServer):
    """A server whose ``may_read`` refuses URIs under embargo, and counts its calls."""

    embargoed: ClassVar[set[str]] = set()
    calls = 0

    def may_read(self, uri: str, ctx: CallContext) -> bool:
        type(self).calls += 1
        return uri not in self.embargoed and super().may_read(uri, ctx)


def test_an_overridden_may_read_is_asked_for_every_caller_and_keeps_the_batched_readers(alice: Any) -> None:
    """The server's one access hook is asked for each caller, and the base it reaches answers from the one query of
    the batch. Before, overriding ``may_read`` switched the server to a query per caller (a context variable also
    changed what the base did)."""
    AuditingServer.calls = 0
    assert readers_queries(SharedRecords, AuditingServer) == 2
    assert AuditingServer.calls == 50
    space = Workspace.objects.create(name="embargo")
    Seat.objects.create(workspace=space, user=alice)
    Record.objects.create(owner=alice, workspace=space, slug="secret", title="t")
    AuditingServer.embargoed = {"agree://shared/secret"}
    try:
        server = AuditingServer(server_for(SharedRecords).registry)
        assert server.may_read_each("agree://shared/secret", [context(alice), context(alice)]) == [False, False]
    finally:
        AuditingServer.embargoed = set()


def test_w006_names_the_template_the_fast_path_and_its_cost() -> None:
    """An override that turns fast paths off is named by W006, with each path and its cost; a template that declares
    its fast paths, or whose hooks are the package's own (a REST framework template), is not."""
    registry = ResourceRegistry("w006")
    for template in (SharedRecords, OverriddenRecords, DeclaredOverriddenRecords):
        registry.register(template)
    (warning,) = check_fast_paths(registry)
    assert warning.id == "mcp_resources.W006"
    assert warning.obj is OverriddenRecords
    assert warning.msg.startswith("OverriddenRecords defines get_queryset(), which turns off 4 fast path(s): ")
    assert "the listing's page query compiled once from queryset and owner_field (off: every page is built and " in (
        warning.msg
    )
    assert "one query per subscriber before every update" in warning.msg
    assert "every access check builds and compiles the record's query with the ORM" in warning.msg
    assert "fast_paths" in (warning.hint or "")


def test_w006_names_a_default_manager_of_the_project() -> None:
    """A template without ``queryset`` over a model whose default manager is the project's: W006 says the compiled
    paths are off, and why (the manager may filter per request)."""
    registry = ResourceRegistry("w006-manager")
    registry.register(TenantRecords)
    (warning,) = check_fast_paths(registry)
    assert warning.id == "mcp_resources.W006"
    assert warning.obj is TenantRecords
    assert warning.msg == (
        "TenantRecords lists Record through its default manager (TenantManager), which may filter per request: the "
        "compiled listing and the compiled completion are off (every page and every completion is built and compiled "
        "by the ORM)."
    )


# 6. The compiled access check ---------------------------------------------------------------------------------------


class AuditedRecords(SharedRecords):
    """Shared records whose ``get_object`` counts its calls, declaring that it changes no answer (every fast path)."""

    name = "audited-records"
    uri_template = "agree://audited/{slug}"
    fast_paths = fastpaths.ALL
    fetched: ClassVar[list[str]] = []

    def get_object(self, request: Any, variables: Any) -> Any:
        type(self).fetched.append(variables["slug"])
        return super().get_object(request, variables)


class AuditedWithoutCompiledAccess(AuditedRecords):
    name = "audited-without"
    uri_template = "agree://audited-without/{slug}"
    fast_paths = fastpaths.ALL - {fastpaths.COMPILED_ACCESS}


class TwoVariableRecords(SharedRecords):
    """A record named by its workspace and its slug: two lookups, one through a foreign key."""

    name = "two-variable-records"
    uri_template = "agree://spaces/{space}/records/{slug}"
    lookup_fields = {"space": "workspace", "slug": "slug"}


def test_an_access_check_that_declares_it_runs_the_compiled_query_and_no_get_object(alice: Any, bob: Any) -> None:
    """A listen's acknowledgement, a subscription and every update decide a record of a template with
    ``"compiled_access"`` from its compiled query: ``get_object`` is not called, and the answers are its answers.
    Without the path (declared off), each check fetches the record with ``get_object``."""
    space = Workspace.objects.create(name="w")
    Seat.objects.create(workspace=space, user=alice)
    Record.objects.create(owner=alice, workspace=space, slug="mine", title="t")
    AuditedRecords.fetched.clear()
    for template, fetched in ((AuditedRecords, []), (AuditedWithoutCompiledAccess, ["mine", "mine", "nope"])):
        server = server_for(template)
        prefix = template.uri_template.removesuffix("{slug}")
        assert server.may_read(f"{prefix}mine", context(alice)) is True
        assert server.may_read(f"{prefix}mine", context(bob)) is False
        assert server.may_read(f"{prefix}nope", context(alice)) is False
        assert template.fetched == fetched, template.name
        template.fetched.clear()


@pytest.mark.parametrize(
    ("slug", "space"),
    [
        ("mine", None),  # alice's
        ("theirs", None),  # a record of a workspace she has no seat in
        ("absent", None),  # no such record
        ("a%00b", None),  # a NUL (from %00) names no row (PostgreSQL would refuse to compare it)
        ("mine", "abc"),  # a foreign key value no integer converts from
        ("mine", "99999999999999999999"),  # out of the column's range: the ORM finds no row, and sends nothing
        ("mine", "-1"),
    ],
)
def test_the_compiled_access_check_answers_what_get_object_answers(
    alice: Any, bob: Any, slug: str, space: str | None
) -> None:
    """For two lookups (one through a foreign key) and values that name no row, convert to nothing, overflow, or
    match twice: the compiled check and the ``get_object`` path (the same template with the path declared off) give
    the same answer, for the reader, for another user and for an anonymous caller."""
    mine = Workspace.objects.create(name="mine")
    other = Workspace.objects.create(name="other")
    Seat.objects.create(workspace=mine, user=alice)
    Seat.objects.create(workspace=other, user=bob)
    Record.objects.create(owner=alice, workspace=mine, slug="mine", title="t")
    Record.objects.create(owner=bob, workspace=other, slug="theirs", title="t")
    plain = type("PlainTwoVariableRecords", (TwoVariableRecords,), {"name": "plain-two", "fast_paths": frozenset()})
    compiled = type(
        "CompiledTwoVariableRecords", (TwoVariableRecords,), {"name": "compiled-two", "fast_paths": fastpaths.ALL}
    )
    uri_space = str(mine.pk) if space is None else space
    uri = f"agree://spaces/{uri_space}/records/{slug}"
    for ctx in (context(alice), context(bob), anonymous()):
        answers = [server_for(template).may_read(uri, ctx) for template in (plain, compiled)]
        assert answers[0] == answers[1], (uri, answers)
    assert server_for(compiled).may_read(uri, context(alice)) is (slug == "mine" and space is None)


class TitledRecords(SharedRecords):
    """Records named by their title, which two records may share."""

    name = "titled-records"
    uri_template = "agree://titled/{title}"
    lookup_fields = {"title": "title"}
    fast_paths = fastpaths.ALL


def test_two_records_of_one_uri_are_left_to_get_object(alice: Any) -> None:
    """Where two of the caller's records match a URI's lookups, ``get_object`` raises ``MultipleObjectsReturned``;
    the compiled check does not answer for it (``holds`` is ``None``), so the check raises the same."""
    space = Workspace.objects.create(name="w")
    Seat.objects.create(workspace=space, user=alice)
    Record.objects.create(owner=alice, workspace=space, slug="one", title="twin")
    Record.objects.create(owner=alice, workspace=space, slug="two", title="twin")
    server = server_for(TitledRecords)
    template = server.registry.get_template("titled-records")
    assert template is not None
    access = declared_access(template)
    assert access is not None
    assert access.holds(alice.pk, {"title": "twin"}) is None
    assert access.holds(alice.pk, {"title": "single"}) is False
    with pytest.raises(Record.MultipleObjectsReturned):
        server.may_read("agree://titled/twin", context(alice))


class OverriddenTextRecords(OverriddenRecords):
    """The same override, on a URI whose lookup is no field (``slug__iexact``): no compiled access to lose."""

    name = "overridden-text-records"
    uri_template = "agree://overridden-text/{slug}"
    lookup_fields = {"slug": "slug__iexact"}


def test_w006_names_the_compiled_access_only_where_the_lookups_allow_it() -> None:
    """The compiled access check needs every lookup of the URI to compare a field: a template whose lookup is a
    case-insensitive match never had it, so its override loses three paths, not four."""
    registry = ResourceRegistry("w006-lookups")
    registry.register(OverriddenTextRecords)
    (warning,) = check_fast_paths(registry)
    assert warning.msg.startswith("OverriddenTextRecords defines get_queryset(), which turns off 3 fast path(s): ")
    assert "the record's query compiled once" not in warning.msg
