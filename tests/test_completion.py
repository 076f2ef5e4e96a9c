"""``completion/complete`` for resource template variables, through the real server core and the real view.

Real database (SQLite and PostgreSQL), real models, two users. Values come only from the caller's records (the
scope of list and read), prefix-matched in byte order, distinct, at most 100 with ``total`` and ``hasMore``;
``context.arguments`` filter the rows; a template may override completion; every refusal is the error the spec
names. On PostgreSQL the query is an index range of ``(owner_id, slug COLLATE "C")`` (EXPLAIN).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pytest
from django.db import connection, transaction
from django.db.models import QuerySet
from django.http import HttpRequest
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_resources import PUBLIC
from mcp_resources.exceptions import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    AuthenticationRequired,
    InsufficientScope,
)
from mcp_resources.listing import completion
from mcp_resources.listing.completion import CompletionRequest, declared_completion, prefix_successor
from mcp_resources.protocol.versions import V2025_11_25, V2026_07_28
from mcp_resources.resources import Completion, ModelResourceTemplate
from mcp_resources.server import CallContext, MCPServer
from mcp_resources.test import MCPClient
from testproject.library.models import Bookmark, Note
from tests.listing_support import SCOPE, GenericSource, TicketSource, context, rpc_error, server_for

pytestmark = pytest.mark.django_db


class NotesByTitle(ModelResourceTemplate):
    """Notes addressed by title and id: two variables, a declared scope."""

    model = Note
    name = "note-titles"
    uri_template = "learn://note-titles/{title}/{id}"
    required_scopes = (SCOPE,)
    owner_field = "owner"
    ordering = ("title", "id")
    name_field = "title"


class ComputedNotesByTitle(NotesByTitle):
    """The same template with its scope computed, and narrowed to titles starting with "a"."""

    name = "computed-note-titles"
    uri_template = "learn://computed-note-titles/{title}/{id}"
    owner_field = None

    def get_queryset(self, request: HttpRequest) -> QuerySet[Note]:
        return Note.objects.filter(owner_id=request.user.pk, title__startswith="a")


class HiddenNotes(NotesByTitle):
    name = "hidden-notes"
    uri_template = "learn://hidden-notes/{title}/{id}"
    discoverable = False


class PublicNotes(NotesByTitle):
    """Anyone may read the notes titled "public ...", of any owner."""

    name = "public-notes"
    uri_template = "learn://public-notes/{title}/{id}"
    access = PUBLIC
    required_scopes = ()
    owner_field = None
    requires_subject = False

    def get_queryset(self, request: HttpRequest) -> QuerySet[Note]:
        return Note.objects.filter(title__startswith="public ")


class HookedNotes(NotesByTitle):
    """Completes ``id`` itself, and ``title`` with the default."""

    name = "hooked-notes"
    uri_template = "learn://hooked-notes/{title}/{id}"
    answer: Any = None

    def complete(self, request: HttpRequest, argument: str, value: str, context: Mapping[str, str]) -> Any:
        if argument == "title":
            return None
        return type(self).answer


TEMPLATES = (NotesByTitle, ComputedNotesByTitle, HiddenNotes, PublicNotes, HookedNotes, GenericSource)
URI = NotesByTitle.uri_template


@pytest.fixture
def server() -> MCPServer:
    return server_for(*TEMPLATES)


def notes(owner: Any, *titles: str) -> list[Note]:
    return Note.objects.bulk_create(Note(owner=owner, title=title) for title in titles)


def params(argument: str, value: str, *, uri: str = URI, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "ref": {"type": "ref/resource", "uri": uri},
        "argument": {"name": argument, "value": value},
    }
    if arguments is not None:
        body["context"] = {"arguments": arguments}
    return body


def complete(server: MCPServer, ctx: CallContext, argument: str, value: str, **kwargs: Any) -> dict[str, Any]:
    result = server.call("completion/complete", params(argument, value, **kwargs), ctx)
    completion_object: dict[str, Any] = result["completion"]
    return completion_object


def byte_sorted(values: set[str]) -> list[str]:
    return sorted(values, key=lambda value: value.encode())


# Values: the caller's, prefix-matched, distinct, in byte order ---------------------------------------------


def test_values_are_the_callers_distinct_prefix_matches_in_byte_order(server, alice, bob):
    notes(alice, "apple", "Apple", "apricot", "apple", "banana", "äpfel", "ap", "a%b", "a_b")
    notes(bob, "apex", "apple-of-bob", "ap")
    ctx = context(alice)
    assert complete(server, ctx, "title", "ap") == {"values": ["ap", "apple", "apricot"], "total": 3, "hasMore": False}
    # Case-sensitive (SQLite's LIKE is not), and LIKE's wildcards are plain characters.
    assert complete(server, ctx, "title", "Ap")["values"] == ["Apple"]
    assert complete(server, ctx, "title", "a%")["values"] == ["a%b"]
    assert complete(server, ctx, "title", "a_")["values"] == ["a_b"]
    assert complete(server, ctx, "title", "ä")["values"] == ["äpfel"]
    everything = {"apple", "Apple", "apricot", "banana", "äpfel", "ap", "a%b", "a_b"}
    assert complete(server, ctx, "title", "") == {"values": byte_sorted(everything), "total": 8, "hasMore": False}
    assert complete(server, ctx, "title", "zebra") == {"values": [], "total": 0, "hasMore": False}
    # Bob's values are his own.
    assert complete(server, context(bob), "title", "ap")["values"] == ["ap", "apex", "apple-of-bob"]


def test_at_most_100_values_and_has_more(server, alice, bob):
    notes(alice, *(f"t{i:03d}" for i in range(150)))
    notes(bob, *(f"t{i:03d}-bob" for i in range(50)))
    # More than 100: the first 100, hasMore, and no total (the one query reads 101 values, not all of them).
    assert complete(server, context(alice), "title", "t") == {
        "values": [f"t{i:03d}" for i in range(100)],
        "hasMore": True,
    }
    assert complete(server, context(alice), "title", "t14")["values"] == [f"t{i}" for i in range(140, 150)]


def test_exactly_100_values_are_all_of_them(server, alice):
    notes(alice, *(f"t{i:03d}" for i in range(101)))
    Note.objects.filter(title="t100").delete()
    answer = complete(server, context(alice), "title", "t")
    assert answer == {"values": [f"t{i:03d}" for i in range(100)], "total": 100, "hasMore": False}


def test_context_arguments_filter_the_rows(server, alice, bob):
    mine = notes(alice, "apple", "apple", "pear")
    theirs = notes(bob, "apple")
    ctx = context(alice)
    ids = byte_sorted({str(n.pk) for n in mine[:2]})
    assert complete(server, ctx, "id", "", arguments={"title": "apple"}) == {
        "values": ids,
        "total": 2,
        "hasMore": False,
    }
    assert str(theirs[0].pk) not in complete(server, ctx, "id", "", arguments={"title": "apple"})["values"]
    assert complete(server, ctx, "title", "", arguments={"id": str(mine[2].pk)})["values"] == ["pear"]
    # Bob's record is not a context that opens anything to alice.
    assert complete(server, ctx, "title", "", arguments={"id": str(theirs[0].pk)})["values"] == []
    # A value the field cannot hold names no record; unknown names and the completed argument itself are ignored.
    assert complete(server, ctx, "title", "", arguments={"id": "not-a-number"})["values"] == []
    everything = {"values": ["apple", "pear"], "total": 2, "hasMore": False}
    assert complete(server, ctx, "title", "", arguments={"colour": "red", "title": "pear"}) == everything


def test_non_text_fields_complete_as_text(server, alice):
    made = notes(alice, *(f"n{i}" for i in range(12)))
    ids = {str(n.pk) for n in made}
    prefix = str(made[0].pk)[0]
    expected = byte_sorted({i for i in ids if i.startswith(prefix)})
    assert complete(server, context(alice), "id", prefix)["values"] == expected


def test_an_overridden_get_queryset_scopes_completion(server, alice, bob):
    notes(alice, "apple", "avocado", "banana")
    notes(bob, "apricot")
    uri = ComputedNotesByTitle.uri_template
    assert complete(server, context(alice), "title", "", uri=uri)["values"] == ["apple", "avocado"]


def test_a_public_template_completes_for_anonymous_callers(server, alice, bob):
    notes(alice, "public a", "private a")
    notes(bob, "public b")
    uri = PublicNotes.uri_template
    assert complete(server, context(None), "title", "p", uri=uri)["values"] == ["public a", "public b"]


# The compiled query of a declared scope against the queryset it stands in for -----------------------------------

DIFFERENTIAL_TITLES = ["a", "B", "b", "é", "e\u0301", "ü/é?", "a b", "100%", "a_b", "café", "cafe", "漢字", "😀", "~"]
DIFFERENTIAL_PREFIXES = ["", "a", "b", "c", "é", "漢", "😀", "1", "~", "\U0010ffff", "zz"]


def test_the_compiled_completion_answers_what_the_queryset_answers(server, alice, bob, monkeypatch):
    """A declared scope completes through SQL compiled once (``listing.compiled.CompiledQuery``); the architecture
    rules require that it answers exactly what the plain queryset answers, and falls back to it."""
    notes(alice, *DIFFERENTIAL_TITLES, *DIFFERENTIAL_TITLES[:5])
    notes(bob, *(f"{t}-bob" for t in DIFFERENTIAL_TITLES))
    template = server.registry.get_template("note-titles")
    assert declared_completion(template) is not None
    assert declared_completion(server.registry.get_template("computed-note-titles")) is None
    cases = [(argument, prefix) for argument in ("title", "id") for prefix in DIFFERENTIAL_PREFIXES]
    compiled = {case: complete(server, context(alice), *case) for case in cases}
    with CaptureQueriesContext(connection) as queries:
        complete(server, context(alice), "title", "a")
    assert len([q for q in queries.captured_queries if "library_note" in q["sql"]]) == 1
    assert declared_completion(template).query.failed is False
    monkeypatch.setattr(completion, "declared_completion", lambda template: None)
    assert {case: complete(server, context(alice), *case) for case in cases} == compiled
    assert compiled[("title", "a")]["values"] == ["a", "a b", "a_b"]
    # Nobody's records for a caller without a user, either way.
    assert complete(server, context(None, principal=context(alice).principal), "title", "")["values"] == []


def test_the_compiled_completion_falls_back_to_the_queryset(server, alice, caplog, monkeypatch):
    notes(alice, "apple")
    template = server.registry.get_template("note-titles")
    declared = declared_completion(template)
    monkeypatch.setattr(declared.query, "failed", True)  # as after a query that could not be compiled
    assert complete(server, context(alice), "title", "a")["values"] == ["apple"]


# Hooks --------------------------------------------------------------------------------------------------------


def test_a_generic_template_without_a_hook_completes_nothing(server, alice):
    answer = complete(server, context(alice), "id", "a", uri=GenericSource.uri_template)
    assert answer == {"values": [], "total": 0, "hasMore": False}


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (["b", "a"], {"values": ["b", "a"], "total": 2, "hasMore": False}),
        ((), {"values": [], "total": 0, "hasMore": False}),
        (Completion(values=["x"], total=7, has_more=True), {"values": ["x"], "total": 7, "hasMore": True}),
        (Completion(values=["x"]), {"values": ["x"], "hasMore": False}),
        (Completion(values=["x", "y"], total=1), {"values": ["x", "y"], "total": 2, "hasMore": False}),
        (Completion(values=["x"], total=3), {"values": ["x"], "total": 3, "hasMore": True}),
        ([str(i) for i in range(250)], {"values": [str(i) for i in range(100)], "total": 250, "hasMore": True}),
    ],
)
def test_a_template_may_override_completion(server, alice, monkeypatch, answer, expected):
    monkeypatch.setattr(HookedNotes, "answer", answer)
    uri = HookedNotes.uri_template
    assert complete(server, context(alice), "id", "1", uri=uri) == expected
    notes(alice, "kiwi")
    assert complete(server, context(alice), "title", "k", uri=uri)["values"] == ["kiwi"]  # None: the default


@pytest.mark.parametrize(
    "answer",
    ["a string", [1, 2], Completion(values=["x"], total=-1), Completion(values=["x"], has_more=1), object()],  # type: ignore[arg-type]
    ids=["str", "ints", "negative-total", "has-more-int", "object"],
)
def test_a_hook_breaking_the_contract_is_a_generic_internal_error(server, alice, monkeypatch, caplog, answer):
    monkeypatch.setattr(HookedNotes, "answer", answer)
    error = rpc_error(lambda: complete(server, context(alice), "id", "1", uri=HookedNotes.uri_template))
    assert (error.code, error.message, error.data) == (INTERNAL_ERROR, "Internal error", None)
    assert "complete" in caplog.text


def test_a_server_that_serves_prompts_completes_them():
    class PromptServer(MCPServer):
        def complete_prompt(self, wanted: CompletionRequest, ctx: CallContext) -> dict[str, Any]:
            return {"values": [f"{wanted.prompt}:{wanted.argument}={wanted.value}"], "hasMore": False}

    body = {"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "who", "value": "al"}}
    result = PromptServer(server_for(NotesByTitle).registry).call("completion/complete", body, context(None))
    assert result["completion"] == {"values": ["greet:who=al"], "hasMore": False}


# Refusals: the errors the spec names ----------------------------------------------------------------------------


@pytest.mark.parametrize("version", [V2026_07_28, V2025_11_25])
@pytest.mark.parametrize(
    ("body", "message"),
    [
        (params("title", "a", uri="learn://nothing/{x}"), "Unknown resource template"),
        (params("title", "a", uri=HiddenNotes.uri_template), "Unknown resource template"),
        (params("title", "a", uri="learn://note-titles/apple/1"), "Unknown resource template"),
        (params("colour", "a"), "Unknown argument"),
        ({"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "a", "value": ""}}, "Unknown prompt"),
        ({"argument": {"name": "title", "value": ""}}, "params.ref must be an object"),
        ({**params("title", ""), "ref": {"type": "ref/tool", "uri": URI}}, 'ref.type must be "ref/resource"'),
        ({**params("title", ""), "ref": {"type": "ref/resource", "uri": 7}}, "ref.uri must be a URI template"),
        ({**params("title", ""), "ref": {"type": "ref/resource", "uri": "x" * 2049}}, "ref.uri must be"),
        ({**params("title", ""), "ref": {"type": "ref/prompt", "name": ""}}, "ref.name must be"),
        ({"ref": {"type": "ref/resource", "uri": URI}}, "params.argument must be an object"),
        ({**params("title", ""), "argument": {"name": "title"}}, "argument.value must be a string"),
        ({**params("title", ""), "argument": {"name": "", "value": ""}}, "argument.name must be"),
        ({**params("title", ""), "argument": {"name": "title", "value": 3}}, "argument.value must be a string"),
        (params("title", "a\x00"), "argument.value must not contain control characters"),
        (params("title", "a\ud800"), "argument.value must not contain control characters"),
        (params("title", "a" * 2049), "argument.value must be a string of at most 2048"),
        ({**params("title", ""), "context": []}, "params.context must be an object"),
        ({**params("title", ""), "context": {"arguments": ["x"]}}, "context.arguments must be an object"),
        (params("title", "", arguments={"id": 1}), "context.arguments values must be a string"),
        (params("title", "", arguments={"id": "\x00"}), "context.arguments values must not contain"),
        (params("title", "", arguments={f"v{i}": "" for i in range(65)}), "context.arguments must be an object"),
    ],
)
def test_refusals_are_invalid_params(server, alice, version, body, message):
    error = rpc_error(lambda: server.call("completion/complete", body, context(alice, version=version)))
    assert error.code == INVALID_PARAMS
    assert error.message.startswith(message), error.message


def test_unknown_template_and_prompt_name_what_was_asked(server, alice):
    error = rpc_error(lambda: server.call("completion/complete", params("t", "", uri="learn://x/{t}"), context(alice)))
    assert error.data == {"uri": "learn://x/{t}"}
    body = {"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "a", "value": ""}}
    assert rpc_error(lambda: server.call("completion/complete", body, context(alice))).data == {"name": "greet"}


def test_authorization_follows_read(server, alice):
    notes(alice, "apple")
    with pytest.raises(AuthenticationRequired) as anonymous:
        complete(server, context(None), "title", "a")
    assert anonymous.value.scopes == (SCOPE,)
    with pytest.raises(InsufficientScope):
        complete(server, context(alice, scopes=("profile",)), "title", "a")
    # A token without a user (client credentials) owns no records: nothing to complete, as nothing is listed.
    no_subject = context(alice, subject=None)
    assert complete(server, no_subject, "title", "a") == {"values": [], "total": 0, "hasMore": False}


def test_a_completion_is_cut_by_the_deadline(server, settings, alice):
    settings.MCP_RESOURCES = {**getattr(settings, "MCP_RESOURCES", {}), "LIST_DEADLINE_SECONDS": 0.000001}
    notes(alice, "apple")
    error = rpc_error(lambda: complete(server, context(alice), "title", "a"))
    assert error.code == INTERNAL_ERROR


# Both eras: the result, the capability, the HTTP view -----------------------------------------------------------


def test_both_eras_answer_the_same_completion(server, alice):
    notes(alice, "apple")
    v2026_07_28 = server.call("completion/complete", params("title", "a"), context(alice, version=V2026_07_28))
    v2025_11_25 = server.call("completion/complete", params("title", "a"), context(alice, version=V2025_11_25))
    assert v2026_07_28["completion"] == v2025_11_25["completion"] == {"values": ["apple"], "total": 1, "hasMore": False}
    # CompleteResult is a plain Result: resultType from 2026-07-28, and no cache hints in either era.
    assert v2026_07_28["resultType"] == "complete"
    assert "resultType" not in v2025_11_25
    assert not {"ttlMs", "cacheScope"} & (set(v2026_07_28) | set(v2025_11_25))


def test_the_completions_capability_in_both_eras(server, alice):
    discovered = server.call("server/discover", {}, context(alice, version=V2026_07_28))
    initialized = server.call("initialize", {"protocolVersion": V2025_11_25}, context(alice, version=V2025_11_25))
    assert discovered["capabilities"]["completions"] == {}
    assert initialized["capabilities"]["completions"] == {}


@pytest.mark.parametrize("version", [V2026_07_28, V2025_11_25])
def test_completion_through_the_view(alice, bob, version):
    """The demo's registry through MCPView: the bookmarks viewset's slugs, the caller's only."""
    Bookmark.objects.bulk_create(
        [
            Bookmark(owner=alice, slug="alice-django", title="Django", url="https://example.com/d"),
            Bookmark(owner=alice, slug="alice-drf", title="DRF", url="https://example.com/r"),
            Bookmark(owner=bob, slug="alice-impostor", title="Bob's", url="https://example.com/b"),
        ]
    )
    client = MCPClient(protocol_version=version)
    body = params("slug", "alice-d", uri="learn://bookmarks/{slug}")
    with pytest.raises(AuthenticationRequired):
        client.call("completion/complete", body)
    client.force_authenticate(alice, scopes=[SCOPE])
    assert client.call("completion/complete", body)["completion"] == {
        "values": ["alice-django", "alice-drf"],
        "total": 2,
        "hasMore": False,
    }
    assert client.complete("learn://bookmarks/{slug}", "slug", "alice-i") == {
        "values": [],
        "total": 0,
        "hasMore": False,
    }
    client.force_authenticate(bob, scopes=[SCOPE])
    assert client.complete("learn://bookmarks/{slug}", "slug", "alice")["values"] == ["alice-impostor"]
    client.force_authenticate(alice, scopes=["profile"])
    with pytest.raises(InsufficientScope):
        client.complete("learn://bookmarks/{slug}", "slug", "alice")


