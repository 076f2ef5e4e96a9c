"""Listed, read, completed and notified agree: a property, over generated projects' shapes (hypothesis).

Generated: users, organizations with staff, workspaces with seats (several roles a user), records with an owner, a
workspace, a tenant and an archived flag, and the current tenant of each request. The shapes are templates over
``testproject.agreement``'s models: an owner foreign key, a many-to-many through ``Seat``, a reverse foreign key, three
hops, a default manager that filters per request (the tenant), an overridden ``get_queryset``, a no-op override that
declares its fast paths back, a ``list()`` callback, a repository, a REST framework viewset (object permissions,
versioning, two URI variables) and a server whose ``may_read`` is overridden.

For every caller: the URIs listed across all pages are exactly the URIs that read (with records and memberships
changing between pages: every page's entries read when served, and every record readable throughout is listed
once); completion offers only values of listed records; the batch hook (a change's subscribers) and a listen's
acknowledgement decide exactly the readable URIs; and every fast path answers what the plain ORM path answers
(the same templates with ``fast_paths = frozenset()``).

The default profile keeps ``make test`` fast (``MCP_HYPOTHESIS_PROFILE=long`` or ``make properties``: many more
examples). Runs on SQLite and, with ``MCP_TEST_DB=postgres``, on PostgreSQL.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework import permissions, serializers, versioning, viewsets

from mcp_resources import fastpaths
from mcp_resources.drf import from_viewset
from mcp_resources.exceptions import MCPError, PageTokenRejected, ResourceNotFound
from mcp_resources.registries import ResourceRegistry
from mcp_resources.resources import ModelResourceTemplate, RepositoryPage, ResourceRepository, ResourceTemplate
from mcp_resources.server import CallContext, MCPServer
from testproject.agreement.models import Organization, Record, Seat, Staff, Workspace, current_tenant
from tests.listing_support import SCOPE, configure, context

pytestmark = pytest.mark.django_db

settings.register_profile(
    "agreement",
    max_examples=8,
    derandomize=True,  # the same examples on every run of `make test`: a red CI is reproducible, never a dice roll
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "agreement-long",
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
PROFILE = "agreement-long" if os.environ.get("MCP_HYPOTHESIS_PROFILE") == "long" else "agreement"


# The shapes --------------------------------------------------------------------------------------------------------


class Shape(ModelResourceTemplate):
    model = Record
    required_scopes = (SCOPE,)
    ordering = ("slug",)
    name_field = "title"
    queryset = Record.everything.all()

    def get_contents(self, request: HttpRequest, obj: Any) -> Any:
        return obj.title


class Owned(Shape):
    name = "owned"
    uri_template = "agree://owned/{slug}"
    owner_field = "owner"


class Seated(Shape):
    name = "seated"
    uri_template = "agree://seated/{slug}"
    owner_field = "workspace__members"  # a many-to-many through Seat


class Seats(Shape):
    name = "seats"
    uri_template = "agree://seats/{slug}"
    owner_field = "workspace__seats__user"  # a reverse foreign key


class Staffed(Shape):
    name = "staffed"
    uri_template = "agree://staffed/{slug}"
    owner_field = "workspace__organization__staff__user"  # three hops


class Tenanted(Shape):
    name = "tenanted"
    uri_template = "agree://tenanted/{slug}"
    owner_field = "owner"
    queryset = None  # the default manager: the current tenant's records


class Unarchived(Shape):
    """An overridden ``get_queryset``: seated records that are not archived."""

    name = "unarchived"
    uri_template = "agree://unarchived/{slug}"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return Record.everything.filter(workspace__seats__user=request.user.pk, archived=False).distinct()


class SelectRelated(Seats):
    """A no-op override that declares its fast paths back."""

    name = "select-related"
    uri_template = "agree://select-related/{slug}"
    fast_paths = fastpaths.ALL

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return super().get_queryset(request).select_related("workspace")


class StaffList(ResourceTemplate):
    """A ``list()`` callback: the records of the caller's organizations (staff), keyed by slug."""

    name = "staff-list"
    uri_template = "agree://staff-list/{slug}"
    required_scopes = (SCOPE,)

    def rows(self, request: HttpRequest) -> QuerySet[Any]:
        return Record.everything.filter(workspace__organization__staff__user=request.user.pk).distinct()

    def list(self, request: HttpRequest, *, after: str | None, limit: int, prefix: str, deadline: float) -> Any:
        rows = self.rows(request).order_by("slug")
        if after is not None:
            rows = rows.filter(slug__gt=after)
        entries = [(r.slug, {"uri": self.compiled.expand({"slug": r.slug}), "name": r.title}) for r in rows]
        entries = [(key, resource) for key, resource in entries if resource["uri"].startswith(prefix)]
        return entries[:limit], len(entries) > limit

    def read(self, request: HttpRequest, uri: str, variables: Any) -> Any:
        if not self.rows(request).filter(slug=variables["slug"]).exists():
            raise ResourceNotFound()
        return variables["slug"]


