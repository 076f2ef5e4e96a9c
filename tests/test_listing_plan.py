"""The two ways a model template's page is read list the same pages: value rows and model instances.

A :class:`~mcp_resources.ModelResourceTemplate` with ``name_field`` and the base listing hooks is read from
``values_list()`` rows (:func:`mcp_resources.listing.plan.list_plan`); any other template is read as model
instances (loading only its ``list_fields`` when it declares them). The value-row plan is a speed-up, so the
architecture rules require a differential test: for every kind of template the plan serves, the same template
with the plan off (a subclass overriding ``get_resource_name`` with the base behaviour, so nothing but the path
changes) must list identical pages (resources, cursor positions, ``has_more``) across whole walks, page sizes,
prefixes and equal ordering values, on SQLite and on PostgreSQL.

Also here: the statement timeout a listing's query runs under on PostgreSQL (``mcp_resources/queries.py``), under both
parameter bindings.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.db.models import QuerySet
from django.http import HttpRequest
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from mcp_resources.listing.keyset import encode_key
from mcp_resources.listing.plan import NAME_MAX_LENGTH, list_plan
from mcp_resources.listing.sources import model_page
from mcp_resources.protocol.cursors import CursorCodec
from mcp_resources.resources import ModelResourceTemplate
from mcp_resources.server import MCPServer
from testproject.library.models import Document, Note
from tests.listing_support import (
    DeclaredDocumentSource,
    DocumentSource,
    NoteSource,
    assert_cut_by_the_deadline,
    assert_generic_internal_error,
    configure,
    context,
    expected_documents,
    expected_notes,
    list_page,
    server_for,
    uris,
    walk,
)
from tests.wire_support import wire_trace

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _unique_in_the_data(settings: Any) -> None:
    """``SlugDocuments`` and ``BodySlugs`` look records up by a title or body that is unique in these tests' data
    only, not declared unique: served with E023 silenced (what the check refuses is tested in
    tests/test_template_contract.py)."""
    settings.SILENCED_SYSTEM_CHECKS = ["mcp_resources.E023"]


T0 = timezone.now() - timedelta(days=30)
CURSOR_KEY = "the listing plan suite's cursor key"


# The templates the value-row plan serves, one of each kind -----------------------------------------------------


class FastDocuments(DocumentSource):
    """A timestamp keyset ``(created, id)``, the scope computed by ``get_queryset``."""

    name_field = "title"


class FastNotes(NoteSource):
    """A text keyset ``(title, id)`` in byte order, with equal titles."""

    name_field = "title"


class SlugDocuments(DocumentSource):
    """A string variable that needs percent-encoding, expanded from a row's value."""

    name = "slugs"
    uri_template = "learn://slugs/{title}"
    name_field = "title"


class TitledNotes(NoteSource):
    """Two variables: a prefix completes the first or ends inside it (pushed into the query, checked after)."""

    name = "titled"
    uri_template = "learn://titled/{title}/{id}"
    name_field = "title"


class PkDocuments(DocumentSource):
    """``pk`` as lookup and keyset, names of up to 512 characters (the longest allowed), no mime type."""

    name = "by-pk"
    uri_template = "learn://by-pk/{pk}"
    mime_type = None
    ordering = ("pk",)
    name_field = "body"


class BodySlugs(DocumentSource):
    """A URI made of a long text field: a long body makes a URI over 2,048 characters."""

    name = "body-slugs"
    uri_template = "learn://body-slugs/{body}"
    ordering = ("pk",)
    name_field = "title"


class CreatedDocuments(DocumentSource):
    """A name that is a timestamp: ``str()`` of what each path loads (psycopg's loader for rows on PostgreSQL)."""

    name = "created"
    uri_template = "learn://created/{id}"
    name_field = "created"


