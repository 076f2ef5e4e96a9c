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

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db.models import QuerySet
from django.test import Client
from oauth2_provider.contrib.rest_framework import TokenHasScope, TokenMatchesOASRequirements
from rest_framework import filters, permissions, serializers, viewsets
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
from mcp_resources.exceptions import INVALID_PARAMS, RESOURCE_NOT_FOUND_2025_11_25, InsufficientScope
from mcp_resources.principal import Principal
from mcp_resources.protocol.versions import V2025_11_25, V2026_07_28
from mcp_resources.test import MCPClient
from testproject.library.models import Bookmark, Note
from tests.conftest import RESOURCE
from tests.listing_support import SCOPE, context, principal_for, rpc_error, server_for, walk

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
    # As REST framework's list action: object permissions do not filter a listing.
    assert f"learn://guarded-notes/{secret.pk}" in listed(server, ctx)


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