class OwnedRepository(ResourceRepository):
    """A repository: the caller's records from a pager of its own (the token is the last slug)."""

    name = "repository"
    uri_template = "agree://repository/{slug}"
    required_scopes = (SCOPE,)

    def list_page(
        self, request: HttpRequest, *, token: str | bytes | None, limit: int, prefix: str, deadline: float
    ) -> Any:
        if isinstance(token, bytes):
            raise PageTokenRejected()
        rows = Record.everything.filter(owner_id=request.user.pk).order_by("slug")
        if token:
            rows = rows.filter(slug__gt=token)
        batch = list(rows[: min(limit, 2)])
        resources = [{"uri": self.compiled.expand({"slug": r.slug}), "name": r.title} for r in batch]
        more = len(batch) == min(limit, 2) and rows.filter(slug__gt=batch[-1].slug).exists() if batch else False
        return RepositoryPage(resources, batch[-1].slug if more else None)

    def read(self, request: HttpRequest, uri: str, variables: Any) -> Any:
        if not Record.everything.filter(owner_id=request.user.pk, slug=variables["slug"]).exists():
            raise ResourceNotFound()
        return variables["slug"]


class RecordSerializer(serializers.ModelSerializer[Record]):
    version = serializers.SerializerMethodField()

    class Meta:
        model = Record
        fields = ["slug", "title", "version"]

    def get_version(self, obj: Record) -> Any:
        return self.context["request"].version


class NotArchived(permissions.BasePermission):
    """An object permission: archived records are refused."""

    def has_object_permission(self, request: Any, view: Any, obj: Record) -> bool:
        return not obj.archived


class V1(versioning.QueryParameterVersioning):
    default_version = "v1"


class SeatRecordViewSet(viewsets.ReadOnlyModelViewSet[Record]):
    """A viewset as teams write it: object permissions, versioning (v1 sees every seated record, no other version
    sees any), looked up by slug within a workspace."""

    serializer_class = RecordSerializer
    permission_classes = [permissions.IsAuthenticated, NotArchived]
    versioning_class = V1
    lookup_field = "slug"

    def get_queryset(self) -> QuerySet[Record]:
        queryset = Record.everything.filter(workspace__seats__user=self.request.user.pk).distinct()
        return queryset if self.request.version == "v1" else queryset.none()


SeatViewSet = from_viewset(
    SeatRecordViewSet,
    name="viewset",
    uri_template="agree://workspaces/{workspace}/viewset/{slug}",
    lookup_fields={"workspace": "workspace_id", "slug": "slug"},
    ordering=("slug",),
    required_scopes=(SCOPE,),
)

MODEL_SHAPES: tuple[type[Shape], ...] = (Owned, Seated, Seats, Staffed, Tenanted, Unarchived, SelectRelated)
SHAPES: tuple[type[ResourceTemplate], ...] = (*MODEL_SHAPES, StaffList, OwnedRepository, SeatViewSet)


def uri_of(name: str, record: Record, workspace: int | None = None) -> str:
    """The URI of ``record`` in the shape ``name`` (``workspace``: another workspace's id, a URI that names none)."""
    if name == "viewset":
        return f"agree://workspaces/{record.workspace_id if workspace is None else workspace}/viewset/{record.slug}"
    return f"agree://{name}/{record.slug}"


def plain(template: type[Shape]) -> type[Shape]:
    """``template`` with every fast path off: the plain ORM path, the reference."""
    return type(f"Plain{template.__name__}", (template,), {"fast_paths": frozenset()})


class EmbargoServer(MCPServer):
    """A server whose ``may_read`` refuses archived records of every template (and asks the base otherwise)."""

    refused: ClassVar[set[str]] = set()

    def may_read(self, uri: str, ctx: CallContext) -> bool:
        return uri not in self.refused and super().may_read(uri, ctx)


def registry_of(templates: tuple[type[ResourceTemplate], ...], name: str) -> ResourceRegistry:
    registry = ResourceRegistry(name)
    for template in templates:
        registry.register(template)
    return registry


FAST = registry_of(SHAPES, "agreement-fast")
PLAIN = registry_of(
    (*(plain(shape) for shape in MODEL_SHAPES), StaffList, OwnedRepository, SeatViewSet), "agreement-plain"
)


