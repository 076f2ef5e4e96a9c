"""Traversals while records are inserted and deleted, on SQLite and PostgreSQL (committed data, no test transaction).

Pages query live records by keyset (never OFFSET, never a snapshot), so while alice walks her inventory:

- no URI is listed twice;
- every record that existed for the whole traversal is listed;
- no record appears in a page fetched after its deletion (or loss of access) committed;
- a record inserted behind the current position is not listed (keyset semantics), one inserted ahead is.

Mutations run between pages in the test's thread; on PostgreSQL also from a second thread with its own
connection, and from a writer that runs concurrently with the whole walk.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from mcp_resources.server import MCPServer
from testproject.library.models import Document, Note
from tests.listing_support import (
    DeclaredDocumentSource,
    DocumentSource,
    MineSource,
    NoteSource,
    configure,
    context,
    document_uri,
    list_page,
    note_uri,
    server_for,
    uris,
)

pytestmark = pytest.mark.django_db(transaction=True)

T0 = timezone.now() - timedelta(days=10)
postgres_only = pytest.mark.skipif(connection.vendor != "postgresql", reason="a second connection needs PostgreSQL")


def mine_uri(doc: Document | int) -> str:
    return f"learn://mine/{doc if isinstance(doc, int) else doc.pk:012d}"


def doc_uris(pk: int) -> set[str]:
    """Every URI under which a document is listed (the model source and the generic source)."""
    return {document_uri(pk), mine_uri(pk)}


class Scenario:
    """Alice's and bob's rows, and a record of what happened to alice's during the walk."""

    def __init__(
        self, alice: Any, bob: Any, docs: int = 30, notes: int = 16, documents: type[DocumentSource] = DocumentSource
    ) -> None:
        self.alice = alice
        self.bob = bob
        Document.objects.bulk_create(
            Document(owner=self.alice, title=f"d{i}", created=T0 + timedelta(hours=i)) for i in range(docs)
        )
        Document.objects.bulk_create(
            Document(owner=self.bob, title=f"b{i}", created=T0 + timedelta(hours=i)) for i in range(5)
        )
        # Equal titles: the (title, id) keyset must break the ties.
        Note.objects.bulk_create(Note(owner=self.alice, title=f"note {i // 3:02d}") for i in range(notes))
        self.original: set[str] = self.current_uris()
        self.removed_before_page: dict[str, int] = {}  # uri -> index of the first page fetched after its removal
        self.inserted_behind: set[str] = set()
        self.inserted_ahead: set[str] = set()
        self.server: MCPServer = server_for(documents, NoteSource, MineSource, name="concurrency")

    def current_uris(self) -> set[str]:
        docs = Document.objects.filter(owner=self.alice, deleted_at__isnull=True).values_list("pk", flat=True)
        notes = Note.objects.filter(owner=self.alice).values_list("pk", flat=True)
        return {u for pk in docs for u in doc_uris(pk)} | {note_uri(pk) for pk in notes}

    def walk(self, mutate: Callable[[int, list[str]], None]) -> list[list[str]]:
        pages: list[list[str]] = []
        cursor = None
        while True:
            page = list_page(self.server, context(self.alice), cursor=cursor)
            pages.append(uris([page]))
            cursor = page.get("nextCursor")
            if cursor is None:
                return pages
            mutate(len(pages), [u for p in pages for u in p])
            assert len(pages) < 500

    def check(self, pages: list[list[str]]) -> None:
        listed = [u for p in pages for u in p]
        assert len(listed) == len(set(listed)), "a URI was listed twice"
        stable = self.original - set(self.removed_before_page)
        assert stable <= set(listed), f"missed records that existed throughout: {sorted(stable - set(listed))}"
        for uri, first_page in self.removed_before_page.items():
            later = [u for p in pages[first_page:] for u in p]
            assert uri not in later, f"{uri} was listed after its removal committed"
        behind = sorted(self.inserted_behind & set(listed))
        assert not behind, f"records inserted behind the position were listed: {behind}"
        missed = self.inserted_ahead - set(self.removed_before_page) - set(listed)
        assert not missed, f"records inserted ahead of the position were missed: {sorted(missed)}"
        bob = Document.objects.filter(owner=self.bob).values_list("pk", flat=True)
        assert not {u for pk in bob for u in doc_uris(pk)} & set(listed), "listed a record of another user"

    def removed(self, uris_: set[str], next_page: int) -> None:
        for uri in uris_:
            self.removed_before_page.setdefault(uri, next_page)


