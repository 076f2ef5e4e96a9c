"""End to end: subscriptions with the official MCP python SDK client against a live uvicorn server on Redis.

The server is the demo project under uvicorn with ``MCP_REDIS_URL`` set (a Redis database of this module's own:
12, or 13 when ``MCP_TEST_DB=postgres``, overridable with ``MCP_E2E_REDIS_DB``), so the channel layer and the
legacy sessions live in Redis. Changes are made from other processes, as in production: through the ORM in a
``manage.py shell -c`` subprocess with the same environment, and through the Django admin over HTTP (a superuser
made by ``createsuperuser --noinput``). Both eras are covered:

- 2026-07-28: ``client.listen(resource_subscriptions=[...], resources_list_changed=True)``;
- 2025-11-25: ``client.subscribe_resource(uri)`` in a legacy session, notifications on its GET stream, delivered
  to the client's ``message_handler``.

Bob, listening both ways at once, never hears about alice's documents. Without Redis on 127.0.0.1:6379 the
module is skipped, unless ``CI`` is set (then it fails).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types
import pytest
from anyio.abc import TaskGroup
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ResourcesListChanged, ResourceUpdated, Subscription

pytestmark = [
    pytest.mark.e2e,
    # The legacy era is exercised on purpose: subscribe_resource/unsubscribe_resource warn that 2026-07-28 removed them.
    pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning"),
]

ROOT = Path(__file__).resolve().parent.parent
MANAGE = ROOT / "testproject" / "manage.py"
REDIS_HOST, REDIS_PORT = "127.0.0.1", 6379
ADMIN_USER, ADMIN_PASSWORD = "e2e-admin", "e2e-admin-password-7Qx!"

WAIT = 20.0  # seconds to wait for a notification that must arrive
GRACE = 1.5  # seconds to wait for notifications that must not arrive

Event = tuple[str, str | None]  # ("updated", uri) or ("list_changed", None)


def updated(uri: str) -> Event:
    return ("updated", uri)


LIST_CHANGED: Event = ("list_changed", None)


@dataclass
class LiveServer:
    url: str
    base: str
    env: dict[str, str]
    alice_token: str
    bob_token: str
    documents: dict[str, list[int]]
    log: Path

    def shell(self, code: str) -> str:
        """Run ``code`` in ``manage.py shell`` with the server's environment (its database and Redis)."""
        return _manage(self.env, "shell", "--no-imports", "-c", code)

    async def ashell(self, code: str) -> str:
        return await anyio.to_thread.run_sync(self.shell, code)


def doc_uri(pk: int) -> str:
    return f"learn://documents/{pk}"


# The server ----------------------------------------------------------------------------------------------


def _redis_db() -> int:
    if os.environ.get("MCP_E2E_REDIS_DB"):
        return int(os.environ["MCP_E2E_REDIS_DB"])
    return 13 if os.environ.get("MCP_TEST_DB") == "postgres" else 12


def _redis(db: int) -> Any:
    import redis

    return redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=db, socket_connect_timeout=3, socket_timeout=10)


