"""End to end: subscriptions with the official MCP python SDK client against a live uvicorn server on Redis.

The server is ``demo_server`` (the demo project under uvicorn, ``testproject.asgi``) on this module's own
``demo_project``: ``MCP_REDIS_URL`` points at a Redis database of its own (``live.redis_database()``), so the
channel layer and the 2025-11-25 sessions live in Redis, and an admin superuser exists. Changes are made from
other processes, as in production: through the ORM in a ``manage.py shell -c`` subprocess with the same
environment, and through the Django admin over HTTP. Both eras are covered:

- 2026-07-28: ``client.listen(resource_subscriptions=[...], resources_list_changed=True)``;
- 2025-11-25: ``client.subscribe_resource(uri)`` in a session, notifications on its GET stream, delivered to the
  client's ``message_handler``.

Bob, listening both ways at once, never hears about alice's documents. Nothing waits for a notification that must
not arrive: a stream delivers its channel's messages in the order they were published, so once a marker published
after a change has arrived, anything the change caused has arrived before it. Without Redis on 127.0.0.1:6379 the
module is skipped, unless ``CI`` is set (then it fails).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from html.parser import HTMLParser
from typing import Any

import anyio
import httpx2
import mcp_types
import pytest
from anyio.abc import TaskGroup
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ResourcesListChanged, ResourceUpdated, Subscription

from tests import live

pytestmark = [
    pytest.mark.e2e,
    # The 2025-11-25 era is exercised on purpose: subscribe_resource/unsubscribe_resource warn that 2026-07-28
    # removed them.
    pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning"),
]

ADMIN_USER, ADMIN_PASSWORD = "e2e-admin", "e2e-admin-password-7Qx!"
WAIT = 20.0  # seconds to wait for a notification that must arrive

Event = tuple[str, str | None]  # ("updated", uri) or ("list_changed", None)
Docs = dict[str, list[int]]


def updated(uri: str) -> Event:
    return ("updated", uri)


LIST_CHANGED: Event = ("list_changed", None)


def doc_uri(pk: int) -> str:
    return f"learn://documents/{pk}"


# The server ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo_project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[live.Project]:
    """The demo project on this module's Redis database (channel layer and sessions), with an admin superuser;
    ``demo_server`` serves it."""
    with (
        live.redis_database() as redis_url,
        live.project(tmp_path_factory.mktemp("project"), redis_url=redis_url) as project,
    ):
        project.manage(
            *("createsuperuser", "--noinput", "--username", ADMIN_USER, "--email", "e2e-admin@example.com"),
            env={"DJANGO_SUPERUSER_PASSWORD": ADMIN_PASSWORD},
        )
        yield project


@pytest.fixture(scope="module")
def documents(demo_project: live.Project) -> dict[str, list[int]]:
    """The primary keys of alice's and bob's documents."""
    return demo_project.ids_by_user("Document")


@pytest.fixture(scope="module")
def server(demo_server: live.Server) -> Iterator[live.Server]:
    """``demo_server``, whose log must stay free of tracebacks."""
    demo_server.tokens("alice", "bob")
    yield demo_server
    demo_server.assert_log_clean()


async def shell(server: live.Server, code: str) -> None:
    """Run ``code`` in ``manage.py shell`` with the server's environment (its database and Redis)."""
    await anyio.to_thread.run_sync(server.project.shell, code)


# Changes: the ORM (another process) and the admin (over HTTP) -------------------------------------------


def orm_touch(pk: int) -> str:
    """Code for ``manage.py shell``: save document ``pk`` with a changed body (committed on return)."""
    return (
        "from testproject.library.models import Document\n"
        f"d = Document.objects.get(pk={pk})\n"
        "d.body += ' (changed through the ORM)'\n"
        "d.save()\n"
    )


def orm_add_static(uri: str) -> str:
    return (
        "from mcp_resources.models import StaticResource\n"
        f"StaticResource.objects.create(uri={uri!r}, name='added-from-the-shell', mime_type='text/plain', text='x')\n"
    )


