"""Repository sources: listings whose pages come from an external pager with its own opaque continuation token.

Through the server core (``MCPServer.call``) with real registries, users and principals, in both protocol eras:
every page of a traversal that mixes static resources, model templates, a repository and a ``list()`` callback;
the token sealed and bound inside the cursor (another user's, tampered and replayed cursors); a token the pager
refuses and a pager that fails (a clean error, a log line, nothing of the backend in the answer); the prefix; the
page size and byte bounds cutting a batch; the contract checks; ``parse_uri`` and ``ResourceError``; the demo's
handbook. Contract: docs/pagination.md#repositories and docs/resources.md#repositories.
"""

from __future__ import annotations

import base64
import logging
import shutil
from typing import Any

import pytest
from django.db import transaction
from django.http import HttpRequest
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_resources.exceptions import INTERNAL_ERROR, INVALID_PARAMS, MCPError, PageTokenRejected
from mcp_resources.listing.pipeline import binding
from mcp_resources.protocol.cursors import MAX_TOKEN_BYTES, TokenPosition, make_cursor
from mcp_resources.protocol.versions import V2025_11_25, V2026_07_28
from mcp_resources.resources import RepositoryPage
from mcp_resources.server import default_server
from testproject.library.handbook import DirectoryPager
from testproject.library.mcp_resources import HandbookRepository
from testproject.library.models import Document
from tests.listing_support import (
    INVALID_CURSOR_DATA,
    DocumentSource,
    GenericSource,
    assert_generic_internal_error,
    assert_invalid_cursor,
    configure,
    context,
    expected_documents,
    list_page,
    rpc_error,
    server_for,
    source,
    thing,
    uris,
    walk,
)
from tests.repository_support import DatedShelf, ScrollPager, Shelf, shelf, shelf_uri

pytestmark = pytest.mark.django_db

ERAS = [V2026_07_28, V2025_11_25]


def items(count: int, tag: str = "") -> list[tuple[str, str]]:
    """``count`` entries in an order of the pager's own: slugs not increasing in any key order."""
    slugs = [f"{tag}{(i * 7919) % 1000:03d}-{i}" for i in range(count)]
    return [(slug, f"Item {slug}") for slug in slugs]


def make_documents(owner: Any, count: int) -> list[Document]:
    return Document.objects.bulk_create(Document(owner=owner, title=f"doc {i}", body=f"b{i}") for i in range(count))


class Things(GenericSource):
    items = [thing(f"{i:02d}") for i in range(5)]


# A mixed traversal ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ERAS)
@pytest.mark.parametrize("page_size", [1, 2, 3, 4, 7, 50])
def test_every_page_of_a_traversal_mixing_static_model_repository_and_callback_sources(
    settings, alice, bob, version, page_size
):
    configure(settings, PAGE_SIZE=page_size)
    pager = ScrollPager({str(alice.pk): items(8), str(bob.pk): items(4, "b")})
    server = server_for(DocumentSource, shelf(pager), Things)
    server.registry.register_resource("learn://about", "about", lambda: "about")
    make_documents(alice, 3)
    make_documents(bob, 2)

    pages = walk(server, context(alice, version=version))

    expected = (
        ["learn://about"]
        + expected_documents(alice)
        + [shelf_uri(slug) for slug, _ in items(8)]
        + [f"learn://things/{i:02d}" for i in range(5)]
    )
    assert uris(pages) == expected
    assert all(len(page["resources"]) <= page_size for page in pages)
    assert all(len(page["resources"]) == page_size for page in pages[:-1])
    # The pager's entries keep its order and its metadata; nothing of bob's appears.
    listed = [r for page in pages for r in page["resources"] if r["uri"].startswith("learn://shelf/")]
    assert listed[0] == {"uri": shelf_uri(items(8)[0][0]), "name": f"Item {items(8)[0][0]}"}
    stateless = version == V2026_07_28
    assert all(("cacheScope" in page) == stateless for page in pages)


