"""``resources/list`` as a per-caller inventory, through the server core (``MCPServer.call``).

Each test builds its own :class:`ResourceRegistry` from the templates in ``listing_support`` (model sources over
the demo's ``Document``/``Note`` models, and generic ``list()`` sources) and calls the core with a real request,
real users and a real :class:`Principal`. Contract: docs/pagination.md and issue 4; the prefix parameter: the
prefix-filtering SEP.
"""

from __future__ import annotations

import json
import time
from datetime import timedelta
from typing import Any, ClassVar

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from mcp_resources.conf import MAX_PAGE_SIZE
from mcp_resources.exceptions import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    AuthenticationRequired,
    InsufficientScope,
)
from mcp_resources.listing import sources
from mcp_resources.models import StaticResource
from mcp_resources.protocol import jsonrpc
from mcp_resources.protocol.cursors import CursorCodec
from mcp_resources.protocol.versions import PREFIX_EXTENSION, V2025_11_25, V2026_07_28
from mcp_resources.resources import InventoryPage, ModelResourceTemplate, ResourceTemplate
from mcp_resources.server import MCPServer
from testproject.library.models import Document, Note
from tests.listing_support import (
    SCOPE,
    DocumentSource,
    GenericSource,
    NoteSource,
    anonymous,
    assert_cut_by_the_deadline,
    assert_generic_internal_error,
    assert_invalid_cursor,
    configure,
    context,
    document_uri,
    expected_documents,
    expected_notes,
    list_page,
    note_uri,
    rpc_error,
    server_for,
    source,
    thing,
    uris,
    walk,
)

pytestmark = pytest.mark.django_db

T0 = timezone.now() - timedelta(days=30)


def make_documents(owner: Any, count: int, *, start: int = 0, same_time: bool = False) -> list[Document]:
    return Document.objects.bulk_create(
        Document(
            owner=owner,
            title=f"{owner.username} doc {start + i}",
            body=f"body {start + i} of {owner.username}",
            created=T0 if same_time else T0 + timedelta(minutes=start + i),
        )
        for i in range(count)
    )


def make_notes(owner: Any, titles: list[str]) -> list[Note]:
    return Note.objects.bulk_create(Note(owner=owner, title=title, text=f"text of {title}") for title in titles)


def listed(server: MCPServer, ctx: Any, **kwargs: Any) -> list[str]:
    return uris(walk(server, ctx, **kwargs))


# Order: static first, then sources in registration order -------------------------------------------------


def test_static_first_then_sources_in_registration_order_across_pages(settings, alice, bob):
    configure(settings, PAGE_SIZE=4)
    server = server_for(DocumentSource, NoteSource)
    server.registry.register_resource("learn://zz-code", "zz", lambda: "z")
    server.registry.register_resource("learn://about", "about", lambda: "about")
    StaticResource.objects.create(uri="learn://admin-row", name="admin row", text="x")
    make_documents(alice, 4)
    make_documents(bob, 3)
    make_notes(alice, ["n3", "n1", "n2"])
    make_notes(bob, ["bob's note"])

    pages = walk(server, context(alice))

    statics = ["learn://about", "learn://admin-row", "learn://zz-code"]
    assert uris(pages) == statics + expected_documents(alice) + expected_notes(alice)
    assert [len(page["resources"]) for page in pages] == [4, 4, 2]
    # The first page continues from static resources into the documents, the second into the notes.
    assert [r["uri"].split("/")[2] for r in pages[0]["resources"]] == ["about", "admin-row", "zz-code", "documents"]
    assert [r["uri"].split("/")[2] for r in pages[1]["resources"]] == ["documents"] * 3 + ["notes"]
    assert "nextCursor" not in pages[-1]
    # Descriptors: a model source lists uri, name and the template's mime type, nothing else.
    first_doc = pages[0]["resources"][3]
    assert first_doc == {"uri": expected_documents(alice)[0], "name": "alice doc 0", "mimeType": "text/plain"}


def test_registration_order_decides_the_order_of_sources(alice):
    make_documents(alice, 2)
    make_notes(alice, ["x"])
    server = server_for(NoteSource, DocumentSource)
    assert listed(server, context(alice)) == expected_notes(alice) + expected_documents(alice)


def test_page_ending_exactly_at_a_source_boundary_continues_with_the_next_source(settings, alice):
    configure(settings, PAGE_SIZE=3)
    make_documents(alice, 3)
    make_notes(alice, ["a", "b"])
    server = server_for(DocumentSource, NoteSource)
    pages = walk(server, context(alice))
    assert [len(p["resources"]) for p in pages] == [3, 2]
    assert uris(pages) == expected_documents(alice) + expected_notes(alice)


@pytest.mark.parametrize("notes", [["a", "b"], []])
def test_page_full_at_a_boundary_resumes_at_the_next_non_empty_source(settings, alice, notes):
    class Things(GenericSource):
        items = [thing("1"), thing("2")]

    configure(settings, PAGE_SIZE=3)
    make_documents(alice, 3)
    make_notes(alice, notes)
    server = server_for(DocumentSource, NoteSource, Things)
    pages = walk(server, context(alice))
    assert uris(pages) == [*expected_documents(alice), *expected_notes(alice), "learn://things/1", "learn://things/2"]
    assert [len(p["resources"]) for p in pages] == ([3, 3, 1] if notes else [3, 2])


def test_full_page_at_the_end_of_the_last_source_has_no_cursor(settings, alice):
    configure(settings, PAGE_SIZE=3)
    make_documents(alice, 3)
    server = server_for(DocumentSource, NoteSource)
    page = list_page(server, context(alice))
    assert len(page["resources"]) == 3
    assert "nextCursor" not in page


def test_empty_inventory_is_one_empty_page(alice):
    page = list_page(server_for(DocumentSource, NoteSource), context(alice))
    assert page["resources"] == []
    assert "nextCursor" not in page


def test_static_resources_are_listed_only_when_the_caller_may_access_them(settings, alice):
    configure(settings, PAGE_SIZE=2)
    server = server_for(DocumentSource)
    server.registry.register_resource("learn://code-open", "o", lambda: "o")
    server.registry.register_resource(
        "learn://code-staff", "s", lambda: "s", access="protected", required_scopes=("staff",)
    )
    StaticResource.objects.create(uri="learn://admin-open", name="o", text="o")
    StaticResource.objects.create(uri="learn://admin-member", name="m", text="m", access="protected")
    StaticResource.objects.create(
        uri="learn://admin-staff", name="s", text="s", access="protected", required_scopes="staff"
    )
    StaticResource.objects.create(uri="learn://admin-off", name="x", text="x", enabled=False)
    make_documents(alice, 1)
    docs = expected_documents(alice)
    assert listed(server, context(alice)) == ["learn://admin-member", "learn://admin-open", "learn://code-open", *docs]
    assert listed(server, context(alice, scopes=(SCOPE, "staff"))) == [
        "learn://admin-member",
        "learn://admin-open",
        "learn://admin-staff",
        "learn://code-open",
        "learn://code-staff",
        *docs,
    ]