# The world: generated, created, and what each caller should read ---------------------------------------------------


@dataclass
class World:
    users: int
    organizations: int
    staff: set[tuple[int, int]]
    workspaces: list[int | None]  # the organization of each workspace, or None
    seats: list[tuple[int, int, str]]  # (workspace, user, role)
    records: list[tuple[str, int, int, str, bool]]  # (slug, owner, workspace, tenant, archived)
    tenants: list[str | None]  # each user's current tenant
    prefixes: list[str]
    changes: list[tuple[str, int, int]] = field(default_factory=list)  # between pages: (kind, a, b)


SLUG_STEMS = ("a", "ab", "abc", "b", "ba", "c")


@st.composite
def worlds(draw: Callable[..., Any]) -> World:
    users = draw(st.integers(2, 4))
    organizations = draw(st.integers(1, 2))
    staff = draw(st.sets(st.tuples(st.integers(0, organizations - 1), st.integers(0, users - 1)), max_size=4))
    workspaces = draw(st.lists(st.one_of(st.none(), st.integers(0, organizations - 1)), min_size=1, max_size=3))
    seats = draw(
        st.lists(
            st.tuples(
                st.integers(0, len(workspaces) - 1), st.integers(0, users - 1), st.sampled_from(["member", "admin"])
            ),
            max_size=6,
        )
    )
    count = draw(st.integers(0, 9))
    records = [
        (
            f"{draw(st.sampled_from(SLUG_STEMS))}-{index}",
            draw(st.integers(0, users - 1)),
            draw(st.integers(0, len(workspaces) - 1)),
            draw(st.sampled_from(["a", "b"])),
            draw(st.booleans()),
        )
        for index in range(count)
    ]
    tenants = draw(st.lists(st.sampled_from([None, "a", "b"]), min_size=users, max_size=users))
    prefixes = draw(st.lists(st.sampled_from(["", "a", "ab", "b", "c", "z"]), min_size=1, max_size=2))
    changes = draw(
        st.lists(
            st.tuples(
                st.sampled_from(["seat", "unseat", "record", "archive"]),
                st.integers(0, 20),
                st.integers(0, 20),
            ),
            max_size=3,
        )
    )
    return World(users, organizations, staff, workspaces, seats, records, tenants, prefixes, changes)


@dataclass
class Created:
    users: list[Any]
    workspaces: list[Workspace]
    next_slug: int = 100


def create(world: World) -> Created:
    User = get_user_model()
    users = [User.objects.create(username=f"agreement-{index}") for index in range(world.users)]
    organizations = [Organization.objects.create(name=f"org-{index}") for index in range(world.organizations)]
    Staff.objects.bulk_create(Staff(organization=organizations[o], user=users[u]) for o, u in world.staff)
    workspaces = [
        Workspace.objects.create(name=f"ws-{index}", organization=None if org is None else organizations[org])
        for index, org in enumerate(world.workspaces)
    ]
    Seat.objects.bulk_create(Seat(workspace=workspaces[w], user=users[u], role=role) for w, u, role in world.seats)
    Record.everything.bulk_create(
        Record(slug=slug, owner=users[owner], workspace=workspaces[ws], tenant=tenant, archived=archived, title=slug)
        for slug, owner, ws, tenant, archived in world.records
    )
    return Created(users, workspaces)


def change(created: Created, kind: str, a: int, b: int) -> None:
    """One change between pages: a seat taken or given up, a record created or archived."""
    user = created.users[a % len(created.users)]
    space = created.workspaces[b % len(created.workspaces)]
    if kind == "seat":
        Seat.objects.create(workspace=space, user=user)
    elif kind == "unseat":
        Seat.objects.filter(workspace=space, user=user).delete()
    elif kind == "record":
        created.next_slug += 1
        slug = f"{SLUG_STEMS[b % len(SLUG_STEMS)]}-{created.next_slug}"
        Record.everything.create(slug=slug, owner=user, workspace=space, title=slug, tenant="a")
    else:
        record = Record.everything.order_by("slug")[b % max(1, Record.everything.count()) :].first()
        if record is not None:
            Record.everything.filter(pk=record.pk).update(archived=not record.archived)