def _require_redis(db: int) -> None:
    import redis

    try:
        _redis(db).ping()
    except redis.RedisError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI requires Redis on {REDIS_HOST}:{REDIS_PORT}: {exc}")
        pytest.skip(f"Redis is not reachable on {REDIS_HOST}:{REDIS_PORT} ({exc})")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _manage(env: dict[str, str], *args: str) -> str:
    completed = subprocess.run(
        [sys.executable, str(MANAGE), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"manage.py {args[0]} failed:\n{completed.stdout}\n{completed.stderr}")
    return completed.stdout


@contextlib.contextmanager
def _postgres_database(name: str) -> Iterator[None]:
    import psycopg
    from psycopg import sql

    def admin() -> psycopg.Connection[Any]:
        return psycopg.connect("host=127.0.0.1 port=5432 dbname=postgres user=postgres", autocommit=True)

    with admin() as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield
    finally:
        with admin() as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@contextlib.contextmanager
def _redis_database(db: int) -> Iterator[None]:
    """This module's Redis database, empty before and after (stale groups or sessions would leak across runs)."""
    client = _redis(db)
    client.flushdb()
    try:
        yield
    finally:
        client.flushdb()
        client.close()


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path, timeout: float = 60.0) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "server/discover",
        "params": {
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            }
        },
    }
    headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"uvicorn exited with {process.returncode}:\n{log.read_text(errors='replace')}")
        try:
            response = httpx2.post(url, json=body, headers=headers, timeout=2.0)
        except httpx2.TransportError:
            time.sleep(0.1)
            continue
        if response.status_code == 200:
            return
        time.sleep(0.1)
    raise RuntimeError(f"uvicorn did not become ready:\n{log.read_text(errors='replace')}")


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    redis_db = _redis_db()
    _require_redis(redis_db)
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    url = f"{base}/mcp"
    workdir = tmp_path_factory.mktemp("subscriptions-e2e")
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("MCP_TEST_DB", "PGDATABASE", "MCP_DEMO_DB", "DJANGO_SETTINGS_MODULE", "DJANGO_DEBUG")
    }
    env.update(
        DJANGO_SETTINGS_MODULE="testproject.settings",
        MCP_RESOURCE_URI=url,
        MCP_REDIS_URL=f"redis://{REDIS_HOST}:{REDIS_PORT}/{redis_db}",
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
    )
    with contextlib.ExitStack() as stack:
        stack.enter_context(_redis_database(redis_db))
        if os.environ.get("MCP_TEST_DB") == "postgres":
            database = f"mcp_subs_e2e_{os.getpid()}"
            stack.enter_context(_postgres_database(database))
            env.update(MCP_TEST_DB="postgres", PGDATABASE=database)
        else:
            env["MCP_DEMO_DB"] = str(workdir / "subscriptions.sqlite3")
        _manage(env, "migrate", "--verbosity", "0")
        _manage(env, "load_demo_data")
        _manage(
            {**env, "DJANGO_SUPERUSER_PASSWORD": ADMIN_PASSWORD},
            "createsuperuser",
            "--noinput",
            "--username",
            ADMIN_USER,
            "--email",
            "e2e-admin@example.com",
        )
        tokens = {
            user: _manage(env, "mcp_token", "--user", user, "--scope", "documents:read", "--resource", url).strip()
            for user in ("alice", "bob")
        }
        script = (
            "import json\n"
            "from testproject.library.models import Document\n"
            "def ids(u):\n"
            "    return list(Document.objects.filter(owner__username=u).order_by('pk').values_list('pk', flat=True))\n"
            "print(json.dumps({u: ids(u) for u in ('alice', 'bob')}))\n"
        )
        documents = json.loads(_manage(env, "shell", "--no-imports", "-c", script).strip().splitlines()[-1])

        log = workdir / "uvicorn.log"
        log_file = stack.enter_context(log.open("wb"))
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "testproject.asgi:application",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--log-level",
                "warning",
            ],
            cwd=ROOT,
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
        try:
            _wait_ready(url, process, log)
            yield LiveServer(
                url=url,
                base=base,
                env=env,
                alice_token=tokens["alice"],
                bob_token=tokens["bob"],
                documents=documents,
                log=log,
            )
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=15)
        output = log.read_text(errors="replace")
        assert "Traceback" not in output, f"the server logged a traceback:\n{output}"


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
async def admin_browser(live: LiveServer) -> AsyncIterator[httpx2.AsyncClient]:
    """An HTTP client signed in to the Django admin as the superuser (session and CSRF cookies)."""
    async with httpx2.AsyncClient(base_url=live.base, timeout=30.0, follow_redirects=False) as http:
        page = await http.get("/admin/login/")
        assert page.status_code == 200
        fields = _form(page.text, "login-form")
        fields.update(username=ADMIN_USER, password=ADMIN_PASSWORD, next="/admin/")
        signed_in = await http.post("/admin/login/", data=fields, headers={"Referer": f"{live.base}/admin/login/"})
        assert signed_in.status_code == 302, f"admin sign-in failed ({signed_in.status_code})"
        assert signed_in.headers["Location"] == "/admin/"
        yield http


async def _submit(http: httpx2.AsyncClient, live: LiveServer, path: str, form_id: str, changes: dict[str, str]) -> None:
    page = await http.get(path)
    assert page.status_code == 200, f"GET {path}: {page.status_code}"
    fields = _form(page.text, form_id)
    fields.update(changes, _save="Save")
    saved = await http.post(path, data=fields, headers={"Referer": f"{live.base}{path}"})
    # The admin redirects after a successful save; a 200 is the form again, with its errors.
    assert saved.status_code == 302, f"POST {path} was not saved ({saved.status_code}):\n{saved.text[:3000]}"