def mutations(scenario: Scenario, step: int, seen: list[str]) -> None:
    """One round of committed changes between pages: inserts behind and ahead, deletions of unseen and seen rows."""
    alice = scenario.alice
    seen_set = set(seen)
    unseen_docs = sorted(
        pk
        for pk in Document.objects.filter(owner=alice, deleted_at__isnull=True).values_list("pk", flat=True)
        if document_uri(pk) in scenario.original and document_uri(pk) not in seen_set
    )
    in_documents = bool(unseen_docs) and not any(u.startswith(("learn://notes/", "learn://mine/")) for u in seen)
    if step > 12:
        return  # insertions ahead of the last source would make the walk endless at small page sizes
    # The document source is ordered by creation time: one row behind every position, one ahead of all.
    behind = Document.objects.create(owner=alice, title=f"behind {step}", created=T0 - timedelta(days=1 + step))
    ahead = Document.objects.create(owner=alice, title=f"ahead {step}", created=T0 + timedelta(days=30 + step))
    scenario.inserted_behind.add(document_uri(behind))
    if in_documents:
        scenario.inserted_ahead.add(document_uri(ahead))
    # The generic source (listed last) is ordered by id: both new rows are ahead of it while the walk goes on.
    scenario.inserted_ahead.update({mine_uri(behind), mine_uri(ahead)})
    if len(unseen_docs) >= 3:
        # Hard-delete one unseen record, soft-delete another, hand a third to bob (access revoked).
        gone, soft, moved = unseen_docs[-1], unseen_docs[len(unseen_docs) // 2], unseen_docs[0]
        Document.objects.filter(pk=gone).delete()
        Document.objects.filter(pk=soft).update(deleted_at=timezone.now())
        Document.objects.filter(pk=moved).update(owner=scenario.bob)
        scenario.removed(doc_uris(gone) | doc_uris(soft) | doc_uris(moved), step)
    seen_docs = [int(u.rsplit("/", 1)[1]) for u in seen if u.startswith("learn://documents/")]
    if seen_docs:
        # Deleting an already-listed record must not shift the rest (OFFSET paging would skip one).
        victim = seen_docs[step % len(seen_docs)]
        Document.objects.filter(pk=victim).delete()
        scenario.removed(doc_uris(victim), step)
    seen_notes = [int(u.rsplit("/", 1)[1]) for u in seen if u.startswith("learn://notes/")]
    if seen_notes:
        Note.objects.filter(pk=seen_notes[step % len(seen_notes)]).delete()
        scenario.removed({note_uri(seen_notes[step % len(seen_notes)])}, step)
    unseen_notes = [
        pk
        for pk in Note.objects.filter(owner=alice).values_list("pk", flat=True)
        if note_uri(pk) in scenario.original and note_uri(pk) not in seen_set
    ]
    if len(unseen_notes) > 2:
        Note.objects.filter(pk=max(unseen_notes)).delete()
        scenario.removed({note_uri(max(unseen_notes))}, step)
    # A title sorting before every earlier title ("!" < "n", and decreasing with each step) is behind the note
    # source's position once that source has started.
    early = Note.objects.create(owner=alice, title=f"!{999 - step:03d}")
    if any(u.startswith("learn://notes/") for u in seen):
        scenario.inserted_behind.add(note_uri(early))


@pytest.mark.parametrize("documents", [DocumentSource, DeclaredDocumentSource], ids=["computed", "declared"])
@pytest.mark.parametrize("page_size", [1, 4, 7])
def test_walk_with_inserts_and_deletes_between_pages(settings, alice, bob, page_size, documents):
    configure(settings, PAGE_SIZE=page_size)
    scenario = Scenario(alice, bob, documents=documents)
    pages = scenario.walk(lambda step, seen: mutations(scenario, step, seen))
    scenario.check(pages)
    assert len(pages) > 5


@postgres_only
@pytest.mark.parametrize("documents", [DocumentSource, DeclaredDocumentSource], ids=["computed", "declared"])
@pytest.mark.parametrize("page_size", [2, 5])
def test_walk_with_changes_committed_by_another_connection_between_pages(settings, alice, bob, page_size, documents):
    configure(settings, PAGE_SIZE=page_size)
    scenario = Scenario(alice, bob, documents=documents)
    main_connection = id(connection.connection)
    failures: list[BaseException] = []

    def in_other_thread(step: int, seen: list[str]) -> None:
        def work() -> None:
            try:
                mutations(scenario, step, seen)
                assert id(connection.connection) != main_connection  # really another connection
            except BaseException as exc:  # reported in the main thread
                failures.append(exc)
            finally:
                connection.close()

        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
        assert not failures, failures

    pages = scenario.walk(in_other_thread)
    scenario.check(pages)


@postgres_only
@pytest.mark.parametrize("documents", [DocumentSource, DeclaredDocumentSource], ids=["computed", "declared"])
def test_walk_while_a_concurrent_writer_inserts_and_deletes(settings, alice, bob, documents):
    """A writer commits inserts and deletions throughout the walk; each page is checked against commit times."""
    configure(settings, PAGE_SIZE=3)
    scenario = Scenario(alice, bob, docs=40, notes=20, documents=documents)
    volatile = Document.objects.bulk_create(
        Document(owner=scenario.alice, title=f"v{i}", created=T0 + timedelta(hours=i, minutes=30)) for i in range(40)
    )
    volatile_uris = {u for d in volatile for u in doc_uris(d.pk)}
    stable = scenario.current_uris() - volatile_uris
    deleted_at: dict[str, float] = {}  # uri -> monotonic time after its deletion committed
    inserted: set[str] = set()
    stop = threading.Event()
    failures: list[BaseException] = []

    def writer() -> None:
        try:
            pool = [d.pk for d in volatile]
            i = 0
            while not stop.is_set() and pool:
                pk = pool.pop((i * 7) % len(pool))
                Document.objects.filter(pk=pk).delete()  # autocommit: committed when it returns
                committed = time.monotonic()
                for uri in doc_uris(pk):
                    deleted_at[uri] = committed
                new = Document.objects.create(
                    owner=scenario.alice, title=f"w{i}", created=T0 + timedelta(hours=(i * 13) % 50, minutes=45)
                )
                inserted.update(doc_uris(new.pk))
                if i % 2:
                    pool.append(new.pk)
                i += 1
                time.sleep(0.001)
        except BaseException as exc:
            failures.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=writer)
    thread.start()
    pages: list[tuple[float, list[str]]] = []
    try:
        cursor = None
        while True:
            started = time.monotonic()
            page = list_page(scenario.server, context(scenario.alice), cursor=cursor)
            pages.append((started, uris([page])))
            cursor = page.get("nextCursor")
            if cursor is None:
                break
            time.sleep(0.002)
    finally:
        stop.set()
        thread.join()
    assert not failures, failures
    assert len(deleted_at) > 3, "the writer did not run alongside the walk"

    listed = [u for _, p in pages for u in p]
    assert len(listed) == len(set(listed)), "a URI was listed twice"
    assert stable <= set(listed), f"missed {sorted(stable - set(listed))}"
    assert set(listed) <= stable | volatile_uris | inserted
    for started, page_uris in pages:
        for uri in page_uris:
            assert not (uri in deleted_at and deleted_at[uri] < started), f"{uri} listed after its deletion"


def test_the_scenario_helpers_are_consistent(alice, bob):
    """The bookkeeping above must reflect the database: the initial inventory is what a walk lists untouched."""
    scenario = Scenario(alice, bob, docs=6, notes=4)
    pages = scenario.walk(lambda step, seen: None)
    assert {u for p in pages for u in p} == scenario.original
