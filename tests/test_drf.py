"""Django REST framework, earning its place: serializers render contents, viewsets declare whole templates.

Real REST framework, real django-oauth-toolkit permission classes, real database. The viewset's permissions are
evaluated for the MCP caller (as a ``GET``): a denial lists nothing and reads what a missing record reads. The demo
serves one viewset both as its REST API (``/api/bookmarks/``, a router, django-oauth-toolkit's bearer tokens) and as
MCP resources (``learn://bookmarks/{slug}``): both answer the same records, with the same JSON, to the same user.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any
from urllib.parse import quote

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db.models import QuerySet
from django.test import Client, RequestFactory
from oauth2_provider.contrib.rest_framework import TokenHasScope, TokenMatchesOASRequirements
from rest_framework import filters, permissions, serializers, throttling, versioning, viewsets
from rest_framework.request import Request

from mcp_resources import PUBLIC, ModelResourceTemplate
from mcp_resources.auth.tokens import issue_access_token
from mcp_resources.drf import (
    SerializerResourceTemplate,
    TokenPrincipal,
    ViewSetResourceTemplate,
    drf_request,
    from_viewset,
)
from mcp_resources.exceptions import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    RESOURCE_NOT_FOUND_2025_11_25,
    InsufficientScope,
)
from mcp_resources.principal import Principal
from mcp_resources.protocol.versions import V2025_11_25, V2026_07_28
from mcp_resources.test import MCPClient
from testproject.library.models import Bookmark, Membership, Note, Team
from tests.conftest import RESOURCE
from tests.listing_support import SCOPE, configure, context, principal_for, rpc_error, server_for, walk

pytestmark = pytest.mark.django_db


def notes(owner: Any, *titles: str) -> list[Note]:
    return Note.objects.bulk_create(Note(owner=owner, title=title, text=f"text of {title}") for title in titles)


def listed(server: Any, ctx: Any) -> list[str]:
    return [r["uri"] for page in walk(server, ctx) for r in page["resources"]]


def read_json(server: Any, ctx: Any, uri: str) -> Any:
    (content,) = server.call("resources/read", {"uri": uri}, ctx)["contents"]
    assert content["mimeType"] == "application/json"
    return json.loads(content["text"])


# (a) A model template rendering its contents through a serializer ----------------------------------------------


class NoteSerializer(serializers.ModelSerializer[Note]):
    seen_by = serializers.SerializerMethodField()

    class Meta:
        model = Note
        fields = ["id", "title", "text", "seen_by"]

    def get_seen_by(self, obj: Note) -> dict[str, Any]:
        request = self.context["request"]
        return {
            "user": request.user.username,
            "drf": isinstance(request, Request),
            "method": request.method,
            "scope": request.auth.scope,
        }


class SerializedNotes(SerializerResourceTemplate):
    model = Note
    name = "serialized-notes"
    uri_template = "learn://serialized-notes/{id}"
    required_scopes = (SCOPE,)
    owner_field = "owner"
    serializer_class = NoteSerializer


class PlainNotes(ModelResourceTemplate):
    model = Note
    name = "plain-notes"
    uri_template = "learn://plain-notes/{id}"
    required_scopes = (SCOPE,)
    owner_field = "owner"


def test_a_serializer_renders_a_model_templates_contents(alice, bob):
    (mine,) = notes(alice, "mine")
    (theirs,) = notes(bob, "theirs")
    server = server_for(SerializedNotes)
    ctx = context(alice)
    assert read_json(server, ctx, f"learn://serialized-notes/{mine.pk}") == {
        "id": mine.pk,
        "title": "mine",
        "text": "text of mine",
        # The serializer saw a REST framework request of a GET by the caller, with the validated scopes.
        "seen_by": {"user": "alice", "drf": True, "method": "GET", "scope": SCOPE},
    }
    assert listed(server, ctx) == [f"learn://serialized-notes/{mine.pk}"]
    error = rpc_error(lambda: server.call("resources/read", {"uri": f"learn://serialized-notes/{theirs.pk}"}, ctx))
    assert error.code == INVALID_PARAMS


def test_the_rest_framework_request_is_built_once_and_only_when_needed(alice):
    (note,) = notes(alice, "n")
    ctx = context(alice)
    server_for(PlainNotes).call("resources/read", {"uri": f"learn://plain-notes/{note.pk}"}, ctx)
    assert not hasattr(ctx.request, "_mcp_drf_request")
    server = server_for(SerializedNotes)
    server.call("resources/read", {"uri": f"learn://serialized-notes/{note.pk}"}, ctx)
    built = drf_request(ctx.request)
    assert isinstance(built, Request)
    server.call("resources/read", {"uri": f"learn://serialized-notes/{note.pk}"}, ctx)
    assert drf_request(ctx.request) is built
    # The MCP request itself is untouched: still a POST, its user and its principal unchanged.
    assert ctx.request.method == "POST"
    assert ctx.request.user == alice
    assert not hasattr(ctx.request, "auth")


def test_the_token_principal_answers_like_an_access_token():
    principal = principal_for(None, scopes=("b", "a"), subject="1")
    token = TokenPrincipal(**{name: getattr(principal, name) for name in principal.__dataclass_fields__})
    assert token.fingerprint_parts() == principal.fingerprint_parts()
    assert token.scope == "a b"
    assert token.allow_scopes(["a"])
    assert token.allow_scopes([])
    assert not token.allow_scopes(["a", "c"])
    assert token.is_valid(["a", "b"])
    assert not token.is_valid(["c"])
    expired = TokenPrincipal(subject="1", scopes=frozenset({"a"}), authenticated=True, expires_at=1.0)
    assert expired.is_expired()
    assert not expired.is_valid(["a"])
    assert not TokenPrincipal().is_valid()


# (b) A template declared from a viewset --------------------------------------------------------------------------


class OwnerNoteSerializer(serializers.ModelSerializer[Note]):
    class Meta:
        model = Note
        fields = ["id", "title", "text"]


class NoteViewSet(viewsets.ModelViewSet[Note]):
    permission_classes = [permissions.IsAuthenticated, TokenHasScope]
    required_scopes = [SCOPE]
    serializer_class = OwnerNoteSerializer

    def get_queryset(self) -> QuerySet[Note]:
        return Note.objects.filter(owner_id=self.request.user.pk)


class NotSecret(permissions.BasePermission):
    def has_object_permission(self, request: Any, view: Any, obj: Note) -> bool:
        return not obj.title.startswith("secret")


class GuardedNoteViewSet(NoteViewSet):
    permission_classes = [permissions.IsAuthenticated, TokenHasScope, NotSecret]


class ReadOnlyNoteViewSet(NoteViewSet):
    """Only safe methods: the MCP caller passes because it reaches the viewset as a GET."""

    class SafeOnly(permissions.BasePermission):
        def has_permission(self, request: Any, view: Any) -> bool:
            return request.method in permissions.SAFE_METHODS

    permission_classes = [SafeOnly]


class OASNoteViewSet(NoteViewSet):
    permission_classes = [TokenMatchesOASRequirements]
    required_alternate_scopes = {"GET": [["elsewhere"], [SCOPE]], "POST": [["documents"]]}


class IsOwnerFilterBackend(filters.BaseFilterBackend):
    """REST framework's documented way to scope a list by a filter backend instead of ``get_queryset``."""

    def filter_queryset(self, request: Any, queryset: QuerySet[Note], view: Any) -> QuerySet[Note]:
        return queryset.filter(owner=request.user)