def test_the_pager_gets_the_room_left_in_the_page_and_its_own_tokens_back(settings, alice):
    configure(settings, PAGE_SIZE=4)
    pager = ScrollPager({str(alice.pk): items(10)}, batch=3)
    server = server_for(shelf(pager))
    server.registry.register_resource("learn://about", "about", lambda: "about")

    pages = walk(server, context(alice))

    assert uris(pages) == ["learn://about"] + [shelf_uri(slug) for slug, _ in items(10)]
    owner = str(alice.pk)
    # Page 1: the static resource, then room for 3 (one batch); page 2: 4 (a batch of 3, then 1 of the next batch,
    # which the pager cut at the room left); each later call carries the token the pager handed out before.
    assert [(o, max_results) for o, _, max_results in pager.calls][:3] == [(owner, 3), (owner, 4), (owner, 1)]
    assert pager.calls[0][1] is None
    assert all(isinstance(token, bytes) for _, token, _ in pager.calls[1:])


def test_text_tokens_come_back_as_text_and_bytes_as_bytes(settings, alice):
    configure(settings, PAGE_SIZE=2)
    for str_tokens in (True, False):
        pager = ScrollPager({str(alice.pk): items(5)}, batch=2, str_tokens=str_tokens)
        pages = walk(server_for(shelf(pager)), context(alice))
        assert uris(pages) == [shelf_uri(slug) for slug, _ in items(5)]
        kinds = {type(token) for _, token, _ in pager.calls[1:]}
        assert kinds == ({str} if str_tokens else {bytes})


def test_a_pager_that_ignores_the_limit_is_cut_and_resumed_without_a_gap_or_a_repeat(settings, alice):
    configure(settings, PAGE_SIZE=2)
    pager = ScrollPager({str(alice.pk): items(11)}, batch=5, honours_limit=False)
    pages = walk(server_for(shelf(pager)), context(alice))
    assert uris(pages) == [shelf_uri(slug) for slug, _ in items(11)]
    assert [len(p["resources"]) for p in pages] == [2, 2, 2, 2, 2, 1]


def test_a_batch_that_shifted_resumes_after_the_last_listed_uri(settings, alice):
    """The pager's batch for a token changed between two pages (an entry inserted before the cut): the next page
    continues after the last URI the client saw, not after a count that would now repeat it."""
    configure(settings, PAGE_SIZE=2)
    owner = str(alice.pk)
    rows = items(5)
    pager = ScrollPager({owner: list(rows)}, batch=10, honours_limit=False)  # one batch: every page asks for it
    server = server_for(shelf(pager))
    first = list_page(server, context(alice))
    assert uris([first]) == [shelf_uri(slug) for slug, _ in rows[:2]]
    pager.items[owner].insert(0, ("new-first", "Inserted"))
    second = list_page(server, context(alice), cursor=first["nextCursor"])
    assert uris([second]) == [shelf_uri(slug) for slug, _ in rows[2:4]]
    # A removed entry: the count no longer finds it at its place, the URI still does.
    pager.items[owner].remove(rows[0])
    pager.items[owner].remove(("new-first", "Inserted"))
    third = list_page(server, context(alice), cursor=second["nextCursor"])
    assert uris([third]) == [shelf_uri(rows[4][0])]


def test_empty_batches_with_a_token_are_passed_through(settings, alice):
    class Sparse(Shelf):
        name = "sparse"
        uri_template = "learn://sparse/{n}"

        def list_page(self, request: HttpRequest, *, token: Any, limit: int, prefix: str, deadline: float) -> Any:
            step = int(token or "0")
            resources = [{"uri": f"learn://sparse/{step}", "name": f"at {step}"}] if step % 3 == 2 else []
            return resources, (str(step + 1) if step < 8 else None)

    configure(settings, PAGE_SIZE=2)
    pages = walk(server_for(Sparse), context(alice))
    assert uris(pages) == ["learn://sparse/2", "learn://sparse/5", "learn://sparse/8"]