# Page size --------------------------------------------------------------------------------------------------


def test_page_size_counts_static_and_dynamic_entries_together(settings, alice):
    configure(settings, PAGE_SIZE=5)
    server = server_for(DocumentSource)
    for i in range(3):
        server.registry.register_resource(f"learn://static-{i}", f"s{i}", lambda: "s")
    make_documents(alice, 9)
    pages = walk(server, context(alice))
    assert [len(p["resources"]) for p in pages] == [5, 5, 2]
    assert len(set(uris(pages))) == 12


def test_default_page_size_is_50(alice):
    make_documents(alice, 51)
    pages = walk(server_for(DocumentSource), context(alice))
    assert [len(p["resources"]) for p in pages] == [50, 1]


def test_page_size_setting_is_capped_at_100(settings, alice):
    configure(settings, PAGE_SIZE=500)
    make_documents(alice, MAX_PAGE_SIZE + 5)
    pages = walk(server_for(DocumentSource), context(alice))
    assert [len(p["resources"]) for p in pages] == [100, 5]


# Byte bounds ------------------------------------------------------------------------------------------------


def response_bytes(result: dict[str, Any]) -> int:
    """The whole JSON-RPC response as the transport serializes it (with a 64-character id)."""
    return len(jsonrpc.dumps({"jsonrpc": "2.0", "id": "i" * 64, "result": result}))


def test_byte_bound_shrinks_pages(settings, alice):
    configure(settings, MAX_RESPONSE_BYTES=4000)
    Document.objects.bulk_create(
        Document(owner=alice, title=f"{i:03d} " + "t" * 190, created=T0 + timedelta(minutes=i)) for i in range(50)
    )
    pages = walk(server_for(DocumentSource), context(alice))
    assert len(pages) > 3
    assert all(1 <= len(p["resources"]) < 50 for p in pages)
    assert all(response_bytes(p) <= 4000 for p in pages)
    assert uris(pages) == expected_documents(alice)


def test_byte_bound_counts_the_cursor_and_result_metadata(settings, alice):
    """Long non-ASCII ordering values make long cursors: they count against the bound too."""
    configure(settings, MAX_RESPONSE_BYTES=4000)
    make_notes(alice, [f"{i:02d}" + "漢" * 190 for i in range(12)])
    pages = walk(server_for(NoteSource), context(alice))
    assert len(pages) > 2
    assert all(response_bytes(p) <= 4000 for p in pages), [response_bytes(p) for p in pages]
    assert uris(pages) == expected_notes(alice)


def test_single_entry_too_big_for_a_page_fails_generically(settings, alice, caplog):
    class Big(GenericSource):
        items = [thing("a", name="n" * 500)]

    configure(settings, MAX_RESPONSE_BYTES=600)
    assert_generic_internal_error(lambda: list_page(server_for(Big), context(alice)))
    assert "cannot fit" in caplog.text


def test_entry_that_does_not_fit_after_others_starts_the_next_page(settings, alice):
    class Mixed(GenericSource):
        items = [thing("a", name="a" * 500), thing("b", name="b" * 500), thing("c"), thing("d", name="d" * 500)]

    configure(settings, MAX_RESPONSE_BYTES=1500)  # room for one long entry, not two
    pages = walk(server_for(Mixed), context(alice))
    assert [[r["uri"][-1] for r in p["resources"]] for p in pages] == [["a"], ["b", "c"], ["d"]]
    assert all(response_bytes(p) <= 1500 for p in pages)


def test_byte_bound_holds_when_a_name_holds_a_lone_surrogate(settings, alice):
    """Only the lone surrogate is escaped: the other names keep the UTF-8 sizes the bound measured."""

    class Odd(GenericSource):
        items = [thing("a", name="\ud800"), *[thing(f"b{i}", name="漢" * 150) for i in range(6)]]

    configure(settings, MAX_RESPONSE_BYTES=1800)
    pages = walk(server_for(Odd), context(alice))
    assert pages[0]["resources"][0]["name"] == "\ud800"
    assert len(pages) > 2
    assert all(response_bytes(p) <= 1800 for p in pages), [response_bytes(p) for p in pages]
    assert all(len(jsonrpc.dumps_plain(p)) == len(jsonrpc.dumps(p)) for p in pages)


# Compound keysets ---------------------------------------------------------------------------------------------


def test_equal_first_field_values_are_neither_skipped_nor_repeated(settings, alice, bob):
    configure(settings, PAGE_SIZE=4)
    make_notes(alice, ["same"] * 23 + ["a", "zz", "samf", "sam"])
    make_notes(bob, ["same"] * 5)
    pages = walk(server_for(NoteSource), context(alice))
    assert uris(pages) == expected_notes(alice)
    assert len(uris(pages)) == 27


def test_equal_creation_times_are_ordered_by_id(settings, alice):
    configure(settings, PAGE_SIZE=3)
    make_documents(alice, 10, same_time=True)
    make_documents(alice, 4, start=10)
    assert listed(server_for(DocumentSource), context(alice)) == expected_documents(alice)


def test_text_keys_are_in_byte_order_on_every_backend(settings, alice):
    """Locale collations would put 'a' before 'B' and ignore case or accents: keyset pages need byte order."""
    configure(settings, PAGE_SIZE=2)
    titles = ["b", "B", "a", "A", "é", "e", "ä", "Z", "z", "_", "a b", "ab", "😀", "\uff21", "~", "a-b", "ä"]
    make_notes(alice, titles)
    got = listed(server_for(NoteSource), context(alice))
    assert got == expected_notes(alice)
    by_uri = {note_uri(n): n.title for n in Note.objects.filter(owner=alice)}
    assert [by_uri[u] for u in got] == sorted(titles, key=str.encode)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="collations are a PostgreSQL feature here")
def test_byte_order_holds_when_the_column_has_a_locale_collation(settings, alice):
    """COLLATE "C" in both ORDER BY and WHERE: with the column's own ICU order, keyset pages would skip rows."""
    with connection.cursor() as cursor:  # undone with the test's transaction
        cursor.execute('ALTER TABLE library_note ALTER COLUMN title TYPE varchar(200) COLLATE "und-x-icu"')
    titles = ["b", "B", "a", "A", "é", "e", "Z", "z", "_x", "ab", "a b", "a-b", "Ä", "ä"] * 2
    make_notes(alice, titles)
    in_column_order = [n.title for n in Note.objects.filter(owner=alice).order_by("title", "id")]
    assert in_column_order != sorted(titles, key=str.encode)  # the column's collation is not byte order
    configure(settings, PAGE_SIZE=3)
    assert listed(server_for(NoteSource), context(alice)) == expected_notes(alice)
    for prefix in ("learn://by-title/a", "learn://by-title/A", "learn://by-title/%C3%A4"):
        assert listed(server_for(NotesByTitle), context(alice), prefix=prefix) == [
            u for u in titled(alice) if u.startswith(prefix)
        ]