class FilteredNoteViewSet(viewsets.ReadOnlyModelViewSet[Note]):
    queryset = Note.objects.all()
    serializer_class = OwnerNoteSerializer
    permission_classes = [permissions.IsAuthenticated]
    filter_backends = [IsOwnerFilterBackend]
    lookup_field = "title"
    lookup_url_kwarg = "name"


ViewSetNotes = from_viewset(NoteViewSet, name="api-notes", uri_template="learn://api-notes/{pk}", name_field="title")
GuardedNotes = from_viewset(GuardedNoteViewSet, name="guarded-notes", uri_template="learn://guarded-notes/{pk}")
ReadOnlyNotes = from_viewset(
    ReadOnlyNoteViewSet, name="read-only-notes", uri_template="learn://read-only-notes/{pk}", required_scopes=(SCOPE,)
)
OASNotes = from_viewset(OASNoteViewSet, name="oas-notes", uri_template="learn://oas-notes/{pk}", required_scopes=())
FilteredNotes = from_viewset(
    FilteredNoteViewSet, name="filtered-notes", uri_template="learn://filtered-notes/{name}", required_scopes=(SCOPE,)
)


class UnscopedViewSetNotes(ViewSetResourceTemplate):
    """The viewset's TokenHasScope still decides when the template itself requires no scope."""

    viewset = NoteViewSet
    name = "unscoped-notes"
    uri_template = "learn://unscoped-notes/{pk}"
    required_scopes = ()