# The token inside the cursor --------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ERAS)
def test_the_token_travels_sealed_and_bound_to_the_caller(settings, alice, bob, version):
    configure(settings, PAGE_SIZE=2)
    pager = ScrollPager({str(alice.pk): items(6), str(bob.pk): items(6, "b")}, str_tokens=True)
    server = server_for(shelf(pager))
    page = list_page(server, context(alice, version=version))
    cursor = page["nextCursor"]
    (token,) = pager.tokens
    # Sealed: neither the token nor its base64 is in the cursor, encoded or decoded.
    raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    assert token not in cursor
    assert token.encode() not in raw
    # Another user's cursor, a tampered one, another prefix, and the other method's: the one generic error.
    assert_invalid_cursor(lambda: list_page(server, context(bob, version=version), cursor=cursor))
    tampered = cursor[:-3] + ("A" if cursor[-3] != "A" else "B") + cursor[-2:]
    assert_invalid_cursor(lambda: list_page(server, context(alice, version=version), cursor=tampered))
    assert_invalid_cursor(lambda: list_page(server, context(alice, version=version), cursor=cursor, prefix="learn://"))
    assert_invalid_cursor(
        lambda: server.call("resources/templates/list", {"cursor": cursor}, context(alice, version=version))
    )
    # Other scopes (a refreshed token) cannot continue either.
    assert_invalid_cursor(
        lambda: list_page(server, context(alice, scopes=("documents:read", "x"), version=version), cursor=cursor)
    )
    # A replay returns the live page at that position again; the pager never saw bob's or the tampered requests.
    again = list_page(server, context(alice, version=version), cursor=cursor)
    assert uris([again]) == uris([list_page(server, context(alice, version=version), cursor=cursor)])
    assert uris([again]) == [shelf_uri(slug) for slug, _ in items(6)[2:4]]
    assert str(bob.pk) not in {owner for owner, _, _ in pager.calls}


def test_a_minted_position_cannot_reach_another_owners_batches(settings, alice, bob):
    """A cursor sealed with the server's own key for alice, holding a token the pager issued to bob: the pager
    refuses it (its tokens are its own decision), and the client gets the generic invalid cursor."""
    configure(settings, PAGE_SIZE=2)
    pager = ScrollPager({str(alice.pk): items(6), str(bob.pk): items(6, "b")})
    server = server_for(shelf(pager))
    bobs = list_page(server, context(bob))
    assert bobs["nextCursor"]
    (bobs_token,) = pager.tokens
    bound = binding("resources/list", context(alice).principal, "", server.registry.templates)
    import time

    minted = make_cursor(server.codec, bound, ["shelf", TokenPosition(bobs_token).to_json()], time.time())
    assert_invalid_cursor(lambda: list_page(server, context(alice), cursor=minted))


@pytest.mark.parametrize("version", ERAS)
def test_a_token_the_pager_refuses_is_an_invalid_cursor_and_a_log_line(settings, alice, caplog, version):
    configure(settings, PAGE_SIZE=2)
    pager = ScrollPager({str(alice.pk): items(6)})
    server = server_for(shelf(pager))
    cursor = list_page(server, context(alice, version=version))["nextCursor"]
    pager.expire_all()
    with caplog.at_level(logging.WARNING, logger="mcp_resources.listing"):
        error = rpc_error(lambda: list_page(server, context(alice, version=version), cursor=cursor))
    assert (error.code, error.message, error.data) == (INVALID_PARAMS, "Invalid cursor", INVALID_CURSOR_DATA)
    assert "shelf-backend" not in str(error.to_error())
    assert any(
        "shelf refused its page token" in r.getMessage() and "shelf-backend" in r.getMessage() for r in caplog.records
    )
    # Listing again without a cursor works.
    assert uris(walk(server, context(alice, version=version))) == [shelf_uri(slug) for slug, _ in items(6)]


@pytest.mark.parametrize("version", ERAS)
def test_an_upstream_failure_is_a_generic_error_with_the_detail_in_the_log(settings, alice, caplog, version):
    configure(settings, PAGE_SIZE=2)
    pager = ScrollPager({str(alice.pk): items(6)})
    server = server_for(shelf(pager))
    cursor = list_page(server, context(alice, version=version))["nextCursor"]
    pager.down = True
    with caplog.at_level(logging.ERROR, logger="mcp_resources.listing"):
        for params in ({}, {"cursor": cursor}):
            error = rpc_error(lambda params=params: list_page(server, context(alice, version=version), **params))
            assert (error.code, error.message, error.data) == (INTERNAL_ERROR, "Internal error", None)
            assert "secret-cluster" not in str(error.to_error())
    logged = [r for r in caplog.records if "the pager of shelf failed" in r.getMessage()]
    assert len(logged) == 2
    assert "secret-cluster-7" in logged[0].getMessage()