# Generic list() sources: the contract is validated ------------------------------------------------------------


class Returns(GenericSource):
    """A generic source returning ``result`` (a callable of ``after``) whatever it is asked."""

    result: ClassVar[Any] = None

    def produce(self, *, after: str | None, limit: int, prefix: str) -> Any:
        return type(self).result(after)


def returning(value: Any) -> type[Returns]:
    return type("Returning", (Returns,), {"result": staticmethod(lambda after: value)})


def res(n: str, **extra: Any) -> dict[str, Any]:
    return {"uri": f"learn://things/{n}", "name": f"n{n}", **extra}


VIOLATIONS: dict[str, Any] = {
    "key-not-printable": ([("a\x01", res("1"))], False),
    "key-non-ascii": ([("é", res("1"))], False),
    "key-trailing-newline": ([("a\n", res("1"))], False),
    "key-empty": ([("", res("1"))], False),
    "key-too-long": ([("k" * 257, res("1"))], False),
    "key-with-space": ([("a b", res("1"))], False),
    "key-not-a-string": ([(1, res("1"))], False),
    "keys-decreasing": ([("b", res("1")), ("a", res("2"))], False),
    "keys-equal": ([("a", res("1")), ("a", res("2"))], False),
    "keys-not-in-byte-order": ([("a", res("1")), ("B", res("2"))], False),
    "has-more-on-empty-page": ([], True),
    "uri-too-long": ([("a", {"uri": "learn://things/" + "x" * 2040, "name": "n"})], False),
    "uri-other-template": ([("a", {"uri": "learn://other/1", "name": "n"})], False),
    "uri-not-matching-variable": ([("a", {"uri": "learn://things/a/b", "name": "n"})], False),
    "uri-repeated": ([("a", res("1")), ("b", res("1"))], False),
    "uri-missing": ([("a", {"name": "n"})], False),
    "name-too-long": ([("a", res("1", name="n" * 513))], False),
    "name-missing": ([("a", {"uri": "learn://things/1"})], False),
    "mime-too-long": ([("a", res("1", mimeType="m" * 129))], False),
    "extra-field-title": ([("a", res("1", title="t"))], False),
    "extra-field-description": ([("a", res("1", description="d"))], False),
    "extra-field-size": ([("a", res("1", size=3))], False),
    "extra-field-meta": ([("a", res("1", _meta={}))], False),
    "not-a-pair": ([("a", res("1"))],),
    "has-more-not-bool": ([("a", res("1"))], "yes"),
    "entry-not-a-pair": ([("a",)], False),
    "resource-not-a-dict": ([("a", "learn://things/1")], False),
    "not-a-page": None,
}


@pytest.mark.parametrize("name", list(VIOLATIONS))
def test_callback_contract_violation_fails_with_a_generic_internal_error(alice, caplog, name):
    server = server_for(DocumentSource, returning(VIOLATIONS[name]))
    make_documents(alice, 1)
    assert_generic_internal_error(lambda: list_page(server, context(alice)))
    assert "broke the list contract" in caplog.text


def test_limits_at_the_boundary_are_accepted(alice):
    ok = InventoryPage(
        [
            ("k" * 256, {"uri": "learn://things/" + "x" * (2048 - 15), "name": "n" * 512, "mimeType": "m" * 128}),
        ],
        False,
    )
    page = list_page(server_for(returning(ok)), context(alice))
    assert page["resources"] == [ok.entries[0][1]]


def test_more_entries_than_the_limit_fail(settings, alice):
    configure(settings, PAGE_SIZE=2)
    server = server_for(returning(([("a", res("1")), ("b", res("2")), ("c", res("3"))], True)))
    assert_generic_internal_error(lambda: list_page(server, context(alice)))


def test_key_not_after_the_previous_batch_fails(alice):
    """A short batch with has_more makes the traversal ask again with ``after``: the next keys must exceed it."""
    for second in ("a", "m"):
        replies = {None: ([("m", res("1"))], True), "m": ([(second, res("2"))], False)}
        server = server_for(type("Second", (Returns,), {"result": staticmethod(replies.__getitem__)}))
        assert_generic_internal_error(lambda server=server: list_page(server, context(alice)))


def test_uri_repeated_in_a_later_batch_of_the_same_page_fails(alice):
    replies = {None: ([("a", res("1"))], True), "a": ([("b", res("1"))], False)}
    server = server_for(type("Again", (Returns,), {"result": staticmethod(replies.__getitem__)}))
    assert_generic_internal_error(lambda: list_page(server, context(alice)))


def test_uri_outside_the_prefix_fails(alice):
    server = server_for(returning(([("a", res("2"))], False)))
    assert_generic_internal_error(lambda: list_page(server, context(alice), prefix="learn://things/1"))


def test_backend_errors_are_logged_not_sent(alice, caplog):
    class Broken(GenericSource):
        def produce(self, **kwargs: Any) -> Any:
            raise RuntimeError("s3cr3t backend detail")

    error = rpc_error(lambda: list_page(server_for(Broken), context(alice)))
    assert (error.code, error.message) == (INTERNAL_ERROR, "Internal error")
    assert "s3cr3t" not in json.dumps(error.to_error())
    assert "s3cr3t backend detail" in caplog.text


def test_generic_source_receives_principal_limit_after_prefix_and_deadline(settings, alice):
    class Things(GenericSource):
        items = [thing(f"{i:02d}") for i in range(5)]

    configure(settings, PAGE_SIZE=3, LIST_DEADLINE_SECONDS=7.0)
    server = server_for(DocumentSource, Things)
    make_documents(alice, 1)
    ctx = context(alice, client_id="cli", audience=("https://rs.example/mcp",))
    before = time.monotonic()
    pages = walk(server, ctx)
    assert uris(pages) == [document_uri(Document.objects.get())] + [f"learn://things/{i:02d}" for i in range(5)]
    calls = source(server, "things").calls
    assert [(c["after"], c["limit"], c["prefix"]) for c in calls] == [(None, 2, ""), ("01", 3, "")]
    assert all(c["principal"] == ctx.principal for c in calls)
    assert calls[0]["principal"].client_id == "cli"
    assert calls[0]["principal"].audience == ("https://rs.example/mcp",)
    assert all(before < c["deadline"] <= c["at"] + 7.0 for c in calls)