def readable(user: Any, tenant: str | None) -> set[str]:
    """Every URI ``user`` may read now, from the data (the reference, computed in Python)."""
    uris: set[str] = set()
    seated = set(Seat.objects.filter(user=user).values_list("workspace_id", flat=True))
    staffed = set(Staff.objects.filter(user=user).values_list("organization_id", flat=True))
    for record in Record.everything.select_related("workspace"):
        owner = record.owner_id == user.pk
        seat = record.workspace_id in seated
        staff = record.workspace.organization_id in staffed
        for name, allowed in (
            ("owned", owner),
            ("seated", seat),
            ("seats", seat),
            ("staffed", staff),
            ("tenanted", owner and (tenant is None or record.tenant == tenant)),
            ("unarchived", seat and not record.archived),
            ("select-related", seat),
            ("staff-list", staff),
            ("repository", owner),
            ("viewset", seat and not record.archived),
        ):
            if allowed:
                uris.add(uri_of(name, record))
    return uris


@pytest.fixture
def tenant_reset() -> Iterator[None]:
    token = current_tenant.set(None)
    yield
    current_tenant.reset(token)


def as_caller(user: Any, tenant: str | None) -> CallContext:
    current_tenant.set(tenant)
    return context(user)


def walk(server: MCPServer, ctx: Callable[[], CallContext], prefix: str = "", between: Any = None) -> list[list[str]]:
    pages: list[list[str]] = []
    cursor = None
    for index in range(200):
        params: dict[str, Any] = {"prefix": prefix} if prefix else {}
        if cursor is not None:
            params["cursor"] = cursor
        page = server.call("resources/list", params, ctx())
        pages.append([resource["uri"] for resource in page["resources"]])
        if between is not None:
            between(index, pages[-1])
        cursor = page.get("nextCursor")
        if cursor is None:
            return pages
    raise AssertionError("the listing did not end")


def reads(server: MCPServer, ctx: CallContext, uri: str) -> bool:
    try:
        server.call("resources/read", {"uri": uri}, ctx)
    except MCPError as exc:
        refused: MCPError | None = exc
    else:
        refused = None
    assert refused is None or refused.code in (-32602, -32002), refused  # not found, never another error
    return refused is None


def completions(server: MCPServer, ctx: CallContext, template: type[ResourceTemplate], value: str) -> list[str]:
    body = {"ref": {"type": "ref/resource", "uri": template.uri_template}, "argument": {"name": "slug", "value": value}}
    values: list[str] = server.call("completion/complete", body, ctx)["completion"]["values"]
    return values


def every_uri() -> set[str]:
    """Every record's URI in every shape, and in the viewset's shape under the next workspace's id too."""
    records = list(Record.everything.all())
    uris = {uri_of(shape.name, record) for shape in SHAPES for record in records}
    return uris | {uri_of("viewset", record, record.workspace_id + 1) for record in records}


# The properties ----------------------------------------------------------------------------------------------------


@settings(settings.get_profile(PROFILE))
@given(world=worlds())
def test_listed_read_completed_and_notified_agree(world: World, settings_: Any, tenant_reset: None) -> None:
    """For every caller and shape: listed across all pages == readable == what reads; completion offers only listed
    values; the batch hook and a listen's acknowledgement decide exactly the readable URIs; the fast paths list,
    complete and decide what the plain ORM path does."""
    with transaction.atomic():
        created = create(world)
        fast, reference = MCPServer(FAST), MCPServer(PLAIN)
        contexts = [as_caller(user, tenant) for user, tenant in zip(created.users, world.tenants, strict=True)]
        candidates = sorted(every_uri())
        for user, tenant in zip(created.users, world.tenants, strict=True):

            def caller(user: Any = user, tenant: str | None = tenant) -> CallContext:
                return as_caller(user, tenant)

            expected = readable(user, tenant)
            for prefix in world.prefixes:
                pages = walk(fast, caller, prefix)
                listed = [uri for page in pages for uri in page]
                assert len(listed) == len(set(listed)), listed
                assert set(listed) == {uri for uri in expected if uri.startswith(prefix)}
                assert walk(reference, caller, prefix) == pages  # the plain path: the same pages
            for uri in candidates:
                assert reads(fast, caller(), uri) == (uri in expected), uri
            for shape in SHAPES:
                base = shape.uri_template.split("{", 1)[0]
                listed_slugs = {uri.rsplit("/", 1)[1] for uri in expected if uri.startswith(base)}
                for prefix in ("", *world.prefixes):
                    offered = completions(fast, caller(), shape, prefix)
                    assert set(offered) <= listed_slugs, (shape.name, prefix)
                    if shape in MODEL_SHAPES:
                        assert set(offered) == {s for s in listed_slugs if s.startswith(prefix)}
                        plain_shape = PLAIN.get_template(shape.name)
                        assert plain_shape is not None
                        assert completions(reference, caller(), type(plain_shape), prefix) == offered
            acknowledged = fast.prepare_listen({"notifications": {"resourceSubscriptions": candidates[:50]}}, caller())
            assert set(acknowledged["resourceSubscriptions"]) == expected & set(candidates[:50])
        # The batch hook: every caller of each URI at once, fast and plain, and under an overridden may_read.
        EmbargoServer.refused = {uri for uri in candidates if uri.endswith("-0")}
        embargo = EmbargoServer(FAST)
        for uri in candidates:
            current_tenant.set(None)
            wanted = [uri in readable(user, tenant) for user, tenant in zip(created.users, world.tenants, strict=True)]
            decided = []
            for ctx, tenant in zip(contexts, world.tenants, strict=True):
                current_tenant.set(tenant)  # the manager reads the tenant of the caller being decided
                decided.append(fast.may_read_each(uri, [ctx])[0])
            assert decided == wanted, uri
            if all(tenant is None for tenant in world.tenants) or not uri.startswith("agree://tenanted/"):
                assert fast.may_read_each(uri, contexts) == wanted, uri
                assert reference.may_read_each(uri, contexts) == wanted, uri
                assert embargo.may_read_each(uri, contexts) == [w and uri not in EmbargoServer.refused for w in wanted]
        transaction.set_rollback(True)