# Prefix and bounds --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ERAS)
def test_prefix_filters_repository_entries_and_binds_the_cursor(settings, alice, version):
    configure(settings, PAGE_SIZE=2)
    rows = items(12)
    pager = ScrollPager({str(alice.pk): rows}, batch=4)
    server = server_for(DocumentSource, shelf(pager))
    make_documents(alice, 2)
    prefix = "learn://shelf/"
    wanted = [shelf_uri(slug) for slug, _ in rows if shelf_uri(slug).startswith(prefix + "0")]
    assert 0 < len(wanted) < len(rows)
    pages = walk(server, context(alice, version=version), prefix=prefix + "0")
    assert uris(pages) == wanted
    # The pager is told the prefix, and a template that cannot hold it is not asked at all.
    assert pager.calls
    assert all(owner == str(alice.pk) for owner, _, _ in pager.calls)
    pager.calls.clear()
    assert uris(walk(server, context(alice, version=version), prefix="learn://documents/")) == expected_documents(alice)
    assert pager.calls == []


@pytest.mark.parametrize("version", ERAS)
def test_the_byte_bound_cuts_inside_a_batch_and_the_next_page_resumes_there(settings, alice, version):
    rows = [(f"s{i}", "n" * 300 + str(i)) for i in range(9)]
    pager = ScrollPager({str(alice.pk): rows}, batch=9)
    server = server_for(shelf(pager))
    configure(settings, PAGE_SIZE=50, MAX_RESPONSE_BYTES=2000)
    pages = walk(server, context(alice, version=version))
    assert uris(pages) == [shelf_uri(slug) for slug, _ in rows]
    assert len(pages) > 2
    assert all(1 <= len(p["resources"]) < 9 for p in pages)
    import json

    assert all(len(json.dumps({"jsonrpc": "2.0", "id": 1, "result": p})) <= 2000 for p in pages)
    # One entry that cannot fit with its cursor: a generic error.
    configure(settings, MAX_RESPONSE_BYTES=600)
    assert_generic_internal_error(lambda: list_page(server, context(alice, version=version)))


def test_the_longest_token_fits_in_a_cursor_and_a_longer_one_is_refused(settings, alice, caplog):
    class Long(Shelf):
        name = "x" * 128
        uri_template = "learn://long/{n}"
        size: Any = MAX_TOKEN_BYTES

        def list_page(self, request: HttpRequest, *, token: Any, limit: int, prefix: str, deadline: float) -> Any:
            step = 0 if token is None else int(token[:1].hex(), 16) + 1
            token_out = bytes([step]) + b"\xff" * (self.size - 1)
            return [{"uri": f"learn://long/{step}", "name": "é" * 200}], (token_out if step < 3 else None)

    configure(settings, PAGE_SIZE=1)
    server = server_for(Long)
    pages = walk(server, context(alice))
    assert uris(pages) == [f"learn://long/{i}" for i in range(4)]
    assert all(len(p.get("nextCursor", "")) <= 4096 for p in pages)
    source(server, "x" * 128).size = MAX_TOKEN_BYTES + 1
    with caplog.at_level(logging.ERROR, logger="mcp_resources.listing"):
        assert_generic_internal_error(lambda: list_page(server, context(alice)))
    assert any(f"at most {MAX_TOKEN_BYTES}" in r.getMessage() for r in caplog.records)


# The contract --------------------------------------------------------------------------------------------------------


class Contract(Shelf):
    """A repository returning exactly ``answer`` for the first batch (``token=None``)."""

    name = "contract"
    uri_template = "learn://contract/{slug}"
    answer: Any = None

    def list_page(self, request: HttpRequest, *, token: Any, limit: int, prefix: str, deadline: float) -> Any:
        if token is not None:
            return [], None
        return self.answer


def resource(slug: str, **extra: Any) -> dict[str, Any]:
    return {"uri": f"learn://contract/{slug}", "name": slug, **extra}


