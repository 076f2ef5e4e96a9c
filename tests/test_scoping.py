"""The security suite: two users, generated data and generated operations.

Hypothesis draws each user's documents and notes (counts, equal and unicode titles, equal creation times) and a
sequence of operations: full walks with any page size and prefix, reads of random records of either user, the
other user's cursors, tampered, truncated, extended and spliced cursors, cursors of another prefix or method,
expired and future-dated cursors, and replays. Invariants, checked after every operation:

- a user never lists, reads or pages into the other user's records;
- a full walk lists exactly the user's own records (and the shared static resources), each once, in order;
- every bad cursor gets the same -32602 "Invalid cursor";
- nothing raises anything but the expected protocol errors (so nothing could become an HTTP 500).

A second suite shares records through memberships (``owner_field = "project__members"`` and
``"project__team__memberships__user"``) among three users, and changes the memberships between the pages of
running traversals: each page is exactly the next records of the caller's scope as it is at that moment (a member
removed mid-traversal sees nothing more of that project, an added one sees its records after the position), no
record twice in a traversal, nothing outside the caller's memberships; reads follow the same scope.

Each example runs in a savepoint that is rolled back, so examples do not see each other's rows.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction
from django.http import HttpRequest
from django.test import override_settings
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_resources.exceptions import INVALID_PARAMS, AuthenticationRequired, InsufficientScope
from mcp_resources.listing.pipeline import binding
from mcp_resources.protocol.cursors import make_cursor
from mcp_resources.resources import ModelResourceTemplate
from mcp_resources.server import MCPServer
from testproject.library.models import Document, Membership, Note, Project, Team, Ticket
from tests.listing_support import (
    SCOPE,
    DeclaredDocumentSource,
    DocumentSource,
    MineSource,
    NoteSource,
    TeamTicketSource,
    TicketSource,
    assert_invalid_cursor,
    context,
    expected_documents,
    expected_notes,
    list_page,
    rpc_error,
    server_for,
    uris,
)

pytestmark = pytest.mark.django_db

T0 = timezone.now() - timedelta(days=3)
STATICS = ["learn://about", "learn://private-static"]
PREFIXES = [
    None,
    "",
    "learn://",
    "learn://documents/",
    "learn://documents/1",
    "learn://notes/",
    "learn://notes/2",
    "learn://mine/0000",
    "learn://about",
    "learn://nothing",
    "other://",
]


def make_server(documents: type[DocumentSource] = DocumentSource) -> MCPServer:
    server = server_for(documents, NoteSource, MineSource, name="scoping")
    server.registry.register_resource("learn://about", "about", lambda: "about this server")
    server.registry.register_resource(
        "learn://private-static", "private", lambda: "for members", access="protected", required_scopes=(SCOPE,)
    )
    return server


SERVER = make_server()
DECLARED_SERVER = make_server(DeclaredDocumentSource)  # documents scoped by owner_field, listed from value rows


def expected_inventory(user: Any, prefix: str | None = None) -> list[str]:
    ids = Document.objects.filter(owner=user, deleted_at__isnull=True).order_by("id").values_list("pk", flat=True)
    listing = STATICS + expected_documents(user) + expected_notes(user) + [f"learn://mine/{pk:012d}" for pk in ids]
    return [u for u in listing if u.startswith(prefix or "")]


def owned_uris(user: Any) -> set[str]:
    return set(expected_inventory(user)) - set(STATICS)


# Strategies ------------------------------------------------------------------------------------------------

titles = st.one_of(
    st.sampled_from(["same", "same", "Same", "a", "é", "e\u0301", "漢字", "😀", "a b", "a/b", "%", "100%", "x" * 60]),
    st.text(st.characters(exclude_categories=("Cs", "Cc")), min_size=1, max_size=24),
)
documents = st.lists(st.tuples(titles, st.integers(0, 4)), max_size=12)  # (title, minutes after T0): ties
notes = st.lists(titles, max_size=8)
who = st.sampled_from(["alice", "bob"])
page_sizes = st.integers(1, 6)
prefixes = st.sampled_from(PREFIXES)
listing_prefixes = st.sampled_from([None, "learn://", "learn://documents/", "learn://notes/", "learn://mine/"])

operations = st.one_of(
    st.tuples(st.just("walk"), who, page_sizes, prefixes),
    st.tuples(st.just("read"), who, who, st.integers(0, 40)),
    st.tuples(st.just("foreign-cursor"), who, page_sizes, prefixes),
    st.tuples(st.just("tamper"), who, page_sizes, st.integers(0, 10_000), st.integers(1, 63)),
    st.tuples(st.just("truncate"), who, page_sizes, st.integers(1, 10_000)),
    st.tuples(st.just("extend"), who, page_sizes, st.sampled_from(["A", "AA", "AAAA", "=", "==", " ", "\n", ".x"])),
    st.tuples(st.just("splice"), who, page_sizes, st.booleans(), st.integers(1, 10_000)),
    st.tuples(st.just("cross-prefix"), who, st.integers(1, 2), listing_prefixes, listing_prefixes),
    st.tuples(st.just("cross-method"), who, page_sizes),
    st.tuples(st.just("expired"), who, page_sizes, st.sampled_from([-16 * 60, -15 * 60 - 2, 60, 3600])),
    st.tuples(st.just("replay"), who, page_sizes, prefixes),
    st.tuples(st.just("delete"), who, st.integers(0, 40)),
)

B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


# The suite ---------------------------------------------------------------------------------------------------


class World:
    """Both users, their rows, and helpers that check every answer against the invariants."""

    def __init__(
        self,
        users: dict[str, Any],
        docs: dict[str, list[tuple[str, int]]],
        note_titles: dict[str, list[str]],
        server: MCPServer = SERVER,
    ) -> None:
        self.server = server
        self.users = users
        for name, user in self.users.items():
            Document.objects.bulk_create(
                Document(owner=user, title=title, body=f"{name}'s body {i}", created=T0 + timedelta(minutes=m))
                for i, (title, m) in enumerate(docs[name])
            )
            Note.objects.bulk_create(
                Note(owner=user, title=t, text=f"{name}'s note {i}") for i, t in enumerate(note_titles[name])
            )

    def other(self, name: str) -> str:
        return "bob" if name == "alice" else "alice"

    def ctx(self, name: str) -> Any:
        return context(self.users[name])

    def page(self, name: str, page_size: int, **params: Any) -> dict[str, Any]:
        with override_settings(MCP_RESOURCES={"PAGE_SIZE": page_size}):
            page = list_page(self.server, self.ctx(name), **params)
        self.check_page(name, page)
        return page

    def check_page(self, name: str, page: dict[str, Any]) -> None:
        foreign = owned_uris(self.users[self.other(name)])
        listed = uris([page])
        assert not foreign & set(listed), "listed another user's records"
        assert set(listed) <= owned_uris(self.users[name]) | set(STATICS)
        assert (page["cacheScope"], page["ttlMs"]) == ("private", 0)

    def walk(self, name: str, page_size: int, prefix: str | None) -> list[dict[str, Any]]:
        pages = [self.page(name, page_size, prefix=prefix)]
        while "nextCursor" in pages[-1]:
            pages.append(self.page(name, page_size, prefix=prefix, cursor=pages[-1]["nextCursor"]))
            assert len(pages) < 200
        listed = uris(pages)
        assert listed == expected_inventory(self.users[name], prefix)
        assert len(set(listed)) == len(listed)
        return pages

    def some_cursor(self, name: str, page_size: int, prefix: str | None = None) -> str | None:
        return self.page(name, page_size, prefix=prefix).get("nextCursor")

    def assert_refused(self, name: str, page_size: int, cursor: Any, prefix: str | None = None) -> None:
        with override_settings(MCP_RESOURCES={"PAGE_SIZE": page_size}):
            assert_invalid_cursor(lambda: list_page(self.server, self.ctx(name), cursor=cursor, prefix=prefix))

    def read(self, name: str, uri: str) -> dict[str, Any]:
        return self.server.call("resources/read", {"uri": uri}, self.ctx(name))


def run(world: World, op: tuple[Any, ...]) -> None:
    kind, name = op[0], op[1]
    if kind == "walk":
        world.walk(name, op[2], op[3])
    elif kind == "read":
        whose, index = op[2], op[3]
        targets = sorted(owned_uris(world.users[whose]))
        if not targets:
            return
        uri = targets[index % len(targets)]
        if whose == name:
            contents = world.read(name, uri)["contents"]
            assert contents[0]["uri"] == uri
            assert f"{name}'s" in contents[0]["text"]
        else:
            refused = rpc_error(lambda: world.read(name, uri))
            missing_uri = uri.rsplit("/", 1)[0] + "/999999999"
            missing = rpc_error(lambda: world.read(name, missing_uri))
            assert (
                (refused.code, refused.message)
                == (missing.code, missing.message)
                == (
                    INVALID_PARAMS,
                    "Resource not found",
                )
            )
            assert refused.data == {"uri": uri}
            assert missing.data == {"uri": missing_uri}
    elif kind == "foreign-cursor":
        cursor = world.some_cursor(world.other(name), op[2], op[3])
        if cursor is not None:
            world.assert_refused(name, op[2], cursor, op[3])
    elif kind == "tamper":
        cursor = world.some_cursor(name, op[2])
        if cursor is not None:
            i = op[3] % len(cursor)
            changed = B64[(B64.index(cursor[i]) + op[4]) % 64]
            world.assert_refused(name, op[2], cursor[:i] + changed + cursor[i + 1 :])
    elif kind == "truncate":
        cursor = world.some_cursor(name, op[2])
        if cursor is not None:
            world.assert_refused(name, op[2], cursor[: len(cursor) - 1 - op[3] % len(cursor)])
    elif kind == "extend":
        cursor = world.some_cursor(name, op[2])
        if cursor is not None:
            world.assert_refused(name, op[2], cursor + op[3])
            world.assert_refused(name, op[2], op[3] + cursor)
    elif kind == "splice":
        mine = world.walk(name, op[2], None)
        cursors = [p["nextCursor"] for p in mine if "nextCursor" in p]
        partner = world.some_cursor(world.other(name), op[2]) if op[3] else (cursors[-1] if cursors else None)
        if cursors and partner is not None and partner != cursors[0]:
            first = cursors[0]
            cut = 1 + op[4] % (min(len(first), len(partner)) - 1)
            for spliced in {first[:cut] + partner[cut:], partner[:cut] + first[cut:]} - {first, partner}:
                world.assert_refused(name, op[2], spliced)
    elif kind == "cross-prefix":
        cursor = world.some_cursor(name, op[2], op[3])
        if cursor is not None and (op[3] or "") != (op[4] or ""):
            world.assert_refused(name, op[2], cursor, op[4])
    elif kind == "cross-method":
        cursor = world.some_cursor(name, op[2])
        if cursor is not None:
            error = rpc_error(
                lambda: world.server.call("resources/templates/list", {"cursor": cursor}, world.ctx(name))
            )
            assert (error.code, error.message) == (INVALID_PARAMS, "Invalid cursor")
    elif kind == "expired":
        # A cursor sealed with the server's own key and binding, but for a traversal that began outside the window.
        bound = binding("resources/list", world.ctx(name).principal, "", world.server.registry.templates)
        cursor = make_cursor(world.server.codec, bound, ["documents", None], time.time() + op[3])
        world.assert_refused(name, op[2], cursor)
        # The same cursor minted for now is accepted: only the start time differs.
        fresh = make_cursor(world.server.codec, bound, ["documents", None], time.time())
        with override_settings(MCP_RESOURCES={"PAGE_SIZE": op[2]}):
            page = list_page(world.server, world.ctx(name), cursor=fresh)
        world.check_page(name, page)
    elif kind == "replay":
        cursor = world.some_cursor(name, op[2], op[3])
        if cursor is not None:
            first = world.page(name, op[2], cursor=cursor, prefix=op[3])
            again = world.page(name, op[2], cursor=cursor, prefix=op[3])
            assert uris([first]) == uris([again])
    elif kind == "delete":
        rows = list(Document.objects.filter(owner=world.users[name]).order_by("id"))
        if rows:
            rows[op[2] % len(rows)].delete()
    else:  # pragma: no cover
        raise AssertionError(kind)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
@given(
    docs_a=documents,
    docs_b=documents,
    notes_a=notes,
    notes_b=notes,
    ops=st.lists(operations, min_size=1, max_size=8),
    declared=st.booleans(),
)
def test_users_never_see_or_page_into_each_others_records(alice, bob, docs_a, docs_b, notes_a, notes_b, ops, declared):
    """The users persist across examples; each example's rows are rolled back."""
    with transaction.atomic():
        server = DECLARED_SERVER if declared else SERVER
        users = {"alice": alice, "bob": bob}
        world = World(users, {"alice": docs_a, "bob": docs_b}, {"alice": notes_a, "bob": notes_b}, server)
        for op in ops:
            run(world, op)
        # Whatever happened, each user's full walk is still exactly their own inventory.
        for name in ("alice", "bob"):
            world.walk(name, 3, None)
        transaction.set_rollback(True)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(page_size=page_sizes, docs=documents, cut=st.integers(0, 10_000), junk=st.text(max_size=40))
