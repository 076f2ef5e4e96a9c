"""Templates whose scope is declared (``owner_field`` + ``queryset``), including ``owner_field`` paths.

Real database (SQLite and PostgreSQL), real models. The reference is the same template written the other way, with
an overridden ``get_queryset`` computing the same scope: both must list (and read) exactly the same resources.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core import checks
from django.db import connection
from django.db.models import QuerySet
from django.http import HttpRequest
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application

from mcp_resources.checks import check_templates
from mcp_resources.exceptions import INTERNAL_ERROR, INVALID_PARAMS, MCPError
from mcp_resources.ownership import owner_relation
from mcp_resources.protocol import jsonrpc
from mcp_resources.protocol.versions import CLIENT_CAPABILITIES_META, PROTOCOL_VERSION_META, V2026_07_28
from mcp_resources.registries import ResourceRegistry
from mcp_resources.resources import ModelResourceTemplate, ResourceTemplate
from mcp_resources.transport.views import MCPView
from testproject.library.models import Document, Note
from tests.listing_support import (
    SCOPE,
    DeclaredDocumentSource,
    DocumentSource,
    assert_cut_by_the_deadline,
    configure,
    context,
    document_uri,
    expected_documents,
    list_page,
    server_for,
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


def test_owner_relation_follows_forward_foreign_keys_to_the_user_model():
    assert owner_relation(Document, "owner") is Document._meta.get_field("owner")
    assert owner_relation(AccessToken, "application__user") is Application._meta.get_field("user")
    for model, path in [
        (Document, "title"),  # not a relation
        (Document, "owner__username"),  # past the user
        (AccessToken, "application"),  # a relation, but not to the user model
        (AccessToken, "application__name"),
        (AccessToken, "nothing__user"),
        (Document, ""),
    ]:
        assert owner_relation(model, path) is None, path


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