class PublicViewSetNotes(UnscopedViewSetNotes):
    name = "public-notes"
    uri_template = "learn://public-notes/{pk}"
    access = PUBLIC
    requires_subject = False


def test_the_template_takes_its_model_lookup_and_scopes_from_the_viewset():
    template = ViewSetNotes()
    assert template.model is Note
    assert template.get_lookups() == {"pk": "pk"}
    assert template.scopes == (SCOPE,)
    assert template.mime_type == "application/json"
    assert FilteredNotes().get_lookups() == {"name": "title"}
    assert FilteredNotes.model is Note  # from the viewset's queryset
    with pytest.raises(ImproperlyConfigured, match="must hold exactly the variables"):
        from_viewset(NoteViewSet, name="wrong", uri_template="learn://wrong/{id}")


@pytest.mark.parametrize("version", [V2026_07_28, V2025_11_25])
def test_a_viewset_template_lists_and_reads_what_the_viewset_serves(alice, bob, version):
    mine = notes(alice, "a", "b")
    theirs = notes(bob, "c")
    server = server_for(ViewSetNotes)
    ctx = context(alice, version=version)
    assert listed(server, ctx) == [f"learn://api-notes/{n.pk}" for n in mine]
    view = NoteViewSet()
    for note in mine:
        assert read_json(server, ctx, f"learn://api-notes/{note.pk}") == view.get_serializer_class()(note).data
    missing = rpc_error(lambda: server.call("resources/read", {"uri": "learn://api-notes/999999"}, ctx))
    foreign = rpc_error(lambda: server.call("resources/read", {"uri": f"learn://api-notes/{theirs[0].pk}"}, ctx))
    code = INVALID_PARAMS if version == V2026_07_28 else RESOURCE_NOT_FOUND_2025_11_25
    assert missing.code == foreign.code == code
    assert missing.message == foreign.message
    assert foreign.data == {"uri": f"learn://api-notes/{theirs[0].pk}"}


def denied_like_missing(server: Any, ctx: Any, uri: str, missing: str) -> None:
    denied = rpc_error(lambda: server.call("resources/read", {"uri": uri}, ctx))
    absent = rpc_error(lambda: server.call("resources/read", {"uri": missing}, ctx))
    assert (denied.code, denied.message) == (absent.code, absent.message) == (INVALID_PARAMS, "Resource not found")


def test_has_object_permission_denies_a_read_as_not_found(alice):
    open_note, secret = notes(alice, "open", "secret plans")
    server = server_for(GuardedNotes)
    ctx = context(alice)
    assert read_json(server, ctx, f"learn://guarded-notes/{open_note.pk}")["title"] == "open"
    denied_like_missing(server, ctx, f"learn://guarded-notes/{secret.pk}", "learn://guarded-notes/999999")


def complete(server: Any, ctx: Any, template: str, argument: str, value: str = "", **chosen: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "ref": {"type": "ref/resource", "uri": template},
        "argument": {"name": argument, "value": value},
    }
    if chosen:
        body["context"] = {"arguments": chosen}
    completion: dict[str, Any] = server.call("completion/complete", body, ctx)["completion"]
    return completion


GuardedTitles = from_viewset(
    GuardedNoteViewSet,
    name="guarded-titles",
    uri_template="learn://guarded-titles/{title}/{pk}",
    lookup_fields={"title": "title", "pk": "pk"},
    ordering=("title", "id"),
)


