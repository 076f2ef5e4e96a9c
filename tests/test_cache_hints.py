"""Cache hints (``ttlMs``, ``cacheScope``, 2026-07-28): what templates, repositories and static resources declare.

Through the server core with real registries and users: ``resources/read`` answers with the template's (or static
resource's) hint; ``resources/templates/list`` combines the templates' hints; a ``resources/list`` page combines its
sources' hints (private wins, the smallest lifetime), the scope the same on every page of a listing, while every page
of a listing that includes a caller's inventory is private and uncached (docs/pagination.md#cache-hints-2026-07-28).
A public hint is refused (E036, and answered private) where answers differ by caller. 2025-11-25 sessions carry no
cache fields and never call the hooks. Contract: docs/resources.md#cache-hints.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest

from mcp_resources.caching import MAX_TTL_MS, CacheHint, cache_hint, combine
from mcp_resources.checks import check_templates
from mcp_resources.models import StaticResource
from mcp_resources.protocol.versions import V2025_11_25, V2026_07_28
from mcp_resources.registries import ResourceRegistry
from mcp_resources.resources import ModelResourceTemplate, ResourceTemplate
from testproject.library.models import Document
from tests.listing_support import (
    DocumentSource,
    GenericSource,
    anonymous,
    assert_generic_internal_error,
    configure,
    context,
    list_page,
    server_for,
    thing,
    uris,
    walk,
)
from tests.repository_support import SHARED, ScrollPager, shelf, shelf_uri

pytestmark = pytest.mark.django_db


def hint_of(result: dict[str, Any]) -> tuple[str, int]:
    return result["cacheScope"], result["ttlMs"]


class Forecast(ResourceTemplate):
    """A public template whose reads may be cached by anyone for a minute."""

    name = "forecast"
    uri_template = "weather://cities/{city}"
    access = "public"

    def cache_control(self, request: HttpRequest) -> tuple[str, int]:
        return ("public", 60_000)

    def read(self, request: HttpRequest, uri: str, variables: Any) -> Any:
        return "sunny"


class PrivateDocuments(DocumentSource):
    """A model template declaring a private hint of 30 s for its reads."""

    def cache_control(self, request: HttpRequest) -> tuple[str, int]:
        return ("private", 30_000)


class Undeclared(ResourceTemplate):
    name = "plain"
    uri_template = "plain://{id}"
    access = "public"

    def read(self, request: HttpRequest, uri: str, variables: Any) -> Any:
        return "plain"


# The combination rule ---------------------------------------------------------------------------------------------


def test_private_wins_and_the_smallest_lifetime_applies():
    default = CacheHint("public", 7)
    assert combine([], default) == default
    assert combine([CacheHint("public", 60_000), CacheHint("public", 5_000)], default) == CacheHint("public", 5_000)
    assert combine([CacheHint("public", 60_000), CacheHint("private", 90_000)], default) == CacheHint("private", 60_000)


@pytest.mark.parametrize(
    "value",
    [
        ("shared", 1),
        ("public", -1),
        ("public", 1.5),
        ("public", True),
        ("public",),
        "public",
        ("public", MAX_TTL_MS + 1),
    ],
)
def test_a_malformed_hint_is_refused(value):
    with pytest.raises(ValueError, match="scope 'public' or 'private'"):
        cache_hint(value)


# resources/read -------------------------------------------------------------------------------------------------


def test_reads_answer_with_the_templates_hint(alice):
    Document.objects.create(owner=alice, title="t", body="b")
    doc = Document.objects.get()
    server = server_for(Forecast, PrivateDocuments, Undeclared)
    assert hint_of(server.call("resources/read", {"uri": "weather://cities/paris"}, anonymous())) == ("public", 60_000)
    read = server.call("resources/read", {"uri": f"learn://documents/{doc.pk}"}, context(alice))
    assert hint_of(read) == ("private", 30_000)
    # Nothing declared: not cached, public when anyone may read it, private otherwise (as before hints existed).
    assert hint_of(server.call("resources/read", {"uri": "plain://1"}, anonymous())) == ("public", 0)
    plain_docs = server_for(DocumentSource)
    assert hint_of(plain_docs.call("resources/read", {"uri": f"learn://documents/{doc.pk}"}, context(alice))) == (
        "private",
        0,
    )


def test_static_resources_from_code_declare_their_hint(alice):
    registry = ResourceRegistry("statics")
    registry.register_resource("learn://logo", "logo", lambda: b"\x89PNG", cache_control=("public", 3_600_000))
    registry.register_resource(
        "learn://mine", "mine", lambda: "m", access="protected", required_scopes=("documents:read",)
    )
    StaticResource.objects.create(uri="learn://admin", name="admin", text="a")
    from mcp_resources.server import MCPServer

    server = MCPServer(registry)
    assert hint_of(server.call("resources/read", {"uri": "learn://logo"}, anonymous())) == ("public", 3_600_000)
    assert hint_of(server.call("resources/read", {"uri": "learn://mine"}, context(alice))) == ("private", 0)
    assert hint_of(server.call("resources/read", {"uri": "learn://admin"}, anonymous())) == ("public", 0)
    with pytest.raises(ValueError, match="cache_control"):
        registry.register_resource("learn://bad", "bad", lambda: "b", cache_control=("everyone", 10))


def test_a_hook_returning_a_malformed_hint_is_a_generic_error_and_a_log_line(alice, caplog):
    class Broken(Forecast):
        def cache_control(self, request: HttpRequest) -> Any:
            return ("public", "soon")

    server = server_for(Broken)
    with caplog.at_level(logging.ERROR, logger="mcp_resources.server"):
        assert_generic_internal_error(lambda: server.call("resources/read", {"uri": "weather://cities/x"}, anonymous()))
    assert any("Broken.cache_control()" in repr(r.exc_info) for r in caplog.records if r.exc_info)


def test_sessions_of_2025_11_25_get_no_cache_fields_and_never_call_the_hooks(alice):
    class Loud(Forecast):
        def cache_control(self, request: HttpRequest) -> Any:
            raise AssertionError("a 2025-11-25 answer has no cache fields: the hook must not be called")

    pager = ScrollPager({str(alice.pk): [("a", "A"), ("b", "B")]})

    class LoudShelf(shelf(pager)):  # type: ignore[misc]
        def cache_control(self, request: HttpRequest) -> Any:
            raise AssertionError("not in a session")

    server = server_for(Loud, LoudShelf)
    ctx = context(alice, version=V2025_11_25)
    read = server.call("resources/read", {"uri": "weather://cities/x"}, ctx)
    templates = server.call("resources/templates/list", {}, ctx)
    listing = list_page(server, ctx)
    for result in (read, templates, listing):
        assert not {"ttlMs", "cacheScope", "resultType", "_meta"} & set(result)
    assert uris([listing]) == [shelf_uri("a"), shelf_uri("b")]


# resources/templates/list ---------------------------------------------------------------------------------------


def test_templates_list_combines_the_templates_hints(settings):
    configure(settings, PUBLIC_CACHE_TTL_MS=120_000, PAGE_SIZE=1)
    assert hint_of(server_for(Undeclared).call("resources/templates/list", {}, anonymous())) == ("public", 120_000)
    server = server_for(Forecast, Undeclared)
    first = server.call("resources/templates/list", {}, anonymous())
    second = server.call("resources/templates/list", {"cursor": first["nextCursor"]}, anonymous())
    # The lifetime of each page is its templates' (an undeclared one counts PUBLIC_CACHE_TTL_MS) ...
    assert hint_of(first) == ("public", 60_000)
    assert hint_of(second) == ("public", 120_000)
    # ... and a private hint anywhere makes every page private.
    private = server_for(Forecast, PrivateDocuments, Undeclared)
    pages = [private.call("resources/templates/list", {}, anonymous())]
    while "nextCursor" in pages[-1]:
        pages.append(private.call("resources/templates/list", {"cursor": pages[-1]["nextCursor"]}, anonymous()))
    assert [hint_of(p) for p in pages] == [("private", 60_000), ("private", 30_000), ("private", 120_000)]


# resources/list -------------------------------------------------------------------------------------------------


def test_a_repository_only_listing_carries_the_repositorys_hint(settings, alice):
    configure(settings, PAGE_SIZE=2, PUBLIC_CACHE_TTL_MS=0)
    pager = ScrollPager({SHARED: [(f"s{i}", f"S{i}") for i in range(5)]})
    public = shelf(pager, shared=True, cache_control=lambda self, request: ("public", 60_000))
    pages = walk(server_for(public), context(alice))
    assert [hint_of(p) for p in pages] == [("public", 60_000)] * 3
    # An undeclared repository is not cached.
    pages = walk(server_for(shelf(pager, shared=True)), context(alice))
    assert {hint_of(p) for p in pages} == {("private", 0)}


def test_a_repository_keyed_by_the_caller_is_never_public(settings, alice, bob):
    """A repository keyed by the caller (not declared shared) that declares a public hint: E036 refuses it, and its
    listing and reads say private, so no shared cache hands alice's shelf to bob."""
    configure(settings, PAGE_SIZE=2, PUBLIC_CACHE_TTL_MS=0)
    pager = ScrollPager({str(alice.pk): [(f"a{i}", f"A{i}") for i in range(3)], str(bob.pk): [("b0", "B0")]})
    keyed = shelf(pager, cache_control=lambda self, request: ("public", 60_000))
    server = server_for(keyed)
    [error] = check_templates(server.registry)
    assert error.id == "mcp_resources.E036"
    assert "answers each caller on its own unless it declares shared = True" in error.msg
    assert "shared = True" in (error.hint or "")
    with pytest.raises(ImproperlyConfigured, match=r"^\(mcp_resources\.E036\) Shelf_shelf\.cache_control\(\)"):
        list_page(server, context(alice))  # not served
    # Silenced (or a hook the check cannot ask without a caller): served, its answers private all the same.
    settings.SILENCED_SYSTEM_CHECKS = ["mcp_resources.E036"]
    pages = walk(server, context(alice))
    assert [hint_of(p) for p in pages] == [("private", 60_000)] * 2
    assert hint_of(server.call("resources/read", {"uri": shelf_uri("a0")}, context(alice))) == ("private", 60_000)
    assert hint_of(list_page(server, context(bob))) == ("private", 60_000)