# Authentication of the whole list ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [V2026_07_28, V2025_11_25])
def test_anonymous_caller_gets_401_once_any_source_exists(version):
    server = server_for(DocumentSource, NoteSource)
    server.registry.register_resource("learn://about", "about", lambda: "public text")
    with pytest.raises(AuthenticationRequired) as info:
        list_page(server, anonymous(version))
    assert info.value.scopes == (SCOPE,)


def test_anonymous_caller_lists_static_resources_when_no_source_exists():
    class NotListing(ResourceTemplate):
        name = "plain"
        uri_template = "learn://plain/{id}"
        required_scopes = (SCOPE,)

    server = server_for(NotListing)
    server.registry.register_resource("learn://about", "about", lambda: "public text")
    assert uris([list_page(server, anonymous())]) == ["learn://about"]


def test_caller_without_access_to_any_source_gets_403_with_every_scope(alice):
    class Other(GenericSource):
        name = "other"
        uri_template = "learn://other/{id}"
        required_scopes = ("other:read", SCOPE)

    server = server_for(DocumentSource, Other)
    with pytest.raises(InsufficientScope) as info:
        list_page(server, context(alice, scopes=("unrelated",)))
    assert set(info.value.scopes) == {SCOPE, "other:read"}
    assert source(server, "other").calls == []


def test_source_is_skipped_when_the_caller_lacks_its_scope(alice):
    class Secret(GenericSource):
        name = "secret"
        uri_template = "learn://secret/{id}"
        required_scopes = ("secret:read",)
        items = [("k", {"uri": "learn://secret/1", "name": "s"})]

    server = server_for(Secret, DocumentSource)
    make_documents(alice, 2)
    assert listed(server, context(alice)) == expected_documents(alice)
    assert source(server, "secret").calls == []
    assert listed(server, context(alice, scopes=(SCOPE, "secret:read")))[0] == "learn://secret/1"


def test_subject_less_principal_skips_model_sources_and_never_queries_them(alice):
    """A client-credentials token has no subject: model sources are skipped, never queried unrestricted."""
    queried: list[Any] = []

    class CarelessDocuments(DocumentSource):
        def get_queryset(self, request: HttpRequest) -> QuerySet[Document]:
            queried.append(request)
            return Document.objects.all()  # would leak everything if it were ever called without a subject

    class ClientOwned(GenericSource):
        items = [thing("c1")]

    make_documents(alice, 3)
    server = server_for(CarelessDocuments, ClientOwned)
    server.registry.register_resource("learn://about", "about", lambda: "a")
    ctx = context(alice, subject=None)
    assert listed(server, ctx) == ["learn://about", "learn://things/c1"]
    assert queried == []
    assert source(server, "things").calls[0]["principal"].subject is None
    # With only subject-owned sources, the listing holds static resources only.
    server = server_for(CarelessDocuments)
    assert listed(server, ctx) == []
    assert queried == []


def test_base_get_queryset_fails_closed(settings, alice):
    settings.SILENCED_SYSTEM_CHECKS = ["mcp_resources.E005"]  # served in spite of E005: the base still fails closed

    class Unscoped(ModelResourceTemplate):
        model = Document
        name = "unscoped"
        uri_template = "learn://unscoped/{id}"
        required_scopes = (SCOPE,)

    make_documents(alice, 3)
    assert listed(server_for(Unscoped), context(alice)) == []


def test_callers_only_see_their_own_records(alice, bob):
    make_documents(alice, 4)
    make_documents(bob, 3)
    make_notes(alice, ["a"])
    make_notes(bob, ["b", "c"])
    server = server_for(DocumentSource, NoteSource)
    assert listed(server, context(alice)) == expected_documents(alice) + expected_notes(alice)
    assert listed(server, context(bob)) == expected_documents(bob) + expected_notes(bob)


def test_2025_11_25_session_lists_the_same_inventory_without_cache_fields(settings, alice):
    configure(settings, PAGE_SIZE=2)
    make_documents(alice, 3)
    server = server_for(DocumentSource)
    pages = walk(server, context(alice, version=V2025_11_25))
    assert uris(pages) == expected_documents(alice)
    assert all("ttlMs" not in p and "cacheScope" not in p and "_meta" not in p for p in pages)


# Cache hints --------------------------------------------------------------------------------------------------------


def test_every_inventory_page_is_private_with_zero_ttl(settings, alice):
    settings.SILENCED_SYSTEM_CHECKS = ["mcp_resources.E036"]  # served in spite of E036: still private and uncached

    class Cacheable(GenericSource):
        items = [thing(f"{i}") for i in range(4)]

        def cache_control(self, request: HttpRequest) -> tuple[str, int]:
            return ("public", 60_000)

    configure(settings, PAGE_SIZE=2, PUBLIC_CACHE_TTL_MS=30_000)
    server = server_for(Cacheable)
    server.registry.register_resource("learn://about", "about", lambda: "a")
    pages = walk(server, context(alice))
    assert len(pages) == 3
    assert all((p["cacheScope"], p["ttlMs"]) == ("private", 0) for p in pages)


def test_static_only_listing_may_be_public_and_cached(settings, alice):
    class NotListing(ResourceTemplate):
        name = "plain"
        uri_template = "learn://plain/{id}"
        access = "public"

    configure(settings, PAGE_SIZE=1, PUBLIC_CACHE_TTL_MS=30_000)
    server = server_for(NotListing)
    server.registry.register_resource("learn://a", "a", lambda: "a")
    server.registry.register_resource("learn://b", "b", lambda: "b")
    server.registry.register_resource("learn://private", "p", lambda: "p", access="protected", required_scopes=(SCOPE,))
    public_pages = walk(server, anonymous())
    assert uris(public_pages) == ["learn://a", "learn://b"]
    assert all((p["cacheScope"], p["ttlMs"]) == ("public", 30_000) for p in public_pages)
    # A signed-in caller may see protected entries: the listing is then private on every page.
    private_pages = walk(server, context(alice))
    assert uris(private_pages) == ["learn://a", "learn://b", "learn://private"]
    assert all(p["cacheScope"] == "private" for p in private_pages)


# Prefix ----------------------------------------------------------------------------------------------------------


def test_prefix_keeps_only_matching_uris(settings, alice):
    configure(settings, PAGE_SIZE=3)
    server = server_for(DocumentSource, NoteSource)
    server.registry.register_resource("learn://about", "about", lambda: "a")
    server.registry.register_resource("learn://notes", "exact", lambda: "n")
    make_documents(alice, 4)
    make_notes(alice, ["x", "y"])
    assert listed(server, context(alice), prefix="learn://notes/") == expected_notes(alice)
    assert listed(server, context(alice), prefix="learn://notes") == ["learn://notes", *expected_notes(alice)]
    assert listed(server, context(alice), prefix="learn://documents/") == expected_documents(alice)
    assert listed(server, context(alice), prefix="") == listed(server, context(alice))
    assert listed(server, context(alice), prefix="learn://") == listed(server, context(alice))
    assert listed(server, context(alice), prefix="nothing://") == []
    assert listed(server, context(alice), prefix="learn://documents/x") == []
    assert listed(server, context(alice), prefix="learn://documents/1/") == []