class DatedNotes(NoteSource):
    """``annotations.lastModified`` from ``modified_field`` and ``size`` from ``size_field``, in the page's columns."""

    name = "dated-notes"
    uri_template = "learn://dated-notes/{id}"
    name_field = "title"
    modified_field = "updated"
    size_field = "id"  # an integer column standing in for a size


class CreatedModified(DocumentSource):
    """The modification field is an ordering field too (one column for both)."""

    name = "created-modified"
    uri_template = "learn://created-modified/{id}"
    name_field = "title"
    modified_field = "created"


PLANNED: list[type[ModelResourceTemplate]] = [
    FastDocuments,
    FastNotes,
    SlugDocuments,
    TitledNotes,
    PkDocuments,
    CreatedDocuments,
    DeclaredDocumentSource,  # the scope declared with owner_field
    DatedNotes,
    CreatedModified,
]


def instances(template: type[ModelResourceTemplate], *, only: bool = False) -> type[ModelResourceTemplate]:
    """``template`` with the value-row plan off: ``get_resource_name`` is overridden with the very same behaviour
    (and, with ``only``, the instances load only the name field, as ``list_fields`` declares)."""

    def get_resource_name(self: ModelResourceTemplate, obj: Any) -> str:
        return template.get_resource_name(self, obj)

    attributes: dict[str, Any] = {"get_resource_name": get_resource_name, "__module__": __name__}
    if only:
        attributes["list_fields"] = (template.name_field,)
    return type(f"{template.__name__}{'Only' if only else 'Instances'}", (template,), attributes)


def variants(template: type[ModelResourceTemplate]) -> dict[str, type[ModelResourceTemplate]]:
    return {"rows": template, "instances": instances(template), "only": instances(template, only=True)}


# Data ------------------------------------------------------------------------------------------------------------

TITLES = [
    "a",
    "B",
    "b",
    "é",
    "e\u0301",
    "ü/é?",
    "a b",
    "a/b",
    "100%",
    "café",
    "cafe",
    "caf",
    "漢字",
    "😀",
    "~",
    "x" * 190,
]


def make_data(users: list[Any], *, same_time: bool) -> None:
    """For each user: documents with awkward titles (equal creation times when ``same_time``), long and short
    bodies, soft-deleted ones; notes with equal titles."""
    for u, user in enumerate(users):
        docs = Document.objects.bulk_create(
            Document(
                owner=user,
                title=f"{title} {user.username}" if u else title,
                body=("漢" * (NAME_MAX_LENGTH - len(user.username)) if i % 3 == 0 else f"body {i}") + user.username,
                created=T0 if same_time else T0 + timedelta(minutes=i % 5, microseconds=i * 7),
            )
            for i, title in enumerate(TITLES + [f"doc {i:02d}" for i in range(14)])
        )
        Document.objects.filter(pk__in=[d.pk for d in docs[::9]]).update(deleted_at=timezone.now())
        Note.objects.bulk_create(
            Note(owner=user, title=title, text="t") for title in [*TITLES, "same", "same", "same", "Same", "same"]
        )


@pytest.fixture
def keyed(settings: Any) -> CursorCodec:
    """Cursors sealed with a known key, so their positions can be compared."""
    configure(settings, CURSOR_KEYS=[CURSOR_KEY])
    return CursorCodec([CURSOR_KEY])


Shape = list[tuple[list[dict[str, Any]], Any]]


def shape(codec: CursorCodec, pages: list[dict[str, Any]]) -> Shape:
    """Each page's resources and the position its cursor holds (``None``: the last page)."""
    return [
        (page["resources"], codec.open(page["nextCursor"])["pos"] if "nextCursor" in page else None) for page in pages
    ]


def walks(
    codec: CursorCodec, template: type[ModelResourceTemplate], ctx: Any, prefix: str | None = None
) -> dict[str, Shape]:
    return {name: shape(codec, walk(server_for(t), ctx, prefix=prefix)) for name, t in variants(template).items()}