class _FormParser(HTMLParser):
    """The successful controls of one ``<form id=...>``: inputs, checked boxes, textareas, selected options."""

    def __init__(self, form_id: str) -> None:
        super().__init__(convert_charrefs=True)
        self.form_id = form_id
        self.inside = False
        self.fields: dict[str, str] = {}
        self._textarea: str | None = None
        self._select: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {key: value or "" for key, value in attrs}
        if tag == "form":
            self.inside = a.get("id") == self.form_id
        if not self.inside or ("name" not in a and tag != "option"):
            return
        if tag == "input":
            kind = a.get("type", "text")
            if kind in ("submit", "button", "image", "file", "reset"):
                return
            if kind in ("checkbox", "radio"):
                if "checked" in a:
                    self.fields[a["name"]] = a.get("value") or "on"
                return
            self.fields[a["name"]] = a.get("value", "")
        elif tag == "textarea":
            self._textarea = a["name"]
            self.fields[a["name"]] = ""
        elif tag == "select":
            self._select = a["name"]
        elif tag == "option" and self._select is not None and "selected" in a:
            self.fields[self._select] = a.get("value", "")

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self.fields[self._textarea] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False
        elif tag == "textarea":
            self._textarea = None
        elif tag == "select":
            self._select = None


def _form(html: str, form_id: str) -> dict[str, str]:
    parser = _FormParser(form_id)
    parser.feed(html)
    assert "csrfmiddlewaretoken" in parser.fields, f"no form #{form_id} with a CSRF token in the page"
    # A textarea's first newline belongs to the markup, not to the value.
    return {key: value.removeprefix("\n") for key, value in parser.fields.items()}


@contextlib.asynccontextmanager
async def admin_browser(server: live.Server) -> AsyncIterator[httpx2.AsyncClient]:
    """An HTTP client signed in to the Django admin as the superuser (session and CSRF cookies)."""
    async with httpx2.AsyncClient(base_url=server.base, timeout=30.0, follow_redirects=False) as http:
        page = await http.get("/admin/login/")
        assert page.status_code == 200
        fields = _form(page.text, "login-form")
        fields.update(username=ADMIN_USER, password=ADMIN_PASSWORD, next="/admin/")
        signed_in = await http.post("/admin/login/", data=fields, headers={"Referer": f"{server.base}/admin/login/"})
        assert signed_in.status_code == 302, f"admin sign-in failed ({signed_in.status_code})"
        assert signed_in.headers["Location"] == "/admin/"
        yield http


async def _submit(
    http: httpx2.AsyncClient, server: live.Server, path: str, form_id: str, changes: dict[str, str]
) -> None:
    page = await http.get(path)
    assert page.status_code == 200, f"GET {path}: {page.status_code}"
    fields = _form(page.text, form_id)
    fields.update(changes, _save="Save")
    saved = await http.post(path, data=fields, headers={"Referer": f"{server.base}{path}"})
    # The admin redirects after a successful save; a 200 is the form again, with its errors.
    assert saved.status_code == 302, f"POST {path} was not saved ({saved.status_code}):\n{saved.text[:3000]}"


async def admin_touch(server: live.Server, pk: int) -> None:
    """Change document ``pk``'s body through the admin's change form."""
    path = f"/admin/library/document/{pk}/change/"
    async with admin_browser(server) as http:
        page = await http.get(path)
        body = _form(page.text, "document_form")["body"]
        await _submit(http, server, path, "document_form", {"body": body + " (changed in the admin)"})


async def admin_add_static(server: live.Server, uri: str) -> None:
    """Add a public static resource through the admin's add form."""
    async with admin_browser(server) as http:
        await _submit(
            http,
            server,
            "/admin/mcp_resources/staticresource/add/",
            "staticresource_form",
            {"uri": uri, "name": "added-in-the-admin", "mime_type": "text/plain", "text": "Added in the admin."},
        )


# Clients and what they hear ------------------------------------------------------------------------------