def test_partial_variable_prefix_lists_ids_starting_with_it(settings, alice, bob):
    configure(settings, PAGE_SIZE=4)
    make_documents(alice, 25)
    make_documents(bob, 25)
    server = server_for(DocumentSource, NoteSource)
    for start in ("1", "2", str(Document.objects.filter(owner=alice).first().pk)):
        prefix = f"learn://documents/{start}"
        expected = [u for u in expected_documents(alice) if u.startswith(prefix)]
        assert listed(server, context(alice), prefix=prefix) == expected
    assert listed(server, context(alice), prefix="learn://documents/") == expected_documents(alice)


class NotesByTitle(ModelResourceTemplate):
    model = Note
    name = "notes-by-title"
    uri_template = "learn://by-title/{title}/{id}"
    required_scopes = (SCOPE,)
    ordering = ("title", "id")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Note]:
        return Note.objects.filter(owner_id=request.user.pk)


def titled(owner: Any) -> dict[str, str]:
    return {
        NotesByTitle().get_uri(note): note.title
        for note in sorted(Note.objects.filter(owner=owner), key=lambda n: (n.title.encode(), n.pk))
    }


@pytest.mark.parametrize(
    ("prefix", "titles"),
    [
        ("learn://by-title/same/", ["same", "same"]),  # completed variable: exact value
        ("learn://by-title/same", ["same", "same", "samething"]),  # partial: starts-with
        ("learn://by-title/sa", ["same", "same", "samething"]),
        ("learn://by-title/Sa", ["Same"]),  # case-sensitive, also on SQLite (LIKE is not)
        ("learn://by-title/caf%C3%A9", ["café"]),
        ("learn://by-title/caf%C3", ["café"]),  # a prefix may end inside a percent-encoded character
        ("learn://by-title/caf%", ["café"]),
        ("learn://by-title/a%2Fb/", ["a/b"]),
        ("learn://by-title/a/", []),
        ("learn://by-title/", ["Same", "a/b", "café", "same", "same", "samething"]),
    ],
)
def test_prefix_pushed_into_completed_and_partial_variables(alice, bob, prefix, titles):
    make_notes(alice, ["same", "same", "samething", "Same", "café", "a/b"])
    make_notes(bob, ["same", "café"])
    server = server_for(NotesByTitle)
    expected = {u: t for u, t in titled(alice).items() if u.startswith(prefix)}
    got = listed(server, context(alice), prefix=prefix)
    assert got == list(expected)
    assert [expected[u] for u in got] == sorted(titles, key=str.encode)


@pytest.mark.parametrize(
    "prefix", ["learn://by-title/a%00", "learn://by-title/%00/", "learn://by-title/%FF", "learn://by-title/%FFa/"]
)
def test_prefix_naming_no_storable_value_lists_nothing(alice, prefix):
    make_notes(alice, ["a", "ab"])
    assert listed(server_for(NotesByTitle, DocumentSource), context(alice), prefix=prefix) == []


def test_prefix_with_nul_in_an_integer_variable_lists_nothing(alice):
    make_documents(alice, 3)
    assert listed(server_for(DocumentSource), context(alice), prefix="learn://documents/%00") == []
    assert listed(server_for(DocumentSource), context(alice), prefix="learn://documents/1%00") == []


def test_long_prefix_keeps_cursors_short_enough_to_reuse(settings, alice):
    """A prefix may be 2,048 characters of non-ASCII text: the cursor binds it without carrying it."""
    stem = "learn://paths/" + "é" * 2000

    class Paths(GenericSource):
        name = "paths"
        uri_template = "learn://paths/{+path}"
        items = [(f"{i:02d}", {"uri": f"{stem}{i:02d}", "name": f"p{i}"}) for i in range(5)]

        def canonical_uri(self, parsed: Any) -> str:
            return "learn://paths/" + parsed["path"]  # its URIs are IRIs: non-ASCII as is, not percent-encoded

    configure(settings, PAGE_SIZE=2)
    pages = walk(server_for(Paths), context(alice), prefix=stem)
    assert uris(pages) == [f"{stem}{i:02d}" for i in range(5)]
    assert len(pages) == 3


def test_position_too_long_for_a_cursor_fails_instead_of_stranding_the_client(settings, alice, caplog):
    class ByBody(DocumentSource):
        name = "by-body"
        uri_template = "learn://by-body/{id}"
        ordering = ("body", "id")

    configure(settings, PAGE_SIZE=1)
    Document.objects.create(owner=alice, title="a", body="漢" * 3000)
    Document.objects.create(owner=alice, title="b", body="漢" * 3001)
    assert_generic_internal_error(lambda: list_page(server_for(ByBody), context(alice)))
    assert "too long for a cursor" in caplog.text


def test_completed_variable_prefix_pages_within_the_filtered_results(settings, alice):
    configure(settings, PAGE_SIZE=2)
    make_notes(alice, ["same"] * 7 + ["samex"] * 3 + ["other"] * 4)
    prefix = "learn://by-title/same/"
    pages = walk(server_for(NotesByTitle), context(alice), prefix=prefix)
    assert uris(pages) == [u for u in titled(alice) if u.startswith(prefix)]
    assert [len(p["resources"]) for p in pages] == [2, 2, 2, 1]


def test_prefix_is_pushed_down_sources_that_cannot_match_are_not_called(alice):
    queried: list[str] = []

    class CountingNotes(NoteSource):
        def get_queryset(self, request: HttpRequest) -> QuerySet[Note]:
            queried.append("notes")
            return super().get_queryset(request)

    class Elsewhere(GenericSource):
        name = "elsewhere"
        uri_template = "other://things/{id}"
        items = [("k", {"uri": "other://things/1", "name": "o"})]

    server = server_for(DocumentSource, CountingNotes, Elsewhere)
    make_documents(alice, 2)
    assert listed(server, context(alice), prefix="learn://documents/") == expected_documents(alice)
    assert listed(server, context(alice), prefix="learn://d") == expected_documents(alice)
    assert queried == []
    assert source(server, "elsewhere").calls == []
    assert listed(server, context(alice), prefix="other://") == ["other://things/1"]
    assert source(server, "elsewhere").calls[0]["prefix"] == "other://"
    assert listed(server, context(alice), prefix="learn:") == expected_documents(alice)
    assert queried == ["notes"]


def test_generic_source_filters_by_the_prefix_it_receives(settings, alice):
    class Things(GenericSource):
        items = [thing(f"{i:02d}") for i in range(30)]

    configure(settings, PAGE_SIZE=2)
    server = server_for(Things)
    assert listed(server, context(alice), prefix="learn://things/1") == [f"learn://things/1{i}" for i in range(10)]
    assert {c["prefix"] for c in source(server, "things").calls} == {"learn://things/1"}