# Never a value of another user's records (generated) ------------------------------------------------------------

titles = st.lists(st.text(st.characters(codec="utf-8", exclude_categories=("Cc", "Cs")), max_size=6), max_size=12)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mine=titles, theirs=titles, prefix=st.text(max_size=3), shared=st.booleans(), chosen=st.integers(0, 20))
def test_never_a_value_of_another_users_records(server, alice, bob, mine, theirs, prefix, shared, chosen):
    """Whatever both users hold, alice's completion is exactly the byte-ordered distinct prefix matches among her
    own titles (and ids under a chosen title): never one that only bob's records hold."""
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F or 0xD800 <= ord(ch) <= 0xDFFF for ch in prefix):
        prefix = ""
    with transaction.atomic():
        made = notes(alice, *mine)
        notes(bob, *(theirs + (mine if shared else [])))
        expected = byte_sorted({t for t in mine if t.startswith(prefix) and t})
        answer = complete(server, context(alice), "title", prefix)
        assert answer["values"] == expected[:100]
        assert answer.get("total") == (len(expected) if len(expected) <= 100 else None)
        assert answer["hasMore"] is (len(expected) > 100)
        if made:
            title = made[chosen % len(made)].title
            ids = byte_sorted({str(n.pk) for n in made if n.title == title})
            assert complete(server, context(alice), "id", "", arguments={"title": title})["values"] == ids
        transaction.set_rollback(True)