@pytest.mark.parametrize(
    ("answer", "logged"),
    [
        ([resource("a")], "must return (resources, next_token)"),
        (("nope", None), "resources must be a sequence"),
        (([resource("a")], 12), "next_token must be None, a str or bytes"),
        (([resource("a")], "é" * 513), "next_token of 1026 bytes"),
        (([resource("a"), resource("a")], None), "repeated"),
        (([{"uri": "learn://contract/a"}], None), "name missing"),
        (([resource("a", name="n" * 513)], None), "name missing or over 512"),
        (([resource("a", _meta={})], None), "a resource must be a dict of"),
        (([{"uri": "learn://elsewhere/a", "name": "a"}], None), "is not a URI of learn://contract/{slug}"),
        (([{"uri": "learn://contract/%61", "name": "a"}], None), "in the one spelling it reads"),
        (([resource("a", mimeType="m" * 129)], None), "mimeType of"),
        (([resource("a", size=-1)], None), "size must be"),
        (([resource("a", annotations={"priority": 2})], None), "priority"),
        (([resource("a", annotations={"lastModified": "yesterday"})], None), "lastModified"),
        (([resource("a", icons=[{"src": "http://plain.example/i.png"}])], None), "https"),
    ],
)
def test_what_breaks_the_contract_is_a_generic_error_and_a_log_line(settings, alice, caplog, answer, logged):
    server = server_for(type("Broken", (Contract,), {"answer": answer}))
    with caplog.at_level(logging.ERROR, logger="mcp_resources.listing"):
        assert_generic_internal_error(lambda: list_page(server, context(alice)))
    assert any(logged in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]


def test_a_token_that_never_changes_is_refused_rather_than_looped_on(settings, alice, caplog):
    class Stuck(Contract):
        def list_page(self, request: HttpRequest, *, token: Any, limit: int, prefix: str, deadline: float) -> Any:
            return [], "same"

    with caplog.at_level(logging.ERROR, logger="mcp_resources.listing"):
        assert_generic_internal_error(lambda: list_page(server_for(Stuck), context(alice)))
    assert any("the token it was given" in r.getMessage() for r in caplog.records)


def test_refusing_the_first_batch_is_a_contract_error_not_an_invalid_cursor(settings, alice):
    class Refuses(Contract):
        def list_page(self, request: HttpRequest, *, token: Any, limit: int, prefix: str, deadline: float) -> Any:
            raise PageTokenRejected("no")

    assert_generic_internal_error(lambda: list_page(server_for(Refuses), context(alice)))


def test_a_repeated_uri_across_batches_of_one_page_is_refused(settings, alice):
    class Repeats(Contract):
        def list_page(self, request: HttpRequest, *, token: Any, limit: int, prefix: str, deadline: float) -> Any:
            return [resource("a")], (None if token else "again")

    assert_generic_internal_error(lambda: list_page(server_for(Repeats), context(alice)))


def test_metadata_is_checked_and_normalized(settings, alice):
    import datetime

    when = datetime.datetime(2025, 1, 12, 15, 0, 58, tzinfo=datetime.UTC)
    answer = (
        [
            resource(
                "a",
                title="A",
                description="about a",
                mimeType="text/plain",
                size=12,
                annotations={"audience": ["user"], "priority": 0.5, "lastModified": when},
                icons=[{"src": "https://example.com/a.png", "mimeType": "image/png", "sizes": ["48x48"]}],
            ),
            resource("b", title=None),
        ],
        None,
    )
    server = server_for(type("Described", (Contract,), {"answer": answer}))
    (first, second) = list_page(server, context(alice))["resources"]
    assert first["annotations"] == {"audience": ["user"], "priority": 0.5, "lastModified": "2025-01-12T15:00:58Z"}
    assert (first["size"], first["icons"][0]["sizes"]) == (12, ["48x48"])
    assert second == {"uri": "learn://contract/b", "name": "b"}


# Authorization ---------------------------------------------------------------------------------------------------


def test_a_repository_is_authorized_like_every_source(settings, alice):
    from mcp_resources.exceptions import AuthenticationRequired, InsufficientScope

    pager = ScrollPager({str(alice.pk): items(2)})
    server = server_for(shelf(pager))
    with pytest.raises(AuthenticationRequired):
        list_page(server, context(None))
    with pytest.raises(InsufficientScope):
        list_page(server, context(alice, scopes=("other",)))
    with pytest.raises(InsufficientScope):
        server.call("resources/read", {"uri": shelf_uri(items(2)[0][0])}, context(alice, scopes=("other",)))
    assert pager.calls == []