@pytest.mark.parametrize(
    "prefix", [5, ["learn://"], {"a": 1}, "x" * 2049, "learn://\x00", "learn://\n", "learn://\ud800"]
)
def test_invalid_prefix_is_invalid_params(alice, prefix):
    error = rpc_error(lambda: server_for(DocumentSource).call("resources/list", {"prefix": prefix}, context(alice)))
    assert error.code == INVALID_PARAMS


def test_cursor_is_bound_to_the_prefix(settings, alice):
    configure(settings, PAGE_SIZE=2)
    make_documents(alice, 15)
    server = server_for(DocumentSource)
    first = list_page(server, context(alice), prefix="learn://documents/")
    cursor = first["nextCursor"]
    for other in ("learn://documents/1", "learn://", "", None, "learn://documents"):
        assert_invalid_cursor(lambda other=other: list_page(server, context(alice), prefix=other, cursor=cursor))
    assert list_page(server, context(alice), prefix="learn://documents/", cursor=cursor)["resources"]


def test_templates_list_prefix(settings):
    class Plain(ResourceTemplate):
        name = "plain"
        uri_template = "other://plain/{id}"
        access = "public"

    server = server_for(DocumentSource, NoteSource, Plain)
    ctx = anonymous()

    def templates(prefix: Any = None) -> list[str]:
        params = {} if prefix is None else {"prefix": prefix}
        return [t["uriTemplate"] for t in server.call("resources/templates/list", params, ctx)["resourceTemplates"]]

    assert templates() == ["learn://documents/{id}", "learn://notes/{id}", "other://plain/{id}"]
    assert templates("learn://") == ["learn://documents/{id}", "learn://notes/{id}"]
    assert templates("learn://notes/{") == ["learn://notes/{id}"]
    assert templates("other://plain/{id}") == ["other://plain/{id}"]
    assert templates("learn://notes/1") == []
    # Paged with the prefix: the cursor positions within the filtered templates and is bound to the prefix.
    configure(settings, PAGE_SIZE=1)
    first = server.call("resources/templates/list", {"prefix": "learn://"}, ctx)
    assert [t["name"] for t in first["resourceTemplates"]] == ["documents"]
    second = server.call("resources/templates/list", {"prefix": "learn://", "cursor": first["nextCursor"]}, ctx)
    assert [t["name"] for t in second["resourceTemplates"]] == ["notes"]
    assert "nextCursor" not in second
    assert_invalid_cursor(lambda: server.call("resources/templates/list", {"cursor": first["nextCursor"]}, ctx))


def test_prefix_extension_is_advertised_in_both_eras(alice):
    server = server_for(DocumentSource)
    stateless = server.call("server/discover", {}, context(alice))["capabilities"]
    session_ctx = context(alice, version=V2025_11_25)
    session = server.call("initialize", {"protocolVersion": V2025_11_25}, session_ctx)["capabilities"]
    methods = ["resources/list", "resources/templates/list"]
    assert stateless["extensions"][PREFIX_EXTENSION]["methods"] == methods
    assert session["experimental"][PREFIX_EXTENSION]["methods"] == methods
    assert "extensions" not in session
    assert "experimental" not in stateless


# Cursors: binding ---------------------------------------------------------------------------------------------------


@pytest.fixture
def paged(settings, alice, bob):
    """A server, alice's first-page cursor and the context it was made for."""
    configure(settings, PAGE_SIZE=2)
    make_documents(alice, 6)
    make_documents(bob, 6)
    server = server_for(DocumentSource, NoteSource)
    ctx = context(alice)
    return server, list_page(server, ctx)["nextCursor"], ctx


def test_cursor_continues_for_the_same_caller_in_a_new_request(paged, alice):
    server, cursor, _ = paged
    page = list_page(server, context(alice), cursor=cursor)
    assert uris([page]) == expected_documents(alice)[2:4]


@pytest.mark.parametrize(
    "caller",
    ["other-user", "more-scopes", "fewer-scopes", "other-client", "no-client", "other-audience", "no-subject"],
)
def test_cursor_is_bound_to_the_caller(paged, alice, bob, caller):
    server, cursor, _ = paged
    ctx = {
        "other-user": lambda: context(bob),
        "more-scopes": lambda: context(alice, scopes=(SCOPE, "extra:read")),
        "fewer-scopes": lambda: context(alice, scopes=()),
        "other-client": lambda: context(alice, client_id="another-client"),
        "no-client": lambda: context(alice, client_id=None),
        "other-audience": lambda: context(alice, audience=("https://elsewhere.example/mcp",)),
        "no-subject": lambda: context(alice, subject=None),
    }[caller]()
    if caller == "fewer-scopes":
        with pytest.raises(InsufficientScope):  # scopes are checked before the cursor is opened
            list_page(server, ctx, cursor=cursor)
        return
    assert_invalid_cursor(lambda: list_page(server, ctx, cursor=cursor))


def test_cursor_is_bound_to_the_method(paged, settings):
    server, cursor, ctx = paged
    assert_invalid_cursor(lambda: server.call("resources/templates/list", {"cursor": cursor}, ctx))
    configure(settings, PAGE_SIZE=1)
    templates_cursor = server.call("resources/templates/list", {}, ctx)["nextCursor"]
    assert_invalid_cursor(lambda: list_page(server, ctx, cursor=templates_cursor))


def test_cursor_is_bound_to_the_registered_sources(paged, alice):
    _, cursor, ctx = paged

    class Extra(GenericSource):
        pass

    same = server_for(DocumentSource, NoteSource, name="another registry, same templates")
    assert list_page(same, context(alice), cursor=cursor)["resources"]
    for other in (server_for(DocumentSource, NoteSource, Extra), server_for(DocumentSource), server_for(NoteSource)):
        assert_invalid_cursor(lambda other=other: list_page(other, ctx, cursor=cursor))


def test_cursor_is_refused_in_a_registry_whose_template_changed(paged, alice):
    _, cursor, ctx = paged

    class MovedNotes(NoteSource):
        uri_template = "learn://notes-v2/{id}"

    assert_invalid_cursor(lambda: list_page(server_for(DocumentSource, MovedNotes), ctx, cursor=cursor))


@pytest.mark.parametrize("cursor", ["", "x", "A" * 10_000, 5, 0, ["a"], {"c": 1}, True])
def test_malformed_cursors_are_invalid(paged, cursor):
    server, _, ctx = paged
    assert_invalid_cursor(lambda: server.call("resources/list", {"cursor": cursor}, ctx))


def test_null_cursor_starts_a_new_traversal(paged, alice):
    server, _, ctx = paged
    page = server.call("resources/list", {"cursor": None}, ctx)
    assert uris([page]) == expected_documents(alice)[:2]