def test_every_mutation_of_a_real_cursor_is_refused_the_same_way(alice, bob, page_size, docs, cut, junk):
    with transaction.atomic():
        world = World({"alice": alice, "bob": bob}, {"alice": docs, "bob": []}, {"alice": ["n"] * 7, "bob": []})
        cursor = world.some_cursor("alice", page_size)
        assert cursor is not None
        i = cut % len(cursor)
        variants = {
            cursor[:i] + junk + cursor[i:],
            cursor[:i] + cursor[i + 1 :],
            cursor[:i] + junk + cursor[i + 1 :],
            cursor.upper(),
            cursor.lower(),
            cursor[::-1],
            cursor.replace("-", "+").replace("_", "/"),
        } - {cursor}
        for variant in variants:
            world.assert_refused("alice", page_size, variant)
            world.assert_refused("bob", page_size, variant)
        world.assert_refused("bob", page_size, cursor)
        # The original still works for its owner.
        assert world.page("alice", page_size, cursor=cursor)["resources"]
        transaction.set_rollback(True)


def test_anonymous_callers_and_unscoped_tokens_get_no_inventory(alice):
    """Outside hypothesis: the whole list needs a caller, and a caller without the scope sees no source."""
    user = alice
    Document.objects.create(owner=user, title="t")
    with pytest.raises(AuthenticationRequired):
        list_page(SERVER, context(None))
    with pytest.raises(InsufficientScope):
        list_page(SERVER, context(user, scopes=("profile",)))
    # resources/read checks access again: no scope, no read, even for the owner.
    with pytest.raises(InsufficientScope):
        SERVER.call(
            "resources/read", {"uri": f"learn://documents/{Document.objects.get().pk}"}, context(user, scopes=())
        )