@pytest.mark.parametrize("page_size", [1, 2, 50])
def test_object_permissions_filter_listing_and_completion(settings, alice, page_size):
    """Listed == readable: a record the viewset's has_object_permission refuses is neither listed nor completed,
    on every page (refused records fill whole batches), and every listed URI reads."""
    configure(settings, PAGE_SIZE=page_size)
    made = notes(alice, "secret 1", "open a", "secret 2", "secret 3", "secret 4", "open b", "secret 5", "secret 6")
    server = server_for(GuardedNotes)
    ctx = context(alice)
    expected = [f"learn://guarded-notes/{n.pk}" for n in made if n.title.startswith("open")]
    assert listed(server, ctx) == expected
    for uri in listed(server, ctx):
        assert read_json(server, ctx, uri)["title"].startswith("open")
    # With a prefix too: the refused records are left out of the filtered pages.
    prefixed = [r["uri"] for page in walk(server, ctx, prefix="learn://guarded-notes/") for r in page["resources"]]
    assert prefixed == expected
    completed = complete(server, ctx, "learn://guarded-notes/{pk}", "pk")
    assert completed["values"] == sorted((str(n.pk) for n in made if n.title.startswith("open")), key=str.encode)
    assert completed["hasMore"] is False
    titles = server_for(GuardedTitles)
    opened = [n for n in made if n.title.startswith("open")]
    assert listed(titles, ctx) == [f"learn://guarded-titles/{quote(n.title)}/{n.pk}" for n in opened]
    template = "learn://guarded-titles/{title}/{pk}"
    assert complete(titles, ctx, template, "title")["values"] == ["open a", "open b"]
    assert complete(titles, ctx, template, "title", "secret")["values"] == []
    assert complete(titles, ctx, template, "title", "open b")["values"] == ["open b"]
    secret = next(n for n in made if n.title == "secret 2")
    assert complete(titles, ctx, template, "pk", title="secret 2")["values"] == []
    assert complete(titles, ctx, template, "pk", str(secret.pk), title="secret 2")["values"] == []


def test_completion_offers_a_value_when_one_of_its_records_is_allowed(alice):
    """Two notes share a title, the first refused: the title is offered once (a value of a record that reads)."""
    notes(alice, "secret", "secret", "zzz")
    Note.objects.filter(title="zzz").update(title="secret")  # the third is allowed by pk below
    allowed = Note.objects.filter(title="secret").order_by("pk").last()
    assert allowed is not None

    class OnlyOne(permissions.BasePermission):
        def has_object_permission(self, request: Any, view: Any, obj: Note) -> bool:
            return obj.pk == allowed.pk

    class OneViewSet(GuardedNoteViewSet):
        permission_classes = [OnlyOne]

    template = from_viewset(
        OneViewSet, name="one", uri_template="learn://one/{title}/{pk}", lookup_fields={"title": "title", "pk": "pk"}
    )
    server = server_for(template)
    completed = complete(server, context(alice), "learn://one/{title}/{pk}", "title")
    assert completed == {"values": ["secret"], "total": 1, "hasMore": False}


def test_a_declaration_turns_the_per_record_check_off(alice):
    """``object_permissions = False`` declares that the viewset's object permissions refuse nothing its queryset
    holds: listings read value rows again (and list what a read would refuse, when the declaration is wrong)."""
    from mcp_resources.listing.plan import list_plan

    notes(alice, "open", "secret plans")
    unchecked = from_viewset(
        GuardedNoteViewSet,
        name="unchecked",
        uri_template="learn://unchecked/{pk}",
        name_field="title",
        object_permissions=False,
    )
    assert list_plan(unchecked()) is not None
    assert list_plan(from_viewset(GuardedNoteViewSet, name="c", uri_template="c://{pk}", name_field="title")()) is None
    assert len(listed(server_for(unchecked), context(alice))) == 2


def test_token_has_scope_decides_for_the_mcp_caller(alice):
    (note,) = notes(alice, "n")
    server = server_for(UnscopedViewSetNotes)
    uri = f"learn://unscoped-notes/{note.pk}"
    assert read_json(server, context(alice), uri)["id"] == note.pk
    # A token without documents:read: TokenHasScope denies; the answer is a not-found, nothing is listed or completed.
    other = context(alice, scopes=("profile",))
    denied_like_missing(server, other, uri, "learn://unscoped-notes/999999")
    assert listed(server, other) == []
    body = {
        "ref": {"type": "ref/resource", "uri": "learn://unscoped-notes/{pk}"},
        "argument": {"name": "pk", "value": ""},
    }
    assert server.call("completion/complete", body, other)["completion"]["values"] == []
    assert server.call("completion/complete", body, context(alice))["completion"]["values"] == [str(note.pk)]


def test_an_anonymous_caller_is_denied_by_the_viewset_of_a_public_template(alice):
    (note,) = notes(alice, "n")
    server = server_for(PublicViewSetNotes)
    denied_like_missing(server, context(None), f"learn://public-notes/{note.pk}", "learn://public-notes/999999")