def test_cursor_from_another_process_key_is_invalid(paged):
    server, cursor, ctx = paged
    keyed = MCPServer(server.registry, codec=CursorCodec(["a key from another deployment"]))
    assert_invalid_cursor(lambda: list_page(keyed, ctx, cursor=cursor))


# Cursors: expiry -------------------------------------------------------------------------------------------------


class Clock:
    """``time.time()`` moved forward by :meth:`advance`: cursors are sealed and checked with it, so expiry is tested
    without waiting."""

    def __init__(self) -> None:
        self.offset = 0.0

    def advance(self, seconds: float) -> None:
        self.offset += seconds


@pytest.fixture
def clock(monkeypatch) -> Clock:
    clock, real = Clock(), time.time
    monkeypatch.setattr(time, "time", lambda: real() + clock.offset)
    return clock


def test_traversal_expires_after_the_ttl(settings, alice, clock):
    configure(settings, PAGE_SIZE=2, CURSOR_TTL_SECONDS=60)
    make_documents(alice, 5)
    server = server_for(DocumentSource)
    cursor = list_page(server, context(alice))["nextCursor"]
    clock.advance(58)  # within the TTL (the start time is sealed in whole seconds)
    assert uris([list_page(server, context(alice), cursor=cursor)]) == expected_documents(alice)[2:4]
    clock.advance(4)
    assert_invalid_cursor(lambda: list_page(server, context(alice), cursor=cursor))


def test_default_ttl_is_15_minutes_from_the_first_page(settings, alice, clock):
    configure(settings, PAGE_SIZE=2, CURSOR_KEYS=["inspection key for the test suite"])
    make_documents(alice, 7)
    server = server_for(DocumentSource)
    codec = CursorCodec(["inspection key for the test suite"])
    before = int(time.time())
    pages = walk(server, context(alice), between=lambda index, page: clock.advance(60))
    starts = {codec.open(p["nextCursor"])["t"] for p in pages if "nextCursor" in p}
    assert len(starts) == 1
    assert before <= starts.pop() < before + 60  # the first page's time: the clock moved a minute after each page
    cursor = pages[0]["nextCursor"]
    clock.advance(15 * 60 - 5 - clock.offset)  # 15 minutes less 5 seconds after the first page
    assert list_page(server, context(alice), cursor=cursor)["resources"]
    clock.advance(10)
    assert_invalid_cursor(lambda: list_page(server, context(alice), cursor=cursor))


def test_later_pages_and_replays_do_not_extend_the_traversal(settings, alice, clock):
    configure(settings, PAGE_SIZE=2, CURSOR_TTL_SECONDS=100)
    make_documents(alice, 9)
    server = server_for(DocumentSource)
    first = list_page(server, context(alice))
    clock.advance(50)
    second = list_page(server, context(alice), cursor=first["nextCursor"])  # made at t0 + 50
    list_page(server, context(alice), cursor=first["nextCursor"])  # a replay
    clock.advance(70)
    # Had page two or the replay restarted the clock, its cursor would be valid until at least t0 + 149.
    assert_invalid_cursor(lambda: list_page(server, context(alice), cursor=second["nextCursor"]))
    assert_invalid_cursor(lambda: list_page(server, context(alice), cursor=first["nextCursor"]))


def test_cursor_dated_in_the_future_is_invalid(settings, alice, clock):
    """A cursor whose traversal starts more than 5 seconds ahead of this server's clock (skew allowance) is refused."""
    configure(settings, PAGE_SIZE=2)
    make_documents(alice, 5)
    server = server_for(DocumentSource)
    clock.advance(3)
    within_skew = list_page(server, context(alice))["nextCursor"]
    clock.advance(7)
    ahead = list_page(server, context(alice))["nextCursor"]
    clock.advance(-10)
    assert list_page(server, context(alice), cursor=within_skew)["resources"]
    assert_invalid_cursor(lambda: list_page(server, context(alice), cursor=ahead))


# Cursors: keys ---------------------------------------------------------------------------------------------------


def test_cursor_keys_setting_first_encrypts_all_decrypt(settings, alice):
    key_a, key_b = "key A: 0123456789abcdef", "key B: fedcba9876543210"
    configure(settings, PAGE_SIZE=2)
    make_documents(alice, 6)
    server = server_for(DocumentSource)
    expected = expected_documents(alice)[2:4]

    configure(settings, CURSOR_KEYS=[key_a])
    cursor_a = list_page(server, context(alice))["nextCursor"]
    # Another worker configured with the same keys (another server object) opens it.
    assert uris([list_page(server_for(DocumentSource), context(alice), cursor=cursor_a)]) == expected

    configure(settings, CURSOR_KEYS=[key_b, key_a])  # rotation: B encrypts, A still decrypts
    page = list_page(server, context(alice), cursor=cursor_a)
    assert uris([page]) == expected
    cursor_b = page["nextCursor"]

    configure(settings, CURSOR_KEYS=[key_b])  # A retired
    assert_invalid_cursor(lambda: list_page(server, context(alice), cursor=cursor_a))
    assert uris([list_page(server, context(alice), cursor=cursor_b)]) == expected_documents(alice)[4:6]

    configure(settings, CURSOR_KEYS=[])  # back to the per-process key: keyed cursors do not open
    assert_invalid_cursor(lambda: list_page(server, context(alice), cursor=cursor_b))


# Cursors: live pages -------------------------------------------------------------------------------------------------


def test_replaying_a_cursor_returns_the_live_records(settings, alice):
    configure(settings, PAGE_SIZE=3)
    make_documents(alice, 9)
    server = server_for(DocumentSource)
    cursor = list_page(server, context(alice))["nextCursor"]
    first = list_page(server, context(alice), cursor=cursor)
    assert first == list_page(server, context(alice), cursor=cursor) | {"nextCursor": first["nextCursor"]}
    replay_uris = uris([first])
    Document.objects.filter(pk=int(replay_uris[1].rsplit("/", 1)[1])).delete()
    second = list_page(server, context(alice), cursor=cursor)
    assert uris([second]) == expected_documents(alice)[3:6]
    assert replay_uris[1] not in uris([second])
    assert uris([second]) == [replay_uris[0], replay_uris[2], expected_documents(alice)[5]]
    # A soft-deleted record (filtered by the scoped queryset) disappears as well.
    Document.objects.filter(pk=int(uris([second])[0].rsplit("/", 1)[1])).update(deleted_at=timezone.now())
    third = list_page(server, context(alice), cursor=cursor)
    assert uris([third]) == expected_documents(alice)[3:6]