def test_statics_and_a_repository_combine_page_by_page_with_one_scope(settings, alice):
    configure(settings, PAGE_SIZE=2, PUBLIC_CACHE_TTL_MS=300_000)
    pager = ScrollPager({SHARED: [(f"s{i}", f"S{i}") for i in range(4)]})
    server = server_for(shelf(pager, shared=True, cache_control=lambda self, request: ("public", 60_000)))
    server.registry.register_resource("learn://a-logo", "logo", lambda: "l", cache_control=("public", 10_000))
    server.registry.register_resource("learn://b-about", "about", lambda: "a")
    pages = walk(server, context(alice))
    assert [uris([p]) for p in pages] == [
        ["learn://a-logo", "learn://b-about"],
        [shelf_uri("s0"), shelf_uri("s1")],
        [shelf_uri("s2"), shelf_uri("s3")],
    ]
    # Page 1: the logo's 10 s and the undeclared static's PUBLIC_CACHE_TTL_MS; then the repository's minute.
    assert [hint_of(p) for p in pages] == [("public", 10_000), ("public", 60_000), ("public", 60_000)]
    # A static resource the caller may list that is protected makes every page private (the same scope throughout).
    server.registry.register_resource(
        "learn://c-members", "members", lambda: "m", access="protected", required_scopes=("documents:read",)
    )
    pages = walk(server, context(alice))
    assert {p["cacheScope"] for p in pages} == {"private"}
    assert [p["ttlMs"] for p in pages] == [10_000, 60_000, 60_000, 60_000]