@pytest.mark.parametrize(
    ("prefix", "successor"),
    [("", None), ("a", "b"), ("ab", "ac"), ("a\U0010ffff", "b"), ("\U0010ffff", None), ("\ud7ff", "\ue000")],
)
def test_prefix_successor(prefix, successor):
    assert prefix_successor(prefix) == successor


# PostgreSQL: byte order whatever the column's collation, and an index range -------------------------------------


@pytest.mark.skipif(connection.vendor != "postgresql", reason="collations are a PostgreSQL feature here")
@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "queryset"])
def test_byte_order_holds_when_the_column_has_a_locale_collation(server, alice, monkeypatch, compiled):
    """With the column's ICU collation the range and the order would be the locale's: "a" <= "B" < "b"."""
    with connection.cursor() as cursor:  # undone with the test's transaction
        cursor.execute('ALTER TABLE library_note ALTER COLUMN title TYPE varchar(200) COLLATE "und-x-icu"')
    if not compiled:
        monkeypatch.setattr(completion, "declared_completion", lambda template: None)
    titles = ["b", "B", "a", "A", "ab", "aB", "Ab", "é", "e", "ä", "Z", "z", "_x", "a b"]
    notes(alice, *titles)
    assert [n.title for n in Note.objects.filter(owner=alice).order_by("title")] != byte_sorted(set(titles))
    for prefix in ("", "a", "A", "B", "e", "ä"):
        expected = byte_sorted({t for t in titles if t.startswith(prefix)})
        assert complete(server, context(alice), "title", prefix)["values"] == expected, prefix