class Inbox:
    """What one client heard, as ``("updated", uri)`` / ``("list_changed", None)`` in arrival order."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.events: list[Event] = []
        self.other: list[Any] = []
        self.get_streams: list[int] = []  # statuses of the session's GET requests, as their responses start

    def count(self, event: Event) -> int:
        return self.events.count(event)

    async def on_response(self, response: httpx2.Response) -> None:
        if response.request.method == "GET":
            self.get_streams.append(response.status_code)

    async def stream_opened(self, timeout: float = WAIT) -> None:
        """Wait until the session's GET stream has answered 200.

        The SDK opens it in the background after ``initialize``. The server starts the response once the stream has
        joined its groups and re-read the session's subscriptions: from then on, every change reaches it.
        """
        with anyio.move_on_after(timeout):
            while 200 not in self.get_streams:
                await anyio.sleep(0.02)
        assert 200 in self.get_streams, f"{self.name}: no GET stream within {timeout}s ({self.get_streams})"

    async def wait_for(self, event: Event, count: int = 1, timeout: float = WAIT) -> None:
        with anyio.move_on_after(timeout):
            while self.count(event) < count:
                await anyio.sleep(0.05)
        assert self.count(event) >= count, (
            f"{self.name}: waited {timeout}s for {count} x {event}; heard {self.events} (other: {self.other})"
        )

    async def message_handler(self, message: Any) -> None:
        """The 2025-11-25 client's ``message_handler``: notifications of the session's GET stream."""
        if isinstance(message, mcp_types.ResourceUpdatedNotification):
            self.events.append(updated(message.params.uri))
        elif isinstance(message, mcp_types.ResourceListChangedNotification):
            self.events.append(LIST_CHANGED)
        else:
            self.other.append(message)

    async def pump(self, subscription: Subscription) -> None:
        """Move a listen stream's events into the inbox (runs as a task until cancelled or the stream ends)."""
        async for item in subscription:
            if isinstance(item, ResourceUpdated):
                self.events.append(updated(item.uri))
            elif isinstance(item, ResourcesListChanged):
                self.events.append(LIST_CHANGED)
            else:
                self.other.append(item)


@contextlib.asynccontextmanager
async def connect(server: live.Server, user: str, mode: str, inbox: Inbox | None = None) -> AsyncIterator[Client]:
    """The official client in ``mode`` with a token of ``user``; ``inbox`` hears a session's GET stream."""
    async with (
        httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {server.token(user)}"},
            timeout=httpx2.Timeout(30.0, read=300.0),
            follow_redirects=True,
            event_hooks={"response": [inbox.on_response]} if inbox is not None else {},
        ) as http,
        Client(
            streamable_http_client(server.url, http_client=http),
            mode=mode,
            message_handler=inbox.message_handler if inbox is not None else None,
        ) as client,
    ):
        yield client


def run(body: Callable[[TaskGroup], Awaitable[None]]) -> None:
    """Run ``body`` with a task group for the stream pumps, cancelled when the body ends; failures unwrapped."""

    async def main() -> None:
        try:
            async with anyio.create_task_group() as tasks:
                await body(tasks)
                tasks.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # The SDK's task groups and this one nest: report a single failure as itself.
            leaf: BaseException = group
            while isinstance(leaf, BaseExceptionGroup) and len(leaf.exceptions) == 1:
                leaf = leaf.exceptions[0]
            if leaf is group or isinstance(leaf, BaseExceptionGroup):
                raise
            raise leaf from None

    anyio.run(main)


async def touch(server: live.Server, *pks: int) -> None:
    """Save each document in another process (one commit each, in this order)."""
    await shell(server, "".join(orm_touch(pk) for pk in pks))


async def settle(server: live.Server, marker: int, *inboxes: Inbox) -> None:
    """Change document ``marker`` (subscribed by every inbox) and wait until each inbox heard it: whatever was
    published before has then arrived too."""
    await touch(server, marker)
    for inbox in inboxes:
        await inbox.wait_for(updated(doc_uri(marker)))


# Tests ---------------------------------------------------------------------------------------------------