def test_a_protected_admin_row_makes_an_authenticated_listing_private(settings, alice):
    configure(settings, PAGE_SIZE=5)
    pager = ScrollPager({SHARED: [("s0", "S0")]})
    server = server_for(shelf(pager, shared=True, cache_control=lambda self, request: ("public", 60_000)))
    StaticResource.objects.create(uri="learn://row", name="row", text="r", access="protected", required_scopes="x")
    assert list_page(server, context(alice))["cacheScope"] == "private"
    StaticResource.objects.update(access="public", required_scopes="")
    assert list_page(server, context(alice))["cacheScope"] == "public"
    # A prefix that no protected row starts with keeps it public.
    StaticResource.objects.update(access="protected", required_scopes="x")
    assert list_page(server, context(alice), prefix="learn://s")["cacheScope"] == "public"


def test_every_page_of_a_listing_with_a_callers_inventory_is_private_and_uncached(settings, alice):
    """An inventory source (a model template, a list() callback) is private and uncached whatever it declares, and
    so is every page of a listing that includes one (seed 000), the pages that hold only the repository's entries
    too (the demo's last pages, the handbook's, said ``private, 60000``)."""
    configure(settings, PAGE_SIZE=2, PUBLIC_CACHE_TTL_MS=300_000)
    settings.SILENCED_SYSTEM_CHECKS = ["mcp_resources.E036"]  # served in spite of it: still private, uncached

    class Cacheable(GenericSource):
        items = [thing(f"{i}") for i in range(3)]

        def cache_control(self, request: HttpRequest) -> tuple[str, int]:
            return ("public", 60_000)

    pager = ScrollPager({SHARED: [(f"s{i}", f"S{i}") for i in range(5)]})
    repository = shelf(pager, shared=True, cache_control=lambda self, request: ("public", 45_000))
    Document.objects.bulk_create(Document(owner=alice, title=f"d{i}") for i in range(3))
    server = server_for(repository, PrivateDocuments, Cacheable)
    pages = walk(server, context(alice))
    assert [len(p["resources"]) for p in pages] == [2, 2, 2, 2, 2, 1]
    assert {p["cacheScope"] for p in pages} == {"private"}
    # The shelf's pages first, then the documents' and the callback's: every one private with a zero lifetime.
    assert [p["ttlMs"] for p in pages] == [0] * 6
    # The demo's order: the inventories first, the repository last (its last pages hold only its own entries).
    pages = walk(server_for(PrivateDocuments, Cacheable, repository), context(alice))
    assert uris(pages[-2:]) == [shelf_uri(f"s{i}") for i in range(2, 5)]  # the shelf's entries only
    assert [hint_of(p) for p in pages] == [("private", 0)] * 6
    # Without an inventory the repository's own lifetime applies again.
    assert {hint_of(p) for p in walk(server_for(repository), context(alice))} == {("public", 45_000)}