def test_revoked_source_access_removes_it_from_later_pages(settings, alice):
    """Access is checked on every page: a record moved to another owner disappears from the rest of the walk."""
    configure(settings, PAGE_SIZE=2)
    make_documents(alice, 6)
    server = server_for(DocumentSource)
    first = list_page(server, context(alice))
    bob = get_user_model().objects.create_user("bob2")
    moved = expected_documents(alice)[2]
    Document.objects.filter(pk=int(moved.rsplit("/", 1)[1])).update(owner=bob)
    rest = uris(walk_from(server, alice, first["nextCursor"]))
    assert moved not in rest
    assert rest == expected_documents(alice)[2:]


def walk_from(server: MCPServer, user: Any, cursor: str) -> list[dict[str, Any]]:
    pages = []
    while cursor:
        page = list_page(server, context(user), cursor=cursor)
        pages.append(page)
        cursor = page.get("nextCursor")
    return pages


# Deadline -----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("position", ["first", "last"])
def test_listing_past_its_deadline_times_out(settings, alice, caplog, position):
    class Slow(GenericSource):
        delay = 0.3
        items = [thing("a")]

    configure(settings, LIST_DEADLINE_SECONDS=0.05)
    make_documents(alice, 1)
    templates = (Slow, DocumentSource) if position == "first" else (DocumentSource, Slow)
    server = server_for(*templates)
    assert_generic_internal_error(lambda: list_page(server, context(alice)), "Request timed out")
    assert "deadline" in caplog.text


def test_deadline_passed_to_callbacks_is_the_settings_deadline(settings, alice):
    configure(settings, LIST_DEADLINE_SECONDS=5)

    class Checks(GenericSource):
        items = [thing("a")]

    server = server_for(Checks)
    before = time.monotonic()
    list_page(server, context(alice))
    call = source(server, "things").calls[0]
    assert before + 5 <= call["deadline"] <= call["at"] + 5


@pytest.mark.skipif(connection.vendor != "postgresql", reason="statement timeouts are a PostgreSQL feature")
def test_slow_model_query_is_cancelled_by_the_statement_timeout(settings, alice):
    class SlowDocuments(DocumentSource):
        def get_queryset(self, request: HttpRequest) -> QuerySet[Document]:
            return super().get_queryset(request).extra(where=["(SELECT 1 FROM pg_sleep(1)) = 1"])

    configure(settings, LIST_DEADLINE_SECONDS=0.2)
    make_documents(alice, 3)
    assert_cut_by_the_deadline(lambda: list_page(server_for(SlowDocuments), context(alice)))
    # The connection is usable afterwards and no timeout lingers in the surrounding transaction.
    assert Document.objects.filter(owner=alice).count() == 3
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == "0"


@pytest.mark.skipif(connection.vendor != "postgresql", reason="statement timeouts are a PostgreSQL feature")
def test_statement_timeout_does_not_outlive_the_listing(alice):
    """Inside an enclosing transaction (ATOMIC_REQUESTS, tests) the listing's timeout is not left behind."""
    make_documents(alice, 3)
    list_page(server_for(DocumentSource), context(alice))
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == "0"


@pytest.mark.skipif(connection.vendor != "postgresql", reason="a PostgreSQL plan")
def test_keyset_condition_is_an_index_range(alice):
    """The page query starts an index range at the position: it never scans and filters every earlier row."""
    from mcp_resources.listing.keyset import keyset_queryset

    make_documents(alice, 5000)
    middle = Document.objects.filter(owner=alice).order_by("created", "id")[2500]
    query = keyset_queryset(Document.objects.filter(owner=alice), ["created", "id"], [middle.created, middle.pk], 50)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE library_document")  # the planner sees 5,000 rows of one owner, as in production
    plan = query.explain()
    index_condition = next(line for line in plan.splitlines() if "Index Cond" in line)
    assert "created" in index_condition, plan
    assert ">=" in index_condition, plan


def _timestamptz_loader() -> type:
    from psycopg.pq import Format

    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        loader: type = cursor.cursor.adapters.get_loader(cursor.description[0].type_code, Format.TEXT)
        return loader


@pytest.mark.skipif(connection.vendor != "postgresql", reason="a psycopg loader, PostgreSQL only")
def test_listing_reads_timestamps_with_psycopgs_own_loader(settings):
    """Django's Python timestamptz loader costs a third of a page: the listing uses psycopg's, with equal values."""
    from django.db.backends.postgresql.psycopg_any import BaseTzLoader

    from mcp_resources.queries import native_timestamps

    assert issubclass(_timestamptz_loader(), BaseTzLoader)  # Django's, outside the block
    with native_timestamps(connection.alias):
        assert not issubclass(_timestamptz_loader(), BaseTzLoader)
    assert issubclass(_timestamptz_loader(), BaseTzLoader)  # nothing outlives the block
    sql = "SELECT now(), TIMESTAMPTZ '2024-02-29 23:59:59.999999+05:30', TIMESTAMPTZ '0001-01-01 00:00:00+00'"
    with connection.cursor() as cursor:
        cursor.execute(sql)
        django_values = cursor.fetchone()
    with native_timestamps(connection.alias), connection.cursor() as cursor:
        cursor.execute(sql)
        native_values = cursor.fetchone()
    assert native_values[1:] == django_values[1:]
    assert [v.tzinfo for v in native_values] == [v.tzinfo for v in django_values] == [connection.timezone] * 3
    settings.USE_TZ = False  # Django then reads naive datetimes: the block must leave them alone
    with native_timestamps(connection.alias):
        assert issubclass(_timestamptz_loader(), BaseTzLoader)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="a psycopg loader, PostgreSQL only")
def test_pages_are_identical_with_psycopgs_timestamp_loader(settings, alice, monkeypatch):
    import contextlib

    configure(settings, PAGE_SIZE=3)
    make_documents(alice, 5)
    make_documents(alice, 4, start=5, same_time=True)
    server = server_for(DocumentSource)
    native = [page["resources"] for page in walk(server, context(alice))]
    monkeypatch.setattr(sources, "native_timestamps", lambda using: contextlib.nullcontext())
    assert [page["resources"] for page in walk(server, context(alice))] == native
    assert len(native) == 3
    assert sum(map(len, native)) == 9


# Registry sanity ------------------------------------------------------------------------------------------------------


def test_public_or_hidden_templates_never_list(alice):
    class PublicLister(GenericSource):
        name = "public-lister"
        uri_template = "learn://public/{id}"
        access = "public"
        required_scopes = ()
        items = [("k", {"uri": "learn://public/1", "name": "p"})]

    class HiddenLister(GenericSource):
        name = "hidden-lister"
        uri_template = "learn://hidden/{id}"
        discoverable = False
        items = [("k", {"uri": "learn://hidden/1", "name": "h"})]

    server = server_for(PublicLister, HiddenLister, DocumentSource)
    make_documents(alice, 1)
    assert listed(server, context(alice)) == expected_documents(alice)
    assert source(server, "public-lister").calls == source(server, "hidden-lister").calls == []