@settings(settings.get_profile(PROFILE))
@given(world=worlds())
def test_pages_agree_while_records_and_memberships_change(world: World, settings_: Any, tenant_reset: None) -> None:
    """Changes between pages: every page's entries read when the page is served, no URI is listed twice, and every
    URI readable throughout the traversal (before it, at every page and after it) is listed. A URI that stops being
    readable while the traversal runs may be missed even when it is readable again by the end: its page may have
    been served in between."""
    with transaction.atomic():
        created = create(world)
        server = MCPServer(FAST)
        changes = list(world.changes)
        for user, tenant in zip(created.users, world.tenants, strict=True):

            def caller(user: Any = user, tenant: str | None = tenant) -> CallContext:
                return as_caller(user, tenant)

            throughout = readable(user, tenant)

            def between(index: int, page: list[str], user: Any = user, tenant: str | None = tenant) -> None:
                nonlocal throughout
                now = readable(user, tenant)
                assert set(page) <= now, (index, sorted(set(page) - now))
                throughout &= now
                if index < len(changes):
                    change(created, *changes[index])
                    throughout &= readable(user, tenant)

            listed = [uri for page in walk(server, caller, "", between) for uri in page]
            assert len(listed) == len(set(listed)), listed
            assert throughout & readable(user, tenant) <= set(listed)
        transaction.set_rollback(True)


@pytest.fixture
def settings_(settings: Any) -> Any:
    """Small pages: a listing spans several pages and several sources."""
    configure(settings, PAGE_SIZE=3)
    return settings


# One record, 5,000 readers -----------------------------------------------------------------------------------------


def test_one_record_with_5000_readers_agrees_on_every_shape(tenant_reset: None) -> None:
    """A company-wide record: 5,000 readers through seats (a many-to-many through a model, a reverse foreign key) and
    staff (three hops), 50 who are not. Every shape's batch decision is exactly its readers, fast and plain."""
    User = get_user_model()
    User.objects.bulk_create(User(username=f"company-{i}") for i in range(5050))
    users = list(User.objects.filter(username__startswith="company-").order_by("pk"))
    organization = Organization.objects.create(name="company")
    space = Workspace.objects.create(name="company", organization=organization)
    Seat.objects.bulk_create(Seat(workspace=space, user=user) for user in users[:5000])
    Staff.objects.bulk_create(Staff(organization=organization, user=user) for user in users[:5000])
    Record.everything.create(slug="handbook", owner=users[0], workspace=space, title="Handbook")
    contexts = [context(user) for user in users]
    wanted = [True] * 5000 + [False] * 50
    fast = MCPServer(FAST)
    for name in ("seated", "seats", "staffed"):
        assert fast.may_read_each(f"agree://{name}/handbook", contexts) == wanted, name
    # The plain path asks each caller one by one (two queries each): compared on every tenth reader and the others.
    sample = [*range(0, 5000, 10), *range(5000, 5050)]
    plain_server = MCPServer(PLAIN)
    for name in ("seated", "staffed"):
        decided = plain_server.may_read_each(f"agree://{name}/handbook", [contexts[i] for i in sample])
        assert decided == [wanted[i] for i in sample], name
    listed = walk(fast, lambda: context(users[4999]))
    assert "agree://staffed/handbook" in [uri for page in listed for uri in page]