# Memberships that change between pages ---------------------------------------------------------------------


class OrmTicketSource(TicketSource):
    """``TicketSource`` listed through the ORM: an overridden ``get_queryset`` keeps the declared scope but turns the
    compiled page query off."""

    name = "orm-tickets"
    uri_template = "learn://orm-tickets/{id}"

    def get_queryset(self, request: HttpRequest) -> Any:
        return super().get_queryset(request)


MEMBERSHIP_SOURCES: dict[str, type[ModelResourceTemplate]] = {
    "members": TicketSource,  # project__members, through the compiled page query
    "members-orm": OrmTicketSource,  # project__members, through the ORM
    "teams": TeamTicketSource,  # project__team__memberships__user: a user may hold several roles in a team
}
MEMBERSHIP_SERVERS = {kind: server_for(source, name=f"scoping-{kind}") for kind, source in MEMBERSHIP_SOURCES.items()}
PEOPLE = ("alice", "bob", "carol")
ROLES = ("member", "admin")

person = st.sampled_from(PEOPLE)
project_index = st.integers(0, 3)
membership_operations = st.one_of(
    st.tuples(st.just("page"), person, st.integers(1, 4)),
    st.tuples(st.just("page"), person, st.integers(1, 4)),
    st.tuples(st.just("join"), person, project_index, st.sampled_from(ROLES)),
    st.tuples(st.just("leave"), person, project_index),
    st.tuples(st.just("drop-role"), person, project_index, st.sampled_from(ROLES)),
    st.tuples(st.just("ticket"), project_index, st.integers(0, 4)),
    st.tuples(st.just("read"), person, st.integers(0, 60)),
)