def test_reads_route_by_the_template_and_are_not_found_for_another_owner(settings, alice, bob):
    pager = ScrollPager({str(alice.pk): items(2)})
    server = server_for(shelf(pager))
    uri = shelf_uri(items(2)[0][0])
    result = server.call("resources/read", {"uri": uri}, context(alice))
    assert result["contents"] == [
        {"uri": uri, "mimeType": "text/plain", "text": f"Item {items(2)[0][0]} on {alice.pk}'s shelf"}
    ]
    refused = rpc_error(lambda: server.call("resources/read", {"uri": uri}, context(bob)))
    assert (refused.code, refused.message, refused.data) == (INVALID_PARAMS, "Resource not found", {"uri": uri})


@pytest.mark.parametrize("version", ERAS)
def test_parse_uri_and_resource_error_as_the_seed_describes(settings, alice, version):
    server = server_for(DatedShelf)
    ctx = context(alice, version=version)
    assert uris(walk(server, ctx)) == [
        "learn://dated/2024-01-05",
        "learn://dated/2024-01-06",
        "learn://dated/2024-02-29",
    ]
    read = server.call("resources/read", {"uri": "learn://dated/2024-02-29"}, ctx)
    assert read["contents"][0]["text"] == "report of 2024-02-29"
    # parse_uri refuses with a message for the client (ResourceError: -32603 with the message verbatim) ...
    refused = rpc_error(lambda: server.call("resources/read", {"uri": "learn://dated/2024-02-30"}, ctx))
    assert (refused.code, refused.message) == (INTERNAL_ERROR, "The day must be YYYY-MM-DD.")
    # ... and another spelling of a value it accepts is not its canonical URI: not found.
    other = rpc_error(lambda: server.call("resources/read", {"uri": "learn://dated/20240229"}, ctx))
    assert other.message == "Resource not found"
    assert other.code == (INVALID_PARAMS if version == V2026_07_28 else -32002)


# The demo's handbook ---------------------------------------------------------------------------------------------


def handbook_uris() -> list[str]:
    return [f"handbook://pages/{name.removesuffix('.md')}" for name in DirectoryPager().names()]


@pytest.mark.parametrize("version", ERAS)
def test_the_demo_lists_its_handbook_after_the_notes_through_the_pagers_token(settings, alice, version):
    configure(settings, PAGE_SIZE=3)
    make_documents(alice, 2)
    pages = walk(default_server, context(alice, version=version))
    listed = uris(pages)
    assert listed[-len(handbook_uris()) :] == handbook_uris()
    assert len(handbook_uris()) >= 10
    first = next(r for p in pages for r in p["resources"] if r["uri"].startswith("handbook://"))
    assert first["mimeType"] == "text/markdown"
    assert first["size"] > 0
    assert first["annotations"]["lastModified"].endswith("Z")
    read = default_server.call("resources/read", {"uri": "handbook://pages/welcome"}, context(alice, version=version))
    assert read["contents"][0]["text"].startswith("# Welcome")
    for missing in ("handbook://pages/nothing", "handbook://pages/..", "handbook://pages/welcome.md"):
        error = rpc_error(
            lambda missing=missing: default_server.call("resources/read", {"uri": missing}, context(alice))
        )
        assert error.message == "Resource not found"


def test_the_handbook_refuses_a_token_once_its_files_changed(settings, alice, tmp_path, monkeypatch):
    configure(settings, PAGE_SIZE=2)
    root = tmp_path / "handbook"
    shutil.copytree(DirectoryPager().root, root)
    monkeypatch.setattr(HandbookRepository, "pager", DirectoryPager(root, batch_size=5))
    server = server_for(HandbookRepository)
    first = list_page(server, context(alice))
    assert len(first["resources"]) == 2
    (root / "zz-added.md").write_text("# Added\n")
    assert_invalid_cursor(lambda: list_page(server, context(alice), cursor=first["nextCursor"]))
    walked = uris(walk(server, context(alice)))
    assert walked[-1] == "handbook://pages/zz-added"


def test_a_repository_page_is_a_repository_page(alice):
    """``RepositoryPage`` and the pair form are the same answer."""
    assert RepositoryPage([{"uri": "u", "name": "n"}]).next_token is None


# Generated traversals (the style of tests/test_scoping.py) -----------------------------------------------------------