def test_listen_acknowledges_only_what_the_caller_may_read(server: live.Server, documents: Docs) -> None:
    alice_doc, bob_doc = doc_uri(documents["alice"][0]), doc_uri(documents["bob"][0])

    async def body(tasks: TaskGroup) -> None:
        async with (
            connect(server, "alice", "2026-07-28") as alice,
            alice.listen(resource_subscriptions=[alice_doc, bob_doc, "test://nope"], resources_list_changed=True) as a,
            connect(server, "bob", "auto") as bob,
            bob.listen(resource_subscriptions=[alice_doc, bob_doc]) as b,
        ):
            assert a.honored.resource_subscriptions == [alice_doc]
            assert a.honored.resources_list_changed is True
            assert a.honored.tools_list_changed is None
            assert b.honored.resource_subscriptions == [bob_doc]
            assert b.honored.resources_list_changed is None

    run(body)


def test_listen_hears_orm_and_admin_changes_and_a_list_change(server: live.Server, documents: Docs) -> None:
    """2026-07-28: the acknowledgement, then one update per save (ORM, admin) and a list change per added row."""
    pk, marker = documents["alice"][1], documents["alice"][5]
    alice_doc, bob_doc, marker_doc = doc_uri(pk), doc_uri(documents["bob"][1]), doc_uri(marker)
    added = "test://added-in-the-admin"

    async def body(tasks: TaskGroup) -> None:
        inbox = Inbox("alice (listen)")
        async with (
            connect(server, "alice", "2026-07-28") as alice,
            alice.listen(
                resource_subscriptions=[alice_doc, bob_doc, "test://nope", marker_doc], resources_list_changed=True
            ) as sub,
        ):
            assert sub.honored.resource_subscriptions == [alice_doc, marker_doc]
            assert sub.honored.resources_list_changed is True
            tasks.start_soon(inbox.pump, sub)

            await touch(server, pk)
            await inbox.wait_for(updated(alice_doc), 1)
            await admin_touch(server, pk)
            await inbox.wait_for(updated(alice_doc), 2)
            await admin_add_static(server, added)
            await inbox.wait_for(LIST_CHANGED, 1)
            await settle(server, marker, inbox)
            # Exactly one notification per change, and nothing about the new row's URI (not subscribed).
            assert inbox.events == [updated(alice_doc), updated(alice_doc), LIST_CHANGED, updated(marker_doc)]
            assert not inbox.other

    run(body)


def test_session_subscribe_hears_orm_and_admin_changes_and_a_list_change(server: live.Server, documents: Docs) -> None:
    """2025-11-25: ``resources/subscribe`` in a session; notifications arrive on the session's GET stream."""
    pk, marker = documents["alice"][2], documents["alice"][6]
    alice_doc, marker_doc = doc_uri(pk), doc_uri(marker)
    added = "test://added-from-the-shell"

    async def body(tasks: TaskGroup) -> None:
        inbox = Inbox("alice (2025-11-25)")
        async with connect(server, "alice", "legacy", inbox) as alice:
            assert alice.protocol_version == "2025-11-25"
            resources = alice.server_capabilities.resources
            assert resources is not None
            assert resources.subscribe is True
            assert resources.list_changed is True
            assert await alice.subscribe_resource(alice_doc) is not None
            assert await alice.subscribe_resource(marker_doc) is not None
            await inbox.stream_opened()

            await touch(server, pk)
            await inbox.wait_for(updated(alice_doc), 1)
            await admin_touch(server, pk)
            await inbox.wait_for(updated(alice_doc), 2)
            await shell(server, orm_add_static(added))
            await inbox.wait_for(LIST_CHANGED, 1)
            await settle(server, marker, inbox)
            assert inbox.events == [updated(alice_doc), updated(alice_doc), LIST_CHANGED, updated(marker_doc)]

            # Unsubscribed, the document's changes stop; list changes (published after them) still come.
            await alice.unsubscribe_resource(alice_doc)
            await shell(server, orm_touch(pk) + orm_add_static(added + "-2"))
            await inbox.wait_for(LIST_CHANGED, 2)
            assert inbox.events[4:] == [LIST_CHANGED], inbox.events
            assert not inbox.other

    run(body)