class Shared:
    """Projects, their teams, tickets and memberships; the running traversal of each user; the scope recomputed
    from the rows in plain Python (not through the ORM's relation lookups) after every change."""

    def __init__(self, kind: str, users: dict[str, Any], tickets: list[int], members: set[tuple[str, int]]) -> None:
        self.kind = kind
        self.server = MEMBERSHIP_SERVERS[kind]
        self.template = MEMBERSHIP_SOURCES[kind]
        self.users = users
        self.teams = [Team.objects.create(name=f"team {i}") for i in range(4)]
        self.projects = [Project.objects.create(name=f"project {i}", team=self.teams[i]) for i in range(4)]
        self.cursors: dict[str, str | None] = dict.fromkeys(PEOPLE)
        self.positions: dict[str, tuple[Any, int] | None] = dict.fromkeys(PEOPLE)
        self.listed: dict[str, set[str]] = {name: set() for name in PEOPLE}
        self.left: dict[str, set[int]] = {name: set() for name in PEOPLE}  # projects left during the traversal
        for i, count in enumerate(tickets):
            for j in range(count):
                self.add_ticket(i, j % 3)
        for name, i in sorted(members):
            self.join(name, i, "member")

    def add_ticket(self, project: int, minutes: int) -> None:
        Ticket.objects.create(
            project=self.projects[project], title="t", body="b", created=T0 + timedelta(minutes=minutes)
        )

    def join(self, name: str, project: int, role: str) -> None:
        self.projects[project].members.add(self.users[name])
        Membership.objects.get_or_create(team=self.teams[project], user=self.users[name], role=role)
        self.left[name].discard(project)

    def leave(self, name: str, project: int) -> None:
        self.projects[project].members.remove(self.users[name])
        Membership.objects.filter(team=self.teams[project], user=self.users[name]).delete()
        self.left[name].add(project)

    def drop_role(self, name: str, project: int, role: str) -> None:
        Membership.objects.filter(team=self.teams[project], user=self.users[name], role=role).delete()
        if self.kind == "teams" and project not in self.projects_of(name):
            self.left[name].add(project)

    def projects_of(self, name: str) -> set[int]:
        """Indexes of the projects whose records ``name`` may see now."""
        user = self.users[name]
        if self.kind == "teams":
            teams = {m.team_id for m in Membership.objects.all() if m.user_id == user.pk}
            return {i for i, project in enumerate(self.projects) if project.team_id in teams}
        through = Project.members.through.objects.all()
        ids = {row.project_id for row in through if row.user_id == user.pk}
        return {i for i, project in enumerate(self.projects) if project.pk in ids}

    def scope(self, name: str) -> list[tuple[tuple[Any, int], str, int]]:
        """``(key, uri, project index)`` of every record ``name`` may see now, in the listing order."""
        visible = self.projects_of(name)
        index = {project.pk: i for i, project in enumerate(self.projects)}
        rows = [
            ((t.created, t.pk), self.template.uri_template.replace("{id}", str(t.pk)), index[t.project_id])
            for t in Ticket.objects.all()
            if index[t.project_id] in visible
        ]
        return sorted(rows)

    def page(self, name: str, page_size: int) -> None:
        """The next page of ``name``'s traversal (a new one after the last page): exactly the next records of the
        scope as it is now."""
        position, cursor = self.positions[name], self.cursors[name]
        if cursor is None:
            position = None
            self.listed[name] = set()
            self.left[name] = set()
        with override_settings(MCP_RESOURCES={"PAGE_SIZE": page_size}):
            page = list_page(self.server, context(self.users[name]), cursor=cursor)
        listed = uris([page])
        after = [row for row in self.scope(name) if position is None or row[0] > position]
        assert listed == [uri for _, uri, _ in after[:page_size]], "not the next records of the live scope"
        assert ("nextCursor" in page) == (len(after) > page_size)
        assert not self.listed[name] & set(listed), "a record listed twice in one traversal"
        projects = {row[2] for row in after[: len(listed)]}
        assert not projects & self.left[name], "a record of a project left during the traversal"
        assert projects <= self.projects_of(name), "a record outside the caller's memberships"
        self.listed[name] |= set(listed)
        self.cursors[name] = page.get("nextCursor")
        self.positions[name] = after[len(listed) - 1][0] if listed else position

    def read(self, name: str, index: int) -> None:
        tickets = list(Ticket.objects.order_by("pk"))
        if not tickets:
            return
        ticket = tickets[index % len(tickets)]
        uri = self.template.uri_template.replace("{id}", str(ticket.pk))
        visible = {uri for _, uri, _ in self.scope(name)}
        if uri in visible:
            assert self.server.call("resources/read", {"uri": uri}, context(self.users[name]))["contents"]
        else:
            refused = rpc_error(lambda: self.server.call("resources/read", {"uri": uri}, context(self.users[name])))
            assert (refused.code, refused.message) == (INVALID_PARAMS, "Resource not found")