def test_the_scopes_the_template_requires_are_checked_first(alice):
    (note,) = notes(alice, "n")
    with pytest.raises(InsufficientScope):
        server_for(ViewSetNotes).call(
            "resources/read", {"uri": f"learn://api-notes/{note.pk}"}, context(alice, scopes=())
        )


def test_permissions_see_a_get(alice):
    (note,) = notes(alice, "n")
    assert read_json(server_for(ReadOnlyNotes), context(alice), f"learn://read-only-notes/{note.pk}")["id"] == note.pk
    server = server_for(OASNotes)
    assert read_json(server, context(alice), f"learn://oas-notes/{note.pk}")["id"] == note.pk
    # POST would need "documents"; a GET needs documents:read (or "elsewhere"), which this caller lacks.
    denied_like_missing(
        server, context(alice, scopes=("documents",)), f"learn://oas-notes/{note.pk}", "learn://oas-notes/0"
    )


def test_the_viewsets_filter_backends_scope_the_template(alice, bob, settings):
    settings.SILENCED_SYSTEM_CHECKS = ["mcp_resources.E023"]  # note titles, unique in this test's data only
    notes(alice, "mine")
    notes(bob, "theirs")
    server = server_for(FilteredNotes)
    ctx = context(alice)
    assert listed(server, ctx) == ["learn://filtered-notes/mine"]
    assert read_json(server, ctx, "learn://filtered-notes/mine")["title"] == "mine"
    denied_like_missing(server, ctx, "learn://filtered-notes/theirs", "learn://filtered-notes/nothing")
    body = {
        "ref": {"type": "ref/resource", "uri": "learn://filtered-notes/{name}"},
        "argument": {"name": "name", "value": ""},
    }
    assert server.call("completion/complete", body, ctx)["completion"]["values"] == ["mine"]


def test_a_nul_names_no_record(alice, settings):
    settings.SILENCED_SYSTEM_CHECKS = ["mcp_resources.E023"]  # note titles, unique in this test's data only
    denied_like_missing(
        server_for(FilteredNotes), context(alice), "learn://filtered-notes/a%00b", "learn://filtered-notes/x"
    )


# (c) The demo: one viewset, a REST API and MCP resources ---------------------------------------------------------


def bookmarks(owner: Any, *slugs: str) -> list[Bookmark]:
    return Bookmark.objects.bulk_create(
        Bookmark(owner=owner, slug=slug, title=slug.title(), url=f"https://example.com/{slug}") for slug in slugs
    )


def clients(user: Any) -> tuple[Client, MCPClient]:
    """A REST client and an MCP client bearing one token of ``user``, bound to both endpoints."""
    token = issue_access_token(user, SCOPE, [RESOURCE, "http://testserver/api/"], 3600, "tests")
    header = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    return Client(**header), MCPClient(**header)


@pytest.mark.parametrize("version", [V2026_07_28, V2025_11_25])
def test_the_rest_api_and_the_mcp_resources_answer_the_same_records(alice, bob, version):
    bookmarks(alice, "alice-django", "alice-drf", "alice-mcp")
    bookmarks(bob, "bob-redis")
    for user in (alice, bob):
        rest, mcp = clients(user)
        mcp.protocol_version = version
        listing = rest.get("/api/bookmarks/")
        assert listing.status_code == 200, listing.content
        rest_records = {record["slug"]: record for record in listing.json()}
        mcp_uris = [r["uri"] for r in mcp.list_all_resources() if r["uri"].startswith("learn://bookmarks/")]
        assert mcp_uris == [f"learn://bookmarks/{slug}" for slug in sorted(rest_records)]
        assert {slug.split("-")[0] for slug in rest_records} == {user.username}
        for slug, record in rest_records.items():
            detail = rest.get(f"/api/bookmarks/{slug}/")
            (content,) = mcp.read_resource(f"learn://bookmarks/{slug}")["contents"]
            assert json.loads(content["text"]) == record == detail.json()
            assert content["text"].encode() == detail.content  # the same renderer: the same bytes
        completed = mcp.complete("learn://bookmarks/{slug}", "slug", "")
        assert completed["values"] == sorted(rest_records)
    # Nothing of another user: REST answers 404, MCP not found, completion nothing.
    rest, mcp = clients(bob)
    mcp.protocol_version = version
    assert rest.get("/api/bookmarks/alice-drf/").status_code == 404
    with pytest.raises(Exception) as refused:
        mcp.read_resource("learn://bookmarks/alice-drf")
    assert getattr(refused.value, "code", None) in (INVALID_PARAMS, RESOURCE_NOT_FOUND_2025_11_25)
    assert mcp.complete("learn://bookmarks/{slug}", "slug", "alice") == {"values": [], "total": 0, "hasMore": False}