slugs = st.lists(st.text("abcdefghij0123456789-", min_size=1, max_size=6), max_size=14, unique=True)
pager_shapes = st.tuples(st.integers(1, 5), st.booleans(), st.booleans())  # batch, honours the limit, text tokens
operations = st.one_of(
    st.tuples(st.just("walk"), st.sampled_from(["alice", "bob"]), st.integers(1, 5), st.sampled_from([None, 1500])),
    st.tuples(
        st.just("prefix"),
        st.sampled_from(["alice", "bob"]),
        st.integers(1, 4),
        st.sampled_from(["a-", "b-", "a-1", ""]),
    ),
    st.tuples(st.just("foreign"), st.sampled_from(["alice", "bob"]), st.integers(1, 3)),
    st.tuples(st.just("tamper"), st.sampled_from(["alice", "bob"]), st.integers(1, 3), st.integers(0, 10_000)),
    st.tuples(st.just("replay"), st.sampled_from(["alice", "bob"]), st.integers(1, 3)),
    st.tuples(st.just("expire"), st.sampled_from(["alice", "bob"]), st.integers(1, 3)),
    st.tuples(st.just("read"), st.sampled_from(["alice", "bob"]), st.integers(0, 30)),
)
B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


class RepositoryWorld:
    def __init__(self, users: dict[str, Any], shelves: dict[str, list[str]], shape: tuple[int, bool, bool]) -> None:
        self.users = users
        batch, honours, text = shape
        self.pager = ScrollPager(
            {
                str(users[name].pk): [(f"{name[0]}-{slug}", f"{name}'s {slug}") for slug in shelves[name]]
                for name in users
            },
            batch=batch,
            honours_limit=honours,
            str_tokens=text,
        )
        self.server = server_for(DocumentSource, shelf(self.pager), name="repository-scoping")
        self.server.registry.register_resource("learn://about", "about", lambda: "about")

    def own(self, name: str) -> list[str]:
        return [shelf_uri(slug) for slug, _ in self.pager.items[str(self.users[name].pk)]]

    def expected(self, name: str, prefix: str = "") -> list[str]:
        listing = ["learn://about", *expected_documents(self.users[name]), *self.own(name)]
        return [uri for uri in listing if uri.startswith(prefix)]

    def page(self, name: str, page_size: int, max_bytes: int | None = None, **params: Any) -> dict[str, Any]:
        values: dict[str, Any] = {"PAGE_SIZE": page_size}
        if max_bytes is not None:
            values["MAX_RESPONSE_BYTES"] = max_bytes
        with override_settings(MCP_RESOURCES=values):
            page = list_page(self.server, context(self.users[name]), **params)
        other = "bob" if name == "alice" else "alice"
        assert not set(uris([page])) & set(self.own(other)), "listed another user's shelf"
        assert page["cacheScope"] == "private"
        return page

    def walk(self, name: str, page_size: int, max_bytes: int | None = None, prefix: str = "") -> None:
        pages = [self.page(name, page_size, max_bytes, prefix=prefix or None)]
        while "nextCursor" in pages[-1]:
            pages.append(self.page(name, page_size, max_bytes, prefix=prefix or None, cursor=pages[-1]["nextCursor"]))
            assert len(pages) < 100
        assert uris(pages) == self.expected(name, prefix)

    def a_cursor(self, name: str, page_size: int) -> str | None:
        return self.page(name, page_size).get("nextCursor")

    def refused(self, name: str, page_size: int, cursor: str) -> None:
        with override_settings(MCP_RESOURCES={"PAGE_SIZE": page_size}):
            assert_invalid_cursor(lambda: list_page(self.server, context(self.users[name]), cursor=cursor))


def answer(call: Any) -> Any:
    """The result of ``call``, or the protocol error it raised."""
    try:
        return call()
    except MCPError as error:
        return error