@pytest.mark.skipif(connection.vendor != "postgresql", reason="a PostgreSQL plan")
def test_completion_is_an_index_range_on_postgresql(alice, bob):
    """The completion of the bookmarks' ``{slug}`` reads the ``(owner_id, slug COLLATE "C")`` index from the
    prefix to its successor (no sequential scan, no sort: the index gives the byte order the answer needs), as the
    bookmarks' keyset pages do."""
    for owner in (alice, bob):
        Bookmark.objects.bulk_create(
            Bookmark(owner=owner, slug=f"{owner.username}-{i:05d}", title=f"b{i}", url="https://example.com/")
            for i in range(5000)
        )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE library_bookmark")
    server = MCPServer()  # the demo's registry
    with CaptureQueriesContext(connection) as queries:
        answer = complete(server, context(alice), "slug", "alice-012", uri="learn://bookmarks/{slug}")
    assert answer["values"] == [f"alice-{i:05d}" for i in range(1200, 1300)]
    assert answer["total"] == 100
    assert answer["hasMore"] is False
    (sql,) = [q["sql"] for q in queries.captured_queries if "library_bookmark" in q["sql"]]
    sql = re.sub(r"^SET LOCAL statement_timeout = \d+; ", "", sql)
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "library_bookmark_owner_slug" in plan, plan
    index_condition = next(line for line in plan.splitlines() if "Index Cond" in line)
    assert "owner_id" in index_condition, plan
    assert ">= 'alice-012'" in index_condition, plan
    assert "< 'alice-013'" in index_condition, plan
    assert "Seq Scan" not in plan, plan
    assert "Sort" not in plan, plan