def test_the_demo_rest_api_refuses_a_token_without_the_scope(alice):
    bookmarks(alice, "alice-django")
    token = issue_access_token(alice, "profile", [RESOURCE, "http://testserver/api/"], 3600, "tests")
    assert Client(HTTP_AUTHORIZATION=f"Bearer {token}").get("/api/bookmarks/").status_code == 403


# Without REST framework ------------------------------------------------------------------------------------------


def test_the_package_works_without_rest_framework(tmp_path):
    """In a process where ``rest_framework`` cannot be imported: the app starts and serves, ``mcp_resources.drf``
    imports, and a serializer template says what to install."""
    script = textwrap.dedent(
        """
        import sys

        class NoRestFramework:
            def find_spec(self, name, path=None, target=None):
                if name == "rest_framework" or name.startswith("rest_framework."):
                    raise ImportError("No module named 'rest_framework'")
                return None

        sys.meta_path.insert(0, NoRestFramework())

        import django
        from django.conf import settings

        settings.configure(
            INSTALLED_APPS=["django.contrib.auth", "django.contrib.contenttypes", "oauth2_provider", "mcp_resources"],
            DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
            MCP_RESOURCES={"AUTHENTICATION_CLASS": "mcp_resources.auth.NoAuthentication"},
            USE_TZ=True,
        )
        django.setup()
        from django.core.management import call_command
        from django.test import RequestFactory

        call_command("check")
        from mcp_resources import MCPServer
        from mcp_resources.drf import SerializerResourceTemplate, drf_request
        from mcp_resources.server import CallContext

        discovered = MCPServer().call("server/discover", {}, CallContext(RequestFactory().post("/")))
        assert "completions" in discovered["capabilities"]
        try:
            drf_request(RequestFactory().post("/"))
        except Exception as exc:
            print(type(exc).__name__, exc)
        assert "rest_framework" not in sys.modules
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert (
        'ImproperlyConfigured This template needs Django REST framework: pip install "django-mcp-resources[drf]"'
        in result.stdout
    )


def test_principal_is_unchanged_by_the_token_view():
    principal = Principal(subject="1", scopes=frozenset({"a"}), authenticated=True)
    assert not hasattr(principal, "scope")


# initial() but authentication: versioning, content negotiation, throttles ---------------------------------------


class DefaultV2(versioning.URLPathVersioning):
    default_version = "v2"
    allowed_versions = ("v1", "v2")


class VersionedNoteSerializer(OwnerNoteSerializer):
    version = serializers.SerializerMethodField()
    rendered_as = serializers.SerializerMethodField()

    class Meta(OwnerNoteSerializer.Meta):
        fields = [*OwnerNoteSerializer.Meta.fields, "version", "rendered_as"]

    def get_version(self, obj: Note) -> Any:
        return self.context["request"].version

    def get_rendered_as(self, obj: Note) -> Any:
        return self.context["request"].accepted_renderer.format


class VersionedNoteViewSet(NoteViewSet):
    """Answers by ``request.version``, as a versioned API does: v1 only lists notes titled "v1"."""

    serializer_class = VersionedNoteSerializer

    def get_queryset(self) -> QuerySet[Note]:
        queryset = super().get_queryset()
        return queryset.filter(title="v1") if self.request.version == "v1" else queryset


class V1Only(versioning.QueryParameterVersioning):
    default_version = "v1"


class AcceptV2(versioning.AcceptHeaderVersioning):
    default_version = "v2"


@pytest.mark.parametrize(("scheme", "version"), [(DefaultV2, "v2"), (V1Only, "v1"), (AcceptV2, "v2")])
def test_a_versioned_viewset_lists_reads_and_completes(alice, scheme, version):
    v1, v2 = notes(alice, "v1", "v2")

    class Versioned(VersionedNoteViewSet):
        versioning_class = scheme

    server = server_for(from_viewset(Versioned, name="versioned", uri_template="learn://versioned/{pk}"))
    ctx = context(alice)
    shown = [v1] if version == "v1" else [v1, v2]
    assert listed(server, ctx) == [f"learn://versioned/{n.pk}" for n in shown]
    for note in shown:
        answer = read_json(server, ctx, f"learn://versioned/{note.pk}")
        assert (answer["version"], answer["rendered_as"]) == (version, "json")
    assert complete(server, ctx, "learn://versioned/{pk}", "pk")["values"] == [str(n.pk) for n in shown]


class NoDefaultInPath(versioning.URLPathVersioning):
    allowed_versions = ("v1",)  # no default version: a request that names none is a 404 of the REST API


class NoDefaultAccepted(versioning.AcceptHeaderVersioning):
    allowed_versions = ("v1",)  # a 406 of the REST API


@pytest.mark.parametrize("scheme", [NoDefaultInPath, NoDefaultAccepted])
def test_a_version_the_viewset_does_not_allow_is_not_found(alice, scheme):
    (note,) = notes(alice, "n")

    class Strict(VersionedNoteViewSet):
        versioning_class = scheme

    server = server_for(from_viewset(Strict, name="strict", uri_template="learn://strict/{pk}"))
    ctx = context(alice)
    assert listed(server, ctx) == []
    denied_like_missing(server, ctx, f"learn://strict/{note.pk}", "learn://strict/0")


class TwoPerMinute(throttling.UserRateThrottle):
    scope = "mcp-tests"
    rate = "2/min"


class ThrottledNoteViewSet(GuardedNoteViewSet):
    throttle_classes = [TwoPerMinute]


Throttled = from_viewset(ThrottledNoteViewSet, name="throttled", uri_template="learn://throttled/{pk}")


def test_throttles_count_each_mcp_request_once(settings, alice, bob):
    """The viewset's throttles see each MCP request once, whatever it reads: a page that reads its source in three
    batches (refused records fill two) counts as one request of the list action."""
    from django.core.cache import cache

    cache.clear()
    configure(settings, PAGE_SIZE=1)
    made = notes(alice, "secret 1", "secret 2", "a")
    server = server_for(Throttled)
    assert list_page_uris(server, context(alice)) == [f"learn://throttled/{made[2].pk}"]
    assert read_json(server, context(alice), f"learn://throttled/{made[2].pk}")["title"] == "a"
    error = rpc_error(lambda: server.call("resources/read", {"uri": f"learn://throttled/{made[2].pk}"}, context(alice)))
    assert (error.code, error.message) == (INVALID_REQUEST, "Request was throttled")
    assert error.http_status == 429
    assert 1 <= error.data["retryAfter"] <= 60
    # Another user has throttles of its own.
    notes(bob, "d")
    assert len(list_page_uris(server, context(bob))) == 1


def list_page_uris(server: Any, ctx: Any) -> list[str]:
    return [r["uri"] for r in server.call("resources/list", {}, ctx)["resources"]]


# Every URI variable: crm://orgs/{org}/customers/{slug} ---------------------------------------------------------


class MembershipSerializer(serializers.ModelSerializer[Membership]):
    class Meta:
        model = Membership
        fields = ["id", "team", "user", "role"]


class RoleViewSet(viewsets.ReadOnlyModelViewSet[Membership]):
    """The caller's roles, looked up by role (unique per team and user, as a slug is unique per organization)."""

    permission_classes = [permissions.IsAuthenticated]
    serializer_class = MembershipSerializer
    lookup_field = "role"

    def get_queryset(self) -> QuerySet[Membership]:
        return Membership.objects.filter(user_id=self.request.user.pk)


ROLES = "learn://teams/{team}/users/{user}/roles/{role}"
Roles = from_viewset(
    RoleViewSet,
    name="roles",
    uri_template=ROLES,
    lookup_fields={"team": "team_id", "user": "user_id", "role": "role"},
    ordering=("team", "role", "id"),
    required_scopes=(SCOPE,),
)


def role_uri(team: Any, user: Any, role: str) -> str:
    return f"learn://teams/{getattr(team, 'pk', team)}/users/{getattr(user, 'pk', user)}/roles/{role}"


def test_every_uri_variable_is_honoured(alice, bob):
    first, second, third = Team.objects.bulk_create([Team(name="first"), Team(name="second"), Team(name="third")])
    mine = Membership.objects.bulk_create(
        [
            Membership(team=first, user=alice, role="admin"),
            Membership(team=second, user=alice, role="admin"),
            Membership(team=first, user=alice, role="owner"),
            Membership(team=third, user=bob, role="owner"),
        ]
    )
    server = server_for(Roles)
    ctx = context(alice)
    uris = listed(server, ctx)
    expected = sorted(mine[:3], key=lambda m: (m.team_id, m.role.encode(), m.pk))
    assert uris == [role_uri(m.team_id, alice, m.role) for m in expected]
    # A URI the listing returned reads its own record (the role alone names two).
    for uri, membership in zip(uris, expected, strict=True):
        assert read_json(server, ctx, uri)["id"] == membership.pk
    # A team that does not hold the role, or does not exist, reads nothing of another team; nor another user.
    missing = role_uri(0, 0, "none")
    denied_like_missing(server, ctx, role_uri(second, alice, "owner"), missing)
    denied_like_missing(server, ctx, role_uri(999999, alice, "owner"), missing)
    denied_like_missing(server, ctx, role_uri(third, alice, "owner"), missing)
    denied_like_missing(server, ctx, role_uri(first, bob, "owner"), missing)
    completed = complete(server, ctx, ROLES, "role", team=str(second.pk), user=str(alice.pk))
    assert completed["values"] == ["admin"]


def test_a_get_object_that_ignores_a_variable_reads_not_found(alice):
    """A viewset's own get_object() that looks up the role alone: the record it finds is answered only when its
    URI is the one read."""
    team = Team.objects.create(name="t")
    membership = Membership.objects.create(team=team, user=alice, role="solo")

    class RoleOnly(RoleViewSet):
        def get_object(self) -> Membership:
            obj: Membership = self.get_queryset().get(role=self.kwargs["role"])
            return obj

    server = server_for(
        from_viewset(
            RoleOnly,
            name="role-only",
            uri_template="learn://role-only/{team}/{user}/{role}",
            lookup_fields={"team": "team_id", "user": "user_id", "role": "role"},
        )
    )
    assert read_json(server, context(alice), f"learn://role-only/{team.pk}/{alice.pk}/solo")["id"] == membership.pk
    denied_like_missing(
        server, context(alice), f"learn://role-only/999999/{alice.pk}/solo", "learn://role-only/0/0/none"
    )


def test_lookup_fields_must_hold_the_viewsets_own_lookup():
    with pytest.raises(ImproperlyConfigured, match="must map the viewset's URL keyword argument 'role'"):
        from_viewset(
            RoleViewSet,
            name="wrong",
            uri_template="learn://wrong/{team}/{name}",
            lookup_fields={"team": "team_id", "name": "role"},
        )
    with pytest.raises(ImproperlyConfigured, match="to its lookup_field 'role'"):
        from_viewset(
            RoleViewSet, name="wrong", uri_template="learn://wrong/{role}", lookup_fields={"role": "role__iexact"}
        )


# No query parameters from the MCP URL ---------------------------------------------------------------------------


class QueryFilteredNoteViewSet(NoteViewSet):
    """Filters by ``?title=`` when it is given, as a REST API's list often does."""

    def filter_queryset(self, queryset: QuerySet[Note]) -> QuerySet[Note]:
        title = self.request.query_params.get("title")
        return queryset.filter(title=title) if title else queryset


QueryFiltered = from_viewset(QueryFilteredNoteViewSet, name="query-filtered", uri_template="learn://qf/{pk}")


def test_the_viewset_sees_no_query_parameters_from_the_mcp_url(alice):
    a, b = notes(alice, "a", "b")
    server = server_for(QueryFiltered)
    plain = context(alice)
    with_query = context(alice)
    with_query.request = RequestFactory().post("/mcp?title=a&format=xml", data=b"{}", content_type="application/json")
    with_query.request.user = alice
    with_query.request.mcp_principal = plain.principal  # type: ignore[attr-defined]
    for ctx in (plain, with_query):
        assert listed(server, ctx) == [f"learn://qf/{a.pk}", f"learn://qf/{b.pk}"]
        assert read_json(server, ctx, f"learn://qf/{b.pk}")["title"] == "b"
        assert complete(server, ctx, "learn://qf/{pk}", "pk")["values"] == [str(a.pk), str(b.pk)]
    drf = drf_request(with_query.request)
    assert dict(drf.query_params) == {}
    assert drf.META["QUERY_STRING"] == ""
    assert drf.data == {}
    # The MCP request itself keeps its query string.
    assert with_query.request.GET["title"] == "a"