def run_membership(world: Shared, op: tuple[Any, ...]) -> None:
    kind = op[0]
    if kind == "page":
        world.page(op[1], op[2])
    elif kind == "join":
        world.join(op[1], op[2], op[3])
    elif kind == "leave":
        world.leave(op[1], op[2])
    elif kind == "drop-role":
        world.drop_role(op[1], op[2], op[3])
    elif kind == "ticket":
        world.add_ticket(op[1], op[2])
    elif kind == "read":
        world.read(op[1], op[2])
    else:  # pragma: no cover
        raise AssertionError(kind)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
@given(
    kind=st.sampled_from(sorted(MEMBERSHIP_SOURCES)),
    tickets=st.lists(st.integers(0, 6), min_size=4, max_size=4),
    members=st.sets(st.tuples(person, project_index), max_size=8),
    ops=st.lists(membership_operations, min_size=1, max_size=14),
)
def test_membership_changes_between_pages_are_seen_by_the_next_page(alice, bob, kind, tickets, members, ops):
    with transaction.atomic():
        users = {"alice": alice, "bob": bob, "carol": get_user_model().objects.create_user("carol")}
        world = Shared(kind, users, tickets, members)
        for op in ops:
            run_membership(world, op)
        # Whatever happened, each user's traversals end, and a fresh one lists exactly their scope.
        for name in PEOPLE:
            while world.cursors[name] is not None:
                world.page(name, 3)
            world.page(name, 3)
            while world.cursors[name] is not None:
                world.page(name, 3)
            assert world.listed[name] == {uri for _, uri, _ in world.scope(name)}
        transaction.set_rollback(True)