async def admin_touch(live: LiveServer, pk: int) -> None:
    """Change document ``pk``'s body through the admin's change form."""
    path = f"/admin/library/document/{pk}/change/"
    async with admin_browser(live) as http:
        page = await http.get(path)
        body = _form(page.text, "document_form")["body"]
        await _submit(http, live, path, "document_form", {"body": body + " (changed in the admin)"})


async def admin_add_static(live: LiveServer, uri: str) -> None:
    """Add a public static resource through the admin's add form."""
    async with admin_browser(live) as http:
        await _submit(
            http,
            live,
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

    def count(self, event: Event) -> int:
        return self.events.count(event)

    async def wait_for(self, event: Event, count: int = 1, timeout: float = WAIT) -> None:
        with anyio.move_on_after(timeout):
            while self.count(event) < count:
                await anyio.sleep(0.05)
        assert self.count(event) >= count, (
            f"{self.name}: waited {timeout}s for {count} x {event}; heard {self.events} (other: {self.other})"
        )

    async def message_handler(self, message: Any) -> None:
        """The legacy client's ``message_handler``: notifications of the session's GET stream."""
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
async def connect(live: LiveServer, token: str, mode: str, inbox: Inbox | None = None) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token}"},
            timeout=httpx2.Timeout(30.0, read=300.0),
            follow_redirects=True,
        ) as http,
        Client(
            streamable_http_client(live.url, http_client=http),
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


async def legacy_warm_up(live: LiveServer, inbox: Inbox, pk: int) -> None:
    """Wait until the legacy session's GET stream delivers updates of document ``pk``, then forget them.

    The SDK opens the GET stream in the background after ``initialize``, and ``resources/subscribe`` reaches
    it through the channel layer: both settle asynchronously, so a change made at once could be missed.
    """
    for _attempt in range(10):
        await live.ashell(orm_touch(pk))
        with contextlib.suppress(AssertionError):
            await inbox.wait_for(updated(doc_uri(pk)), timeout=3.0)
            break
    else:
        pytest.fail(f"{inbox.name}: the legacy GET stream never delivered an update of document {pk}")
    await anyio.sleep(GRACE)
    inbox.events.clear()


def _ids(live: LiveServer, user: str, index: int) -> int:
    return live.documents[user][index]


# Tests ---------------------------------------------------------------------------------------------------


def test_listen_acknowledges_only_what_the_caller_may_read(live: LiveServer) -> None:
    alice_doc, bob_doc = doc_uri(_ids(live, "alice", 0)), doc_uri(_ids(live, "bob", 0))

    async def body(tasks: TaskGroup) -> None:
        async with (
            connect(live, live.alice_token, "2026-07-28") as alice,
            alice.listen(resource_subscriptions=[alice_doc, bob_doc, "test://nope"], resources_list_changed=True) as a,
            connect(live, live.bob_token, "auto") as bob,
            bob.listen(resource_subscriptions=[alice_doc, bob_doc]) as b,
        ):
            assert a.honored.resource_subscriptions == [alice_doc]
            assert a.honored.resources_list_changed is True
            assert a.honored.tools_list_changed is None
            assert b.honored.resource_subscriptions == [bob_doc]
            assert b.honored.resources_list_changed is None

    run(body)


def test_listen_hears_orm_and_admin_changes_and_a_list_change(live: LiveServer) -> None:
    """2026-07-28: the acknowledgement, then one update per save (ORM, admin) and a list change per added row."""
    pk = _ids(live, "alice", 1)
    alice_doc, bob_doc = doc_uri(pk), doc_uri(_ids(live, "bob", 1))
    wanted = [alice_doc, bob_doc, "test://nope"]
    added = "test://added-in-the-admin"

    async def body(tasks: TaskGroup) -> None:
        inbox = Inbox("alice (listen)")
        async with (
            connect(live, live.alice_token, "2026-07-28") as alice,
            alice.listen(resource_subscriptions=wanted, resources_list_changed=True) as sub,
        ):
            assert sub.honored.resource_subscriptions == [alice_doc]
            assert sub.honored.resources_list_changed is True
            tasks.start_soon(inbox.pump, sub)

            await live.ashell(orm_touch(pk))
            await inbox.wait_for(updated(alice_doc), 1)
            await admin_touch(live, pk)
            await inbox.wait_for(updated(alice_doc), 2)
            await admin_add_static(live, added)
            await inbox.wait_for(LIST_CHANGED, 1)
            await anyio.sleep(GRACE)
            # Exactly one notification per change, and nothing about the new row's URI (not subscribed).
            assert inbox.events == [updated(alice_doc), updated(alice_doc), LIST_CHANGED], inbox.events
            assert not inbox.other

    run(body)


def test_legacy_subscribe_hears_orm_and_admin_changes_and_a_list_change(live: LiveServer) -> None:
    """2025-11-25: ``resources/subscribe`` in a session; notifications arrive on the session's GET stream."""
    pk = _ids(live, "alice", 2)
    alice_doc = doc_uri(pk)
    added = "test://added-from-the-shell"

    async def body(tasks: TaskGroup) -> None:
        inbox = Inbox("alice (legacy)")
        async with connect(live, live.alice_token, "legacy", inbox) as alice:
            assert alice.protocol_version == "2025-11-25"
            resources = alice.server_capabilities.resources
            assert resources is not None
            assert resources.subscribe is True
            assert resources.list_changed is True
            assert await alice.subscribe_resource(alice_doc) is not None
            await legacy_warm_up(live, inbox, pk)

            await live.ashell(orm_touch(pk))
            await inbox.wait_for(updated(alice_doc), 1)
            await admin_touch(live, pk)
            await inbox.wait_for(updated(alice_doc), 2)
            await live.ashell(orm_add_static(added))
            await inbox.wait_for(LIST_CHANGED, 1)
            await anyio.sleep(GRACE)
            assert inbox.events == [updated(alice_doc), updated(alice_doc), LIST_CHANGED], inbox.events

            # Unsubscribed, the document's changes stop; list changes (published after them) still come.
            await alice.unsubscribe_resource(alice_doc)
            await live.ashell(orm_touch(pk) + orm_add_static(added + "-2"))
            await inbox.wait_for(LIST_CHANGED, 2)
            await anyio.sleep(GRACE)
            assert inbox.events == [updated(alice_doc), updated(alice_doc), LIST_CHANGED, LIST_CHANGED], inbox.events

    run(body)


def test_bob_listening_both_ways_hears_nothing_about_alices_documents(live: LiveServer) -> None:
    alice_pk, bob_pk = _ids(live, "alice", 3), _ids(live, "bob", 3)
    alice_doc, bob_doc = doc_uri(alice_pk), doc_uri(bob_pk)
    alice_inbox = Inbox("alice (listen)")
    bob_listen = Inbox("bob (listen)")
    bob_legacy = Inbox("bob (legacy)")

    async def body(tasks: TaskGroup) -> None:
        async with (
            connect(live, live.alice_token, "2026-07-28") as alice,
            alice.listen(resource_subscriptions=[alice_doc]) as alice_sub,
            connect(live, live.bob_token, "2026-07-28") as bob,
            bob.listen(resource_subscriptions=[alice_doc, bob_doc], resources_list_changed=True) as bob_sub,
            connect(live, live.bob_token, "legacy", bob_legacy) as bob_old,
        ):
            assert alice_sub.honored.resource_subscriptions == [alice_doc]
            assert bob_sub.honored.resource_subscriptions == [bob_doc]
            tasks.start_soon(alice_inbox.pump, alice_sub)
            tasks.start_soon(bob_listen.pump, bob_sub)
            # A legacy subscription to alice's document is refused exactly like an unknown URI.
            with pytest.raises(MCPError) as refused:
                await bob_old.subscribe_resource(alice_doc)
            assert refused.value.code == -32002
            assert refused.value.data == {"uri": alice_doc}
            await bob_old.subscribe_resource(bob_doc)
            # Bob's streams are live before alice's changes (the warm-up saves bob's document).
            await legacy_warm_up(live, bob_legacy, bob_pk)
            await bob_listen.wait_for(updated(bob_doc))
            bob_listen.events.clear()

            await live.ashell(orm_touch(alice_pk))
            await alice_inbox.wait_for(updated(alice_doc), 1)
            await admin_touch(live, alice_pk)
            await alice_inbox.wait_for(updated(alice_doc), 2)
            await anyio.sleep(GRACE)
            assert bob_listen.events == [], bob_listen.events
            assert bob_legacy.events == [], bob_legacy.events

            # Bob's streams still work: his own document's change reaches both, and nothing else came before it.
            await admin_touch(live, bob_pk)
            await bob_listen.wait_for(updated(bob_doc))
            await bob_legacy.wait_for(updated(bob_doc))
            await anyio.sleep(GRACE)
            assert bob_listen.events == [updated(bob_doc)]
            assert bob_legacy.events == [updated(bob_doc)]
            assert alice_inbox.events == [updated(alice_doc), updated(alice_doc)]

    run(body)