def test_bob_listening_both_ways_hears_nothing_about_alices_documents(server: live.Server, documents: Docs) -> None:
    alice_pk, bob_pk = documents["alice"][3], documents["bob"][3]
    alice_doc, bob_doc = doc_uri(alice_pk), doc_uri(bob_pk)
    alice_inbox = Inbox("alice (listen)")
    bob_listen = Inbox("bob (listen)")
    bob_session = Inbox("bob (2025-11-25)")

    async def body(tasks: TaskGroup) -> None:
        async with (
            connect(server, "alice", "2026-07-28") as alice,
            alice.listen(resource_subscriptions=[alice_doc]) as alice_sub,
            connect(server, "bob", "2026-07-28") as bob,
            bob.listen(resource_subscriptions=[alice_doc, bob_doc], resources_list_changed=True) as bob_sub,
            connect(server, "bob", "legacy", bob_session) as bob_old,
        ):
            assert alice_sub.honored.resource_subscriptions == [alice_doc]
            assert bob_sub.honored.resource_subscriptions == [bob_doc]
            tasks.start_soon(alice_inbox.pump, alice_sub)
            tasks.start_soon(bob_listen.pump, bob_sub)
            # A 2025-11-25 subscription to alice's document is refused exactly like an unknown URI.
            with pytest.raises(MCPError) as refused:
                await bob_old.subscribe_resource(alice_doc)
            assert refused.value.code == -32002
            assert refused.value.data == {"uri": alice_doc}
            await bob_old.subscribe_resource(bob_doc)
            await bob_session.stream_opened()  # bob's streams are live before alice's changes

            await touch(server, alice_pk)
            await alice_inbox.wait_for(updated(alice_doc), 1)
            await admin_touch(server, alice_pk)
            await alice_inbox.wait_for(updated(alice_doc), 2)

            # Bob's own document changes after alice's: it reaches both of his streams, and nothing came before it.
            await admin_touch(server, bob_pk)
            await bob_listen.wait_for(updated(bob_doc))
            await bob_session.wait_for(updated(bob_doc))
            assert bob_listen.events == [updated(bob_doc)]
            assert bob_session.events == [updated(bob_doc)]
            assert alice_inbox.events == [updated(alice_doc), updated(alice_doc)]

    run(body)


def test_changes_made_in_a_gevent_worker_reach_the_listeners(
    server: live.Server, gevent_server: live.Server, documents: Docs
) -> None:
    """A save and an added row in a request of a gevent worker (its greenlet publishes through ``async_to_sync`` on
    a monkey-patched process) arrive at a stream of the uvicorn server, once each; bob hears nothing of them."""
    pk, marker = documents["alice"][2], documents["alice"][6]
    alice_doc, marker_doc = doc_uri(pk), doc_uri(marker)
    added = "test://added-in-the-gevent-worker"

    async def body(tasks: TaskGroup) -> None:
        inbox, bob_inbox = Inbox("alice (listen)"), Inbox("bob (listen)")
        async with (
            connect(server, "alice", "2026-07-28") as alice,
            alice.listen(resource_subscriptions=[alice_doc, marker_doc], resources_list_changed=True) as sub,
            connect(server, "bob", "2026-07-28") as bob,
            bob.listen(resource_subscriptions=[alice_doc, doc_uri(documents["bob"][2])]) as bob_sub,
        ):
            tasks.start_soon(inbox.pump, sub)
            tasks.start_soon(bob_inbox.pump, bob_sub)
            await admin_touch(gevent_server, pk)
            await inbox.wait_for(updated(alice_doc), 1)
            await admin_add_static(gevent_server, added)
            await inbox.wait_for(LIST_CHANGED, 1)
            await settle(server, marker, inbox)
            assert inbox.events == [updated(alice_doc), LIST_CHANGED, updated(marker_doc)]
            assert bob_inbox.events == []

    run(body)
    gevent_server.assert_log_clean()