def assert_identical(results: dict[str, Shape]) -> Shape:
    reference = results.pop("rows")
    for name, result in results.items():
        assert result == reference, f"{name} differs from value rows"
    return reference


def prefixes_of(listed: list[str], template: type[ModelResourceTemplate]) -> list[str]:
    """Prefixes cut from what the template lists: its literal start, each URI shortened (inside variables and
    inside percent-escapes), whole URIs, and prefixes that name nothing."""
    start = template.uri_template.split("{", 1)[0]
    cuts = {"learn://", start, start[:-2], start + "zzz", "other://"}
    for uri in listed[:: max(1, len(listed) // 6)]:
        rest = uri[len(start) :]
        cuts.update({uri, uri[:-1], start + rest[: len(rest) // 2], start + rest[:1]})
    for uri in listed:
        escape = uri.find("%", len(start))
        if escape >= 0:
            cuts.update({uri[: escape + 1], uri[: escape + 3]})
    return sorted(cuts)


# The plan applies where it should ----------------------------------------------------------------------------


@pytest.mark.parametrize("template", PLANNED, ids=lambda t: t.__name__)
def test_the_plan_serves_these_templates_and_not_their_instance_twins(template):
    assert list_plan(template()) is not None
    assert list_plan(instances(template)()) is None
    assert list_plan(instances(template, only=True)()) is None


def test_the_plan_needs_a_name_field_the_base_hooks_and_plain_fields():
    class NoName(DocumentSource):
        pass  # the name is str(obj): an instance is needed

    class OwnUri(FastDocuments):
        def get_uri(self, obj: Any) -> str:
            return super().get_uri(obj)

    class OwnResource(FastDocuments):
        def get_resource(self, request: HttpRequest, obj: Any) -> dict[str, Any]:
            return super().get_resource(request, obj)

    class ByOwner(FastDocuments):
        uri_template = "learn://by-owner/{owner}/{id}"  # a relation: the hooks would see the related object

    class NamedByOwner(DocumentSource):
        name_field = "owner"

    for template in (NoName, OwnUri, OwnResource, ByOwner, NamedByOwner):
        assert list_plan(template()) is None, template


# Whole walks: resources, cursor positions, has_more -------------------------------------------------------------


@pytest.mark.parametrize("same_time", [False, True], ids=["times", "same-time"])
@pytest.mark.parametrize("page_size", [1, 7, 100])
@pytest.mark.parametrize("template", PLANNED, ids=lambda t: t.__name__)
def test_value_rows_and_instances_list_identical_pages(settings, keyed, alice, bob, template, page_size, same_time):
    configure(settings, PAGE_SIZE=page_size)
    make_data([alice, bob], same_time=same_time)
    for user in (alice, bob):
        pages = assert_identical(walks(keyed, template, context(user)))
        listed = [r["uri"] for resources, _ in pages for r in resources]
        assert len(listed) == len(set(listed)) > 10
        if page_size < 100:
            assert len(pages) > 1


@pytest.mark.parametrize("same_time", [False, True], ids=["times", "same-time"])
@pytest.mark.parametrize("template", PLANNED, ids=lambda t: t.__name__)
def test_value_rows_and_instances_list_identical_pages_under_prefixes(settings, keyed, alice, bob, template, same_time):
    configure(settings, PAGE_SIZE=3)
    make_data([alice, bob], same_time=same_time)
    ctx = context(alice)
    everything = [r["uri"] for resources, _ in assert_identical(walks(keyed, template, ctx)) for r in resources]
    matched = 0
    for prefix in prefixes_of(everything, template):
        pages = assert_identical(walks(keyed, template, ctx, prefix))
        listed = [r["uri"] for resources, _ in pages for r in resources]
        assert listed == [uri for uri in everything if uri.startswith(prefix)], prefix
        matched += bool(listed)
    assert matched > 5


@pytest.mark.parametrize("template", PLANNED, ids=lambda t: t.__name__)
def test_cursors_of_one_path_continue_on_the_other(settings, keyed, alice, template):
    """Both paths seal the same positions, and each reads the other's: a walk alternating between them is the
    same walk."""
    configure(settings, PAGE_SIZE=4)
    make_data([alice], same_time=True)
    ctx = context(alice)
    servers = [server_for(t) for t in variants(template).values()]
    reference = walk(servers[0], ctx)
    alternating, cursor = [], None
    for index in range(len(reference)):
        page = list_page(servers[index % len(servers)], ctx, cursor=cursor)
        alternating.append(page)
        cursor = page.get("nextCursor")
    assert cursor is None
    assert shape(keyed, alternating) == shape(keyed, reference)


# One source page: entries with their keys, has_more -------------------------------------------------------------


@pytest.mark.parametrize("template", PLANNED, ids=lambda t: t.__name__)
def test_model_pages_are_identical_from_every_position(alice, bob, template):
    """``model_page`` itself, from every listed position (as the traversal passes it within a page, and as a
    cursor holds it), with small limits and with prefixes: the same ``(key, resource)`` entries and ``has_more``,
    including the skip marker of a batch the prefix filtered out entirely."""
    make_data([alice, bob], same_time=True)
    request = context(alice).request
    deadline = time.monotonic() + 60
    rows, twins = template(), [instances(template)(), instances(template, only=True)()]

    def pages(prefix: str, after: Any, limit: int) -> Any:
        page = model_page(rows, request, after=after, limit=limit, prefix=prefix, deadline=deadline)
        for twin in twins:
            assert model_page(twin, request, after=after, limit=limit, prefix=prefix, deadline=deadline) == page
        return page

    everything, has_more = pages("", None, 100)
    assert len(everything) > 10
    assert not has_more
    keys = [key for key, _ in everything]
    for limit in (1, 3):
        for key in [None, *keys]:
            entries, has_more = pages("", key, limit)
            if key is not None and limit == 1:
                assert pages("", encode_key(key), limit) == (entries, has_more)
    markers = 0
    for prefix in prefixes_of([resource["uri"] for _, resource in everything], template):
        for limit in (1, 3):
            for key in [None, *keys[::8]]:
                entries, has_more = pages(prefix, key, limit)
                markers += any(resource == {} for _, resource in entries)
    if template is TitledNotes:
        assert markers  # "café" and "cafe" both start with "caf", but only one URI with "caf%C3"


# Generated data --------------------------------------------------------------------------------------------------

generated_titles = st.lists(
    st.one_of(
        st.sampled_from(["same", "Same", "a", "é", "e\u0301", "漢字", "😀", "a/b", "%", "x" * 150]),
        st.text(st.characters(exclude_categories=("Cs", "Cc")), min_size=1, max_size=12),
    ),
    min_size=1,
    max_size=14,
)


@hypothesis_settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    titles=generated_titles,
    minutes=st.lists(st.integers(0, 3), min_size=14, max_size=14),
    page_size=st.integers(1, 5),
    cut=st.integers(0, 60),
    template=st.sampled_from([FastDocuments, FastNotes, TitledNotes, SlugDocuments]),
)
def test_generated_inventories_list_identically(settings, keyed, alice, titles, minutes, page_size, cut, template):
    configure(settings, PAGE_SIZE=page_size)
    with transaction.atomic():
        Document.objects.bulk_create(
            Document(owner=alice, title=t, created=T0 + timedelta(minutes=m))
            for t, m in zip(titles, minutes, strict=False)
        )
        Note.objects.bulk_create(Note(owner=alice, title=t) for t in titles)
        ctx = context(alice)
        everything = [r["uri"] for resources, _ in assert_identical(walks(keyed, template, ctx)) for r in resources]
        if template is not SlugDocuments:  # its URI is the title: equal titles share one URI
            assert len(everything) == len(titles)
        first = everything[cut % len(everything)]
        prefix = first[: len(template.uri_template.split("{", 1)[0]) + cut % 7]
        pages = assert_identical(walks(keyed, template, ctx, prefix))
        assert [r["uri"] for resources, _ in pages for r in resources] == [
            u for u in everything if u.startswith(prefix)
        ]
        transaction.set_rollback(True)


# What each path reads ------------------------------------------------------------------------------------------


class NamedDocuments(DocumentSource):
    name_field = "title"

    def get_resource_name(self, obj: Any) -> str:  # a different name: the hook is honoured, from instances
        return f"[{obj.title}]"


def test_an_overridden_hook_is_honoured(settings, alice):
    configure(settings, PAGE_SIZE=7)
    make_data([alice], same_time=False)
    ctx = context(alice)
    reference = [r for page in walk(server_for(FastDocuments), ctx) for r in page["resources"]]
    assert [r["uri"] for r in reference] == expected_documents(alice)
    named = [r for page in walk(server_for(NamedDocuments), ctx) for r in page["resources"]]
    assert named == [{**r, "name": f"[{r['name']}]"} for r in reference]


def test_value_rows_expand_uris_like_the_template(alice):
    make_data([alice], same_time=False)
    template = SlugDocuments()
    listed = uris(walk(server_for(SlugDocuments), context(alice)))
    live = Document.objects.filter(owner=alice, deleted_at__isnull=True)
    assert listed == [template.get_uri(d) for d in sorted(live, key=lambda d: (d.created, d.pk))]
    assert any("%" in uri for uri in listed)


def test_names_of_512_characters_are_listed_whole_on_both_paths(keyed, alice):
    make_data([alice], same_time=False)
    results = walks(keyed, PkDocuments, context(alice))
    names = [r["name"] for resources, _ in assert_identical(results) for r in resources]
    assert max(map(len, names)) == NAME_MAX_LENGTH


@pytest.mark.parametrize("variant", ["rows", "instances", "only"])
@pytest.mark.parametrize("what", ["name", "uri"])
def test_a_name_or_uri_over_its_limit_is_a_generic_error_and_a_log_line_on_both_paths(alice, caplog, variant, what):
    """Names used to be cut silently at 512 characters, and a URI over 2,048 was listed though no read accepts it."""
    for i in range(5):
        Document.objects.create(owner=alice, title=f"t{i}", body=f"b{i}" * 10)
    long = Document.objects.create(owner=alice, title="t", body="b" * (NAME_MAX_LENGTH + 1 if what == "name" else 2100))
    template = variants(PkDocuments if what == "name" else BodySlugs)[variant]
    with caplog.at_level("ERROR", logger="mcp_resources.listing"):
        assert_generic_internal_error(lambda: walk(server_for(template), context(alice)))
    assert f"the record at ({long.pk},) has a {what} of" in caplog.text
    long.delete()
    assert walk(server_for(template), context(alice))  # every other record fits


def test_value_rows_read_only_the_needed_columns(alice):
    make_data([alice], same_time=False)
    for template in (FastDocuments, instances(FastDocuments, only=True)):
        with CaptureQueriesContext(connection) as queries:
            list_page(server_for(template), context(alice))
        (page_sql,) = [q["sql"] for q in queries.captured_queries if "library_document" in q["sql"]]
        assert '"body"' not in page_sql
    with CaptureQueriesContext(connection) as queries:
        list_page(server_for(instances(FastDocuments)), context(alice))
    (page_sql,) = [q["sql"] for q in queries.captured_queries if "library_document" in q["sql"]]
    assert '"body"' in page_sql  # model instances load every field unless list_fields says otherwise


def test_row_keys_encode_like_positions():
    when = timezone.now()
    assert encode_key((when, 5)) == [when.isoformat(), 5]


def test_expected_inventories_match_the_helpers(alice):
    """The helpers of ``listing_support`` describe the same listings (guards the references used elsewhere)."""
    make_data([alice], same_time=True)
    assert uris(walk(server_for(FastDocuments), context(alice))) == expected_documents(alice)
    assert uris(walk(server_for(FastNotes), context(alice))) == expected_notes(alice)


# PostgreSQL: the statement timeout in autocommit mode and inside a transaction -------------------------------


class SlowFast(FastDocuments):
    def get_queryset(self, request: HttpRequest) -> QuerySet[Document]:
        return super().get_queryset(request).extra(where=["(SELECT 1 FROM pg_sleep(1)) = 1"])


pg_only = pytest.mark.skipif(connection.vendor != "postgresql", reason="statement timeouts are a PostgreSQL feature")


def show_statement_timeout() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        value: str = cursor.fetchone()[0]
        return value


def small_inventory(owner: Any) -> None:
    Document.objects.bulk_create(Document(owner=owner, title=f"t{i}", created=T0) for i in range(3))


@pg_only
@pytest.mark.django_db(transaction=True)
def test_autocommit_statement_timeout_cancels_and_does_not_linger(settings, binding, alice):
    small_inventory(alice)
    assert connection.get_autocommit()
    assert not connection.in_atomic_block
    configure(settings, LIST_DEADLINE_SECONDS=0.2)
    assert_cut_by_the_deadline(lambda: list_page(server_for(SlowFast), context(alice)))
    assert show_statement_timeout() == "0"


@pg_only
@pytest.mark.django_db(transaction=True)
def test_inside_a_transaction_the_timeout_cancels_and_the_previous_one_is_restored(settings, binding, alice):
    small_inventory(alice)
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL statement_timeout = 7000")
        assert len(list_page(server_for(FastDocuments), context(alice))["resources"]) == 3
        assert show_statement_timeout() == "7s"
        configure(settings, LIST_DEADLINE_SECONDS=0.2)
        assert_cut_by_the_deadline(lambda: list_page(server_for(SlowFast), context(alice)))
        # The listing's savepoint rolled back: the transaction goes on, with its own timeout.
        assert Document.objects.filter(owner=alice).count() == 3
        assert show_statement_timeout() == "7s"
    assert show_statement_timeout() == "0"


@pg_only
@pytest.mark.django_db(transaction=True)
def test_the_timeout_travels_with_the_page_query(settings, binding, alice):
    """Client-side binding: the page query and its ``SET LOCAL`` are one message, one implicit transaction, no
    BEGIN or COMMIT. Server-side binding (several statements cannot share a message): ``set_config`` and the page
    query are one pipeline sync, one implicit transaction. Either way one round trip a query, nothing left behind."""
    small_inventory(alice)
    server: MCPServer = server_for(FastDocuments)
    for _ in range(2):  # under server-side binding psycopg prepares each statement from an early run
        list_page(server, context(alice))
    with wire_trace() as wire:
        page = list_page(server, context(alice))
    assert len(page["resources"]) == 3
    lines = wire.lines
    (page_at,) = [i for i, line in enumerate(lines) if "\tRowDescription\t" in line and '"created"' in line]
    if binding == "client":
        query = [line for line in lines[:page_at] if line.startswith("F\t") and "\tQuery\t" in line][-1]
        assert "library_document" in query
        assert '"SET LOCAL statement_timeout = ' in query
        assert not [line for line in lines if '"BEGIN"' in line or '"COMMIT"' in line]
        assert wire.round_trips == 2  # the static resources, then the page with its timeout
    else:
        # psycopg prepares repeated statements: the set_config shows in its answer, not in the sent text.
        previous = max(i for i, line in enumerate(lines[:page_at]) if "\tReadyForQuery\t" in line)
        assert any('"set_config"' in line for line in lines[previous:page_at])
        assert not [line for line in lines if '"BEGIN"' in line or '"COMMIT"' in line]
        assert wire.round_trips == 2  # the static resources, then the page with its timeout
    assert show_statement_timeout() == "0"
