"""Templates whose scope is declared (``owner_field`` + ``queryset``) and their precompiled listing query.

Real database (SQLite and PostgreSQL), real models. The reference is the same template written the other way, with
an overridden ``get_queryset`` that the ORM compiles on every page: both must list exactly the same resources.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.core import checks
from django.db import connection
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from hypothesis import given
from hypothesis import strategies as st

from mcp_resources.protocol import jsonrpc
from mcp_resources.checks import check_templates
from mcp_resources.inventory import _batch_size, _size_bound
from mcp_resources.models import StaticResource
from mcp_resources.precompiled import PrecompiledQuery
from mcp_resources.registries import ResourceRegistry
from mcp_resources.resources import ModelResourceTemplate
from testproject.library.models import Document, Note
from tests.listing_support import (
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
from tests.wire_support import wire_trace

pytestmark = pytest.mark.django_db

T0 = timezone.now() - timedelta(days=30)


OwnedDocuments = DeclaredDocumentSource


class ComputedDocuments(DocumentSource):
    """The reference: the same scope computed by ``get_queryset`` (compiled by the ORM on every page)."""

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


@pytest.fixture
def users() -> tuple[Any, Any]:
    model = get_user_model()
    return model.objects.create_user("alice"), model.objects.create_user("bob")


@pytest.mark.parametrize("same_time", [False, True])
def test_the_declared_scope_lists_exactly_what_get_queryset_lists(settings, users, same_time):
    configure(settings, PAGE_SIZE=7)
    alice, bob = users
    make(alice, 40, same_time=same_time, deleted=3)
    make(bob, 25, same_time=same_time)
    assert OwnedDocuments().owned_listing() is not None
    for user in users:
        ctx = context(user)
        reference = listed(server_for(ComputedDocuments), ctx)
        assert [r["uri"] for r in reference] == expected_documents(user)
        assert listed(server_for(OwnedDocuments), ctx) == reference


def test_the_listing_query_is_compiled_once_and_binds_each_caller(settings, users, monkeypatch):
    configure(settings, PAGE_SIZE=10)
    alice, bob = users
    make(alice, 35)
    make(bob, 12)
    compiled: list[str] = []
    original = PrecompiledQuery._compile

    def counting(self: PrecompiledQuery, *args: Any) -> Any:
        result = original(self, *args)
        compiled.append(result.sql)
        return result

    monkeypatch.setattr(PrecompiledQuery, "_compile", counting)
    server = server_for(OwnedDocuments)
    with CaptureQueriesContext(connection) as queries:
        alice_uris = [r["uri"] for r in listed(server, context(alice))]
        bob_uris = [r["uri"] for r in listed(server, context(bob))]
        again = [r["uri"] for r in listed(server, context(alice))]
    assert alice_uris == again == expected_documents(alice)
    assert bob_uris == expected_documents(bob)
    # The first page and the pages after a position: two shapes (the static phase compiles its own query).
    document_queries = [sql for sql in compiled if "library_document" in sql]
    assert len(document_queries) == 2
    page_sql = [q["sql"] for q in queries.captured_queries if "library_document" in q["sql"]]
    assert len(page_sql) == 4 + 2 + 4
    assert all("deleted_at" in sql for sql in page_sql)


def test_an_anonymous_caller_owns_nothing(users):
    alice, _ = users
    make(alice, 3)
    request = RequestFactory().get("/")
    request.user = AnonymousUser()
    assert list(OwnedDocuments().get_queryset(request)) == []
    request.user = alice
    assert OwnedDocuments().get_queryset(request).count() == 3


def test_reads_are_scoped_by_the_declared_owner(users):
    alice, bob = users
    (mine,) = make(alice, 1)
    (theirs,) = make(bob, 1)
    server = server_for(OwnedDocuments)
    ctx = context(alice)
    read = server.call("resources/read", {"uri": document_uri(mine)}, ctx)
    assert read["contents"][0]["text"] == mine.body
    with pytest.raises(jsonrpc.RPCError) as refused:
        server.call("resources/read", {"uri": document_uri(theirs)}, ctx)
    assert refused.value.code == -32602


def test_a_prefix_is_pushed_into_the_scoped_orm_query(settings, users):
    configure(settings, PAGE_SIZE=4)
    alice, bob = users
    docs = make(alice, 30)
    make(bob, 30)
    prefix = document_uri(docs[0])[:-1]
    ctx = context(alice)
    owned = listed(server_for(OwnedDocuments), ctx, prefix=prefix)
    assert owned == listed(server_for(ComputedDocuments), ctx, prefix=prefix)
    assert owned
    assert {r["uri"] for r in owned} <= set(expected_documents(alice))


def test_only_a_declared_scope_with_value_rows_is_precompiled():
    class Overridden(OwnedDocuments):
        def get_queryset(self, request: Any) -> Any:
            return super().get_queryset(request).filter(title__startswith="a")

    class Instances(OwnedDocuments):
        name_field = None

    assert Overridden().owned_listing() is None
    assert Instances().owned_listing() is None
    assert OwnedDocuments().owned_listing() is not None


def test_the_precompiled_page_is_cut_by_the_deadline_like_the_orm_page(settings, users):
    configure(settings, LIST_DEADLINE_SECONDS=0.000001)
    alice, _ = users
    make(alice, 5)
    with pytest.raises(jsonrpc.RPCError) as failed:
        list_page(server_for(OwnedDocuments), context(alice))
    assert failed.value.code == -32603


# The first page: static resources and the first source in one round trip (PostgreSQL) -------------------------

pg_only = pytest.mark.skipif(connection.vendor != "postgresql", reason="several statements in one message: PostgreSQL")


class SlowOwnedDocuments(OwnedDocuments):
    queryset = Document.objects.extra(where=["(SELECT 1 FROM pg_sleep(1)) = 1"])


@pg_only
@pytest.mark.django_db(transaction=True)
def test_a_first_page_reads_static_resources_and_the_first_source_in_one_round_trip(
    settings, users, binding, monkeypatch
):
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", None)  # a persistent connection: prepared statements
    configure(settings, PAGE_SIZE=7)
    alice, bob = users
    make(alice, 12, deleted=2)
    make(bob, 5)
    for uri in ("res://b", "res://a", "res://c"):
        StaticResource.objects.create(uri=uri, name=uri, text="t")
    ctx = context(alice)
    connection.ensure_connection()
    with wire_trace() as warm:
        list_page(server_for(OwnedDocuments), ctx)  # with client binding, the first use prepares each statement
    with wire_trace() as wire:
        first = list_page(server_for(OwnedDocuments), ctx)
    assert wire.round_trips == 1
    if binding == "client":
        (sent,) = wire.sent("Query")
        assert sent.split("\t")[-1].startswith(' "SET LOCAL statement_timeout = ')
        names = re.findall(r"EXECUTE (mcp_\w+)", sent)
        assert len(names) == 2
        sent = "\n".join(warm.sent("Query"))
        assert all(f"PREPARE {name} AS SELECT" in sent for name in names)
    else:
        # One pipeline sync: the timeout, then each statement, in one implicit transaction (parsed in the first).
        assert warm.round_trips == 1
        sent = "\n".join(warm.sent("Parse"))
        assert sent.index("set_config('statement_timeout'") < sent.index("library_document")
        assert len(wire.sent("Sync")) == 1
    assert "mcp_resources_staticresource" in sent
    assert "library_document" in sent
    assert [r["uri"] for r in first["resources"]] == ["res://a", "res://b", "res://c", *expected_documents(alice)[:4]]
    # Every page, static resources first, as the ORM lists them in two round trips.
    assert listed(server_for(OwnedDocuments), ctx) == listed(server_for(ComputedDocuments), ctx)
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == "0"


@pg_only
@pytest.mark.django_db(transaction=True)
def test_the_shared_round_trip_runs_under_the_statement_timeout(settings, users, binding):
    alice, _ = users
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


# The byte bound: an upper bound of the exact encoding ------------------------------------------------------

resource_text = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=40)


@given(st.lists(st.dictionaries(resource_text, resource_text, min_size=1, max_size=6), max_size=8))
def test_the_size_bound_is_never_below_the_encoded_size(resources):
    bound = _size_bound(resources)
    if not resources:
        assert bound == 0
        return
    assert bound is not None
    assert bound >= _batch_size(resources)


def test_the_size_bound_counts_every_key():
    # A static resource's descriptor may hold more keys than a listed record (title, description).
    resource = {"uri": "a://x", "name": "x", "title": "t", "description": "d", "mimeType": "m"}
    assert _size_bound([resource]) >= _batch_size([resource])


def test_the_size_bound_gives_up_on_what_it_cannot_bound():
    assert _size_bound([{"uri": "a://1", "name": "x"}, {}]) is None
    assert _size_bound([{"uri": "a://1", "name": "x", "mimeType": None}]) is None


# Which results take the plain (orjson) encoder -----------------------------------------------------------------


def test_template_annotations_keep_the_strict_encoder(settings):
    """A template's annotations may hold floats: a NaN priority is refused, never sent as ``null``."""
    from django.test import RequestFactory as Factory

    from mcp_resources.resources import ResourceTemplate
    from mcp_resources.transport import MCPView

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
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            }
        },
    }
    request = Factory().post(
        "/mcp",
        data=jsonrpc.dumps(body),
        content_type="application/json",
        HTTP_MCP_PROTOCOL_VERSION="2026-07-28",
        HTTP_MCP_METHOD="resources/templates/list",
    )
    answer = json.loads(view(request).content)
    assert "result" not in answer
    assert answer["error"]["code"] == -32603