def test_model_inventories_stay_private_and_uncached_whatever_they_declare(settings, alice):
    configure(settings, PAGE_SIZE=1, PUBLIC_CACHE_TTL_MS=300_000)
    settings.SILENCED_SYSTEM_CHECKS = ["mcp_resources.E036"]  # served in spite of it: still private, uncached

    class PublicDocs(DocumentSource):
        def cache_control(self, request: HttpRequest) -> tuple[str, int]:
            return ("public", 600_000)

    Document.objects.bulk_create(Document(owner=alice, title=f"d{i}") for i in range(2))
    for version in (V2026_07_28,):
        pages = walk(server_for(PublicDocs), context(alice, version=version))
        assert [hint_of(p) for p in pages] == [("private", 0), ("private", 0)]


def test_an_anonymous_static_listing_keeps_public_cache_ttl(settings):
    configure(settings, PAGE_SIZE=10, PUBLIC_CACHE_TTL_MS=30_000)
    server = server_for(Undeclared)
    assert hint_of(list_page(server, anonymous())) == ("public", 30_000)  # an empty listing
    server.registry.register_resource("learn://a", "a", lambda: "a", cache_control=("public", 5_000))
    assert hint_of(list_page(server, anonymous())) == ("public", 5_000)
    server.registry.register_resource("learn://b", "b", lambda: "b", cache_control=("private", 90_000))
    assert hint_of(list_page(server, anonymous())) == ("private", 5_000)


def test_the_byte_bound_counts_the_longest_lifetime(settings, alice):
    """The page is measured with the widest ttlMs it could carry, so a long declared lifetime never pushes a
    page past MAX_RESPONSE_BYTES."""
    pager = ScrollPager({str(alice.pk): [(f"s{i}", "n" * 300) for i in range(6)]}, batch=6)
    server = server_for(shelf(pager, cache_control=lambda self, request: ("private", MAX_TTL_MS)))
    configure(settings, MAX_RESPONSE_BYTES=1500)
    import json

    for page in walk(server, context(alice)):
        assert page["ttlMs"] == MAX_TTL_MS
        assert len(json.dumps({"jsonrpc": "2.0", "id": "x" * 64, "result": page})) <= 1500


def test_a_model_template_without_a_hint_keeps_the_listing_private(settings, alice):
    configure(settings, PAGE_SIZE=5)

    class Plain(ModelResourceTemplate):
        model = Document
        name = "plain-docs"
        uri_template = "learn://plain-docs/{id}"
        required_scopes = ("documents:read",)
        owner_field = "owner"

    Document.objects.create(owner=alice, title="x")
    assert hint_of(list_page(server_for(Plain), context(alice))) == ("private", 0)


def test_the_demos_listing_is_private_and_uncached_to_its_last_page(settings, alice):
    """The demo (its own registry): alice's documents, then the handbook's pages, which end the listing alone. Every
    page is private with a zero lifetime (its last pages said ``private, 60000``); a read of a handbook page, the
    same for every reader, stays public for a minute."""
    from mcp_resources.registries import registry
    from mcp_resources.server import MCPServer

    configure(settings, PAGE_SIZE=2)
    Document.objects.bulk_create(Document(owner=alice, title=f"d{i}") for i in range(3))
    pages = walk(MCPServer(registry), context(alice))
    assert uris(pages[-1:])
    assert all(uri.startswith("handbook://") for uri in uris(pages[-1:]))
    assert {hint_of(p) for p in pages} == {("private", 0)}
    handbook = MCPServer(registry).call("resources/read", {"uri": uris(pages[-1:])[0]}, context(alice))
    assert hint_of(handbook) == ("public", 60_000)