# Membership paths ------------------------------------------------------------------------------------------------


class TicketTitles(TicketSource):
    """Tickets addressed by title, scoped through ``project__members`` (a many-to-many)."""

    name = "ticket-titles"
    uri_template = "learn://ticket-titles/{title}"


class TeamTicketTitles(TicketTitles):
    """The same through a forward and a reverse foreign key (``project__team__memberships__user``)."""

    name = "team-ticket-titles"
    uri_template = "learn://team-ticket-titles/{title}"
    owner_field = "project__team__memberships__user"


@pytest.mark.parametrize("template", [TicketTitles, TeamTicketTitles], ids=["members", "team-memberships"])
def test_membership_paths_complete_the_members_values_compiled_and_through_the_queryset(
    template, monkeypatch, settings
):
    settings.SILENCED_SYSTEM_CHECKS = ["mcp_resources.E023"]  # titles, unique in this test's data only
    from django.contrib.auth import get_user_model

    from tests.test_ownership import make_projects

    users = [get_user_model().objects.create_user(name) for name in ("alice", "bob", "carol")]
    make_projects(*users)
    server = server_for(template)
    uri = template.uri_template
    visible = {user.username: {t.title for t in template().get_queryset(context(user).request)} for user in users}
    assert visible["alice"] != visible["bob"]
    assert declared_completion(server.registry.get_template(template.name)) is not None
    compiled = {user.username: complete(server, context(user), "title", "", uri=uri)["values"] for user in users}
    monkeypatch.setattr(completion, "declared_completion", lambda template: None)
    plain = {user.username: complete(server, context(user), "title", "", uri=uri)["values"] for user in users}
    assert compiled == plain
    for name, values in compiled.items():
        assert values == byte_sorted(visible[name])  # each title once, however many memberships lead to it