def run(world: RepositoryWorld, op: tuple[Any, ...]) -> None:
    kind, name = op[0], op[1]
    other = "bob" if name == "alice" else "alice"
    if kind == "walk":
        world.walk(name, op[2], op[3])
    elif kind == "prefix":
        world.walk(name, op[2], prefix="learn://shelf/" + op[3])
    elif kind == "foreign":
        cursor = world.a_cursor(other, op[2])
        if cursor is not None:
            world.refused(name, op[2], cursor)
    elif kind == "tamper":
        cursor = world.a_cursor(name, op[2])
        if cursor is not None:
            i = op[3] % len(cursor)
            world.refused(name, op[2], cursor[:i] + B64[(B64.index(cursor[i]) + 1 + op[3] % 63) % 64] + cursor[i + 1 :])
    elif kind == "replay":
        cursor = world.a_cursor(name, op[2])
        if cursor is not None:
            first = world.page(name, op[2], cursor=cursor)
            assert uris([first]) == uris([world.page(name, op[2], cursor=cursor)])
    elif kind == "expire":
        page = world.page(name, op[2])
        cursor = page.get("nextCursor")
        if cursor is not None:
            world.pager.expire_all()
            params = {"cursor": cursor}
            with override_settings(MCP_RESOURCES={"PAGE_SIZE": op[2]}):
                outcome = answer(lambda: list_page(world.server, context(world.users[name]), **params))
            if isinstance(outcome, MCPError):
                # The page needed the pager's token: the one invalid cursor, whatever the pager said.
                assert (outcome.code, outcome.message, outcome.data) == (
                    INVALID_PARAMS,
                    "Invalid cursor",
                    INVALID_CURSOR_DATA,
                )
            else:  # the position was before the shelf's tokens were needed
                assert set(uris([outcome])) <= set(world.expected(name))
    elif kind == "read":
        targets = world.own(other)
        if targets:
            uri = targets[op[2] % len(targets)]
            error = rpc_error(lambda: world.server.call("resources/read", {"uri": uri}, context(world.users[name])))
            assert (error.code, error.message, error.data) == (INVALID_PARAMS, "Resource not found", {"uri": uri})
            own = world.server.call("resources/read", {"uri": uri}, context(world.users[other]))
            assert own["contents"][0]["uri"] == uri


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    shelf_a=slugs,
    shelf_b=slugs,
    docs=st.tuples(st.integers(0, 4), st.integers(0, 4)),
    shape=pager_shapes,
    ops=st.lists(operations, min_size=1, max_size=6),
)
def test_users_never_see_or_page_into_each_others_shelves(alice, bob, shelf_a, shelf_b, docs, shape, ops):
    with transaction.atomic():
        make_documents(alice, docs[0])
        make_documents(bob, docs[1])
        world = RepositoryWorld({"alice": alice, "bob": bob}, {"alice": shelf_a, "bob": shelf_b}, shape)
        for op in ops:
            run(world, op)
        for name in ("alice", "bob"):
            world.walk(name, 2)
        transaction.set_rollback(True)


# The traversal's give-back ---------------------------------------------------------------------------------------


def test_a_page_given_back_for_its_cursor_resumes_at_the_resource_given_back(rf):
    """Sources ``a`` (two entries), ``b`` (empty) and ``c`` (one entry) fill a page of three, ``d`` holds more; the
    cursor does not fit until two resources are given back, so the next position is before ``a``'s second entry (an
    empty source's batch once recorded a start of its own there, and the page resumed at ``b``, skipping it)."""
    import time

    from mcp_resources.listing.traversal import Traversal

    class Fixed:
        def __init__(self, name: str, keys: list[str]) -> None:
            self.name, self.keys = name, keys

        def page(self, request: Any, *, after: Any, limit: int, prefix: str, deadline: float, seen: set[str]) -> Any:
            rest = [k for k in self.keys if after is None or k > after]
            return [(k, {"uri": f"x://{self.name}/{k}", "name": k}) for k in rest[:limit]], len(rest) > limit

    sources = [Fixed("a", ["1", "2"]), Fixed("b", []), Fixed("c", ["1"]), Fixed("d", ["1"])]
    sizes = iter([10_000, 10_000, 0])  # the cursor fits once two resources are given back
    traversal = Traversal(
        rf.post("/mcp"),
        sources=sources,
        all_names=["a", "b", "c", "d"],
        prefix="",
        limit=3,
        max_bytes=10_000,
        base_bytes=0,
        deadline=time.monotonic() + 10,
        cursor_size=lambda position: next(sizes),
    )
    page = traversal.page(None)
    assert [r["uri"] for r in page.resources] == ["x://a/1"]
    assert page.next_position == ["a", "1"]
    assert page.phases == ["a"]
