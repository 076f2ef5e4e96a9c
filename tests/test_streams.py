"""Streams: ``subscriptions/listen`` (2026-07-28) and a 2025-11-25 session's GET stream, under the project's ASGI
deployment.

``testproject.asgi.application`` (Channels' ``ProtocolTypeRouter`` and ``URLRouter`` with ``MCPEndpoint`` at
``/mcp``) runs in-process under asgiref's ``ApplicationCommunicator``: streams are served by the endpoint on the
event loop, every other request (``initialize``, ``resources/subscribe``, ``DELETE``) by Django's ASGI handler and
the project's middleware. The channel layer is the in-memory one unless a test configures another (Redis across
processes is tested in test_fanout_redis.py); changes are made through the ORM (or the admin) in worker threads, as
a request would make them. Negative assertions ("no update for X") are made against a later sentinel: messages of
one stream arrive in order, so when the sentinel's notification is the next message, the withheld one never came.
Token and group expiry are reached by moving the clock of the stream code and of the layer forward
(``stream_support.Clock``), never by waiting.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest
from asgiref.testing import ApplicationCommunicator
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.test import Client
from django.urls import path

from mcp_resources.exceptions import InvalidRequest
from mcp_resources.models import StaticResource
from mcp_resources.principal import Principal
from mcp_resources.protocol.versions import V2025_11_25, V2026_07_28
from mcp_resources.registries import registry
from mcp_resources.server import MCPServer
from mcp_resources.subscriptions import notify_resource_list_changed, notify_resource_updated
from mcp_resources.transport import MCPEndpoint, MCPView, fanout, streams
from mcp_resources.transport.sessions import Session, SessionStore, owner_of
from mcp_resources.transport.views import error_response
from testproject.library.models import Document
from tests.conftest import RESOURCE, urlconf
from tests.stream_support import (
    ACKNOWLEDGED,
    OMIT,
    SUBSCRIPTION_ID,
    Clock,
    Exchange,
    application,
    final_result,
    in_thread,
    list_changed,
    listen_body,
    listen_headers,
    meta,
    revoke_token,
    scope,
    until,
    updated,
)

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]

INVALID_PARAMS = -32602
METHOD_NOT_FOUND = -32601
HEADER_MISMATCH = -32020
UNSUPPORTED_VERSION = -32022


@pytest.fixture(autouse=True)
def mcp_settings(settings: Any) -> None:
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "RESOURCE_URI": RESOURCE, "STREAM_KEEPALIVE_SECONDS": 30}


def set_mcp(settings: Any, **values: Any) -> None:
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, **values}


@pytest.fixture
def app() -> Any:
    """The project's ASGI application (``testproject.asgi.application``)."""
    return application()


@dataclass
class People:
    alice: Any
    bob: Any
    alice_docs: list[Document]
    bob_docs: list[Document]
    alice_token: str
    bob_token: str


@pytest.fixture
def people(alice: Any, bob: Any, make_token: Callable[..., str]) -> People:
    alice_docs = [Document.objects.create(owner=alice, title=f"A{i}", body=f"alice {i}") for i in range(3)]
    bob_docs = [Document.objects.create(owner=bob, title=f"B{i}", body=f"bob {i}") for i in range(2)]
    return People(alice, bob, alice_docs, bob_docs, make_token(alice), make_token(bob))


@pytest.fixture(autouse=True)
def no_stream_left_behind() -> Any:
    """Every test ends with no open stream counted and no membership left in a hub."""
    yield
    assert dict(streams._open_streams) == {}
    for hub in list(fanout._hubs.values()):
        assert not hub.members, hub.members


def uri(doc: Document) -> str:
    return f"learn://documents/{doc.pk}"


async def listen(
    app: Any,
    token: str | None,
    *,
    request_id: Any = 1,
    uris: list[str] | None = None,
    list_changes: bool = False,
    notifications: Any = None,
    **headers: str | None,
) -> Exchange:
    if notifications is None:
        notifications = {}
        if uris is not None:
            notifications["resourceSubscriptions"] = uris
        if list_changes:
            notifications["resourcesListChanged"] = True
    exchange = Exchange(app, scope("POST", listen_headers(token, **headers)))
    return await exchange.start(listen_body(request_id, notifications))


async def opened(app: Any, token: str | None, **kwargs: Any) -> tuple[Exchange, dict[str, Any]]:
    """A listen stream that was accepted, with its acknowledgement."""
    exchange = await listen(app, token, **kwargs)
    assert exchange.status == 200, await exchange.body()
    ack = await exchange.event()
    assert ack["method"] == ACKNOWLEDGED, ack
    return exchange, ack


async def post(app: Any, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, str], Any]:
    exchange = await Exchange(app, scope("POST", {"content-type": "application/json", **headers})).start(
        json.dumps(body).encode()
    )
    raw = await exchange.body()
    return exchange.status, exchange.headers, json.loads(raw) if raw else None


def touch(doc: Document) -> None:
    doc.refresh_from_db()
    doc.body += "!"
    doc.save()


# The acknowledgement -------------------------------------------------------------------------------------------


async def test_ack_first_with_only_the_honoured_uris(app: Any, people: People) -> None:
    mine, theirs = uri(people.alice_docs[0]), uri(people.bob_docs[0])
    await in_thread(
        lambda: StaticResource.objects.create(uri="app://public-note", name="public-note", text="hello")  # type: ignore[misc]
    )
    asked = [mine, theirs, "learn://documents/999999", "nope://unknown", "not a uri", mine, "app://public-note"]
    stream = await listen(
        app,
        people.alice_token,
        notifications={
            "resourceSubscriptions": asked,
            "resourcesListChanged": True,
            "toolsListChanged": True,
            "promptsListChanged": True,
        },
    )
    assert stream.status == 200
    first = await stream.event()
    assert first == {
        "jsonrpc": "2.0",
        "method": ACKNOWLEDGED,
        "params": {
            "_meta": {SUBSCRIPTION_ID: 1},
            "notifications": {"resourcesListChanged": True, "resourceSubscriptions": [mine, "app://public-note"]},
        },
    }
    # Bob's document was left out: a change to it never reaches alice, a change to hers does.
    await in_thread(touch, people.bob_docs[0])
    await in_thread(touch, people.alice_docs[0])
    assert await stream.event() == updated(mine, 1)
    await stream.disconnect()


async def test_out_of_scope_uris_are_left_out(app: Any, people: People, make_token: Callable[..., str]) -> None:
    token = await in_thread(make_token, people.alice, "profile")
    stream, ack = await opened(app, token, uris=[uri(people.alice_docs[0])], list_changes=True)
    assert ack["params"]["notifications"] == {"resourcesListChanged": True, "resourceSubscriptions": []}
    await in_thread(touch, people.alice_docs[0])
    await in_thread(notify_resource_list_changed)
    assert await stream.event() == list_changed(1)
    await stream.disconnect()


async def test_nothing_asked_nothing_honoured(app: Any, people: People) -> None:
    stream, ack = await opened(app, people.alice_token, notifications={"resourcesListChanged": False})
    assert ack["params"]["notifications"] == {}
    await in_thread(touch, people.alice_docs[0])
    await in_thread(notify_resource_list_changed)
    await stream.silent(0.3)
    await stream.disconnect()


@pytest.mark.parametrize("request_id", [7, "listen-1", 0, ""])
async def test_every_message_carries_the_subscription_id(app: Any, people: People, request_id: Any) -> None:
    doc = people.alice_docs[1]
    stream, ack = await opened(app, people.alice_token, request_id=request_id, uris=[uri(doc)], list_changes=True)
    assert ack["params"]["_meta"] == {SUBSCRIPTION_ID: request_id}
    await in_thread(touch, doc)
    assert await stream.event() == updated(uri(doc), request_id)
    await in_thread(notify_resource_list_changed)
    assert await stream.event() == list_changed(request_id)
    await stream.disconnect()


async def test_sse_headers(app: Any, people: People) -> None:
    stream, _ = await opened(app, people.alice_token, list_changes=True)
    assert stream.headers["content-type"] == "text/event-stream"
    assert stream.headers["x-accel-buffering"] == "no"
    assert "no-cache" in stream.headers["cache-control"]
    assert "content-length" not in stream.headers
    await stream.disconnect()


async def test_only_the_types_opted_into(app: Any, people: People) -> None:
    doc = people.alice_docs[0]
    updates_only, _ = await opened(app, people.alice_token, request_id="u", uris=[uri(doc)])
    lists_only, _ = await opened(app, people.alice_token, request_id="l", list_changes=True)
    await in_thread(notify_resource_list_changed)
    await in_thread(touch, doc)
    assert await updates_only.event() == updated(uri(doc), "u")  # the list change before it never came
    await in_thread(notify_resource_list_changed)
    assert await lists_only.event() == list_changed("l")
    assert await lists_only.event() == list_changed("l")  # and no update in between
    await updates_only.silent(0.2)
    await updates_only.disconnect()
    await lists_only.disconnect()


async def test_keepalive_comments(app: Any, people: People, settings: Any) -> None:
    set_mcp(settings, STREAM_KEEPALIVE_SECONDS=0.1)
    stream, _ = await opened(app, people.alice_token, list_changes=True)
    assert await stream.frame(2) == ("comment", "keep-alive")
    assert await stream.frame(2) == ("comment", "keep-alive")
    await in_thread(notify_resource_list_changed)
    assert await stream.event(2) == list_changed(1)
    await stream.disconnect()


async def test_streams_that_write_together_spread_their_keepalives(app: Any, people: People, settings: Any) -> None:
    """Streams of one change write it at once; their keep-alives come between 3/4 of STREAM_KEEPALIVE_SECONDS and
    all of it later, each at its own time, not all together (they would land in the fan-out of a later change)."""
    set_mcp(settings, STREAM_KEEPALIVE_SECONDS=2, STREAMS_PER_CALLER=20)
    crowd = [(await opened(app, people.alice_token, list_changes=True))[0] for _ in range(16)]
    await in_thread(notify_resource_list_changed)
    loop = asyncio.get_running_loop()

    async def keepalive_after_change(stream: Exchange) -> float:
        assert await stream.event(5) == list_changed(1)
        written = loop.time()
        assert await stream.frame(5) == ("comment", "keep-alive")
        return loop.time() - written

    after = await asyncio.gather(*map(keepalive_after_change, crowd))
    assert min(after) > 2 * (1 - streams.KEEPALIVE_SPREAD) - 0.05, after  # none before its time
    assert max(after) - min(after) > 0.1, after  # 16 draws over half a second: all within 0.1 s once in 10^9
    for stream in crowd:
        await stream.disconnect()


# Where changes come from -----------------------------------------------------------------------------------------


async def test_update_after_commit_not_before(app: Any, people: People) -> None:
    doc = people.alice_docs[0]
    stream, _ = await opened(app, people.alice_token, uris=[uri(doc)])
    import threading

    saved, release = threading.Event(), threading.Event()

    def save_in_transaction() -> None:
        with transaction.atomic():
            touch(doc)
            saved.set()
            assert release.wait(10)

    writer = asyncio.ensure_future(in_thread(save_in_transaction))
    assert await asyncio.to_thread(saved.wait, 10)
    await stream.silent(0.4)  # saved but not committed: nothing yet
    release.set()
    await writer
    assert await stream.event() == updated(uri(doc), 1)
    await stream.disconnect()


async def test_no_update_on_rollback(app: Any, people: People) -> None:
    rolled_back, committed = people.alice_docs[0], people.alice_docs[1]
    stream, _ = await opened(app, people.alice_token, uris=[uri(rolled_back), uri(committed)])

    def save_and_roll_back() -> None:
        try:
            with transaction.atomic():
                touch(rolled_back)
                raise RuntimeError("roll back")
        except RuntimeError:
            return
        raise AssertionError("not rolled back")

    await in_thread(save_and_roll_back)
    await in_thread(touch, committed)
    assert await stream.event() == updated(uri(committed), 1)
    await stream.disconnect()


async def test_delete_of_a_record_withholds_its_update(app: Any, people: People) -> None:
    gone, kept = people.alice_docs[0], people.alice_docs[1]
    stream, _ = await opened(app, people.alice_token, uris=[uri(gone), uri(kept)])
    await in_thread(touch, gone)
    assert await stream.event() == updated(uri(gone), 1)
    await in_thread(lambda: Document.objects.filter(pk=gone.pk).delete())
    await in_thread(notify_resource_updated, uri(gone))  # even an explicit notification is re-checked
    await in_thread(touch, kept)
    assert await stream.event() == updated(uri(kept), 1)
    await stream.disconnect()


async def test_access_lost_mid_stream_withholds_the_update(app: Any, people: People) -> None:
    doc, other = people.alice_docs[0], people.alice_docs[1]
    stream, _ = await opened(app, people.alice_token, uris=[uri(doc), uri(other)])
    # The document moves to bob: alice may no longer read it.
    await in_thread(lambda: Document.objects.filter(pk=doc.pk).update(owner=people.bob))
    await in_thread(notify_resource_updated, uri(doc))
    await in_thread(touch, other)
    assert await stream.event() == updated(uri(other), 1)
    await stream.disconnect()


async def test_revoked_token_gets_no_update_and_its_stream_ends(
    app: Any, people: People, make_token: Callable[..., str]
) -> None:
    doc = people.alice_docs[0]
    revoked = await in_thread(make_token, people.alice)
    stream, _ = await opened(app, revoked, request_id="revoked", uris=[uri(doc)])
    witness, _ = await opened(app, people.alice_token, request_id="witness", uris=[uri(doc)])
    await in_thread(touch, doc)
    assert await stream.event() == updated(uri(doc), "revoked")
    assert await witness.event() == updated(uri(doc), "witness")
    await in_thread(revoke_token, revoked)
    await in_thread(touch, doc)
    assert await witness.event() == updated(uri(doc), "witness")  # the update was published...
    # ...withheld from the revoked token, whose stream ends as at expiry: with the final result, then closed.
    assert await stream.until_closed(5) == [final_result("revoked")]
    await stream.finished()
    assert sum(streams._open_streams.values()) == 1  # the witness only
    await witness.disconnect()


async def test_revoked_token_ends_its_session_stream(app: Any, people: People, make_token: Callable[..., str]) -> None:
    doc = people.alice_docs[0]
    token = await in_thread(make_token, people.alice)
    session = await new_session(app, token)
    stream = await open_session_stream(app, token, session)
    assert (await session_call(app, token, session, "resources/subscribe", uri=uri(doc)))[0] == 200
    await in_thread(touch, doc)
    assert await stream.event() == updated(uri(doc))
    await in_thread(revoke_token, token)
    await in_thread(touch, doc)
    assert await stream.until_closed(5) == []
    await stream.finished()


async def test_static_resource_admin_change(app: Any, people: People) -> None:
    row = await in_thread(
        lambda: StaticResource.objects.create(uri="app://readme", name="readme", text="v1")  # type: ignore[misc]
    )
    await in_thread(lambda: get_user_model().objects.create_superuser("admin", "a@example.com", "pw"))
    stream, ack = await opened(app, people.alice_token, uris=["app://readme"], list_changes=True)
    assert ack["params"]["notifications"]["resourceSubscriptions"] == ["app://readme"]

    def edit_in_admin(**changes: str) -> None:
        client = Client()
        assert client.login(username="admin", password="pw")
        data = {
            "uri": "app://readme",
            "name": "readme",
            "title": "",
            "description": "",
            "mime_type": "text/plain",
            "enabled": "on",
            "text": "v2",
            "binary": "",
            "access": "public",
            "required_scopes": "",
        }
        data.update(changes)
        response = client.post(f"/admin/mcp_resources/staticresource/{row.pk}/change/", data)
        assert response.status_code == 302, response.content[:2000]

    await in_thread(edit_in_admin)
    received = [await stream.event(), await stream.event()]
    assert sorted(received, key=json.dumps) == sorted([updated("app://readme", 1), list_changed(1)], key=json.dumps)
    # Disabled in the admin: the list changes; the row can no longer be read, so no update for it.
    await in_thread(lambda: edit_in_admin(enabled=""))
    assert await stream.event() == list_changed(1)
    await stream.silent(0.3)
    await stream.disconnect()


async def test_list_changed_on_register_and_unregister(app: Any, people: People) -> None:
    stream, _ = await opened(app, people.alice_token, list_changes=True)
    unregister = registry.register_resource("app://live-clock", "clock", lambda: "tick")  # on the event loop's thread
    try:
        assert await stream.event() == list_changed(1)
    finally:
        await in_thread(unregister)  # from a worker thread
    assert await stream.event() == list_changed(1)
    await in_thread(unregister)  # a second call is a no-op: nothing announced
    await stream.silent(0.3)
    await stream.disconnect()


async def test_code_resource_push_reaches_its_subscribers(app: Any, people: People) -> None:
    state = {"value": "one"}
    changed: list[Any] = []
    unregister = registry.register_resource(
        "app://live-state",
        "state",
        lambda: state["value"],
        subscribe=lambda on_change: changed.append(on_change) or (lambda: None),
    )
    try:
        stream, ack = await opened(app, people.alice_token, uris=["app://live-state"])
        assert ack["params"]["notifications"]["resourceSubscriptions"] == ["app://live-state"]
        # Each push read before the next change (a stream coalesces updates of one URI waiting for it at once).
        for value, pushed in (("two", True), ("two", False), ("three", True)):
            state["value"] = value
            await in_thread(changed[0])
            if pushed:
                assert await stream.event() == updated("app://live-state", 1)
        await stream.silent(0.3)  # the unchanged value pushed nothing
        await stream.disconnect()
    finally:
        unregister()


# Ending ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("request_id", [3, "expiring"])
async def test_token_expiry_ends_with_the_final_result(
    app: Any, people: People, request_id: Any, settings: Any, monkeypatch: pytest.MonkeyPatch, make_token: Any
) -> None:
    set_mcp(settings, STREAM_KEEPALIVE_SECONDS=0.05)  # the stream wakes often to look at the clock
    clock = Clock().install(monkeypatch)
    token = await in_thread(lambda: make_token(people.alice, expires_in=60))
    stream, _ = await opened(app, token, request_id=request_id, list_changes=True)
    clock.advance(58)
    await stream.frame()  # a keep-alive written after the jump: the stream has seen the new time
    await in_thread(notify_resource_list_changed)
    assert await stream.event() == list_changed(request_id)  # still open two seconds before the expiry
    clock.advance(3)
    assert await stream.until_closed(5) == [final_result(request_id)]
    await stream.finished()


async def test_token_expiry_ends_a_session_stream(
    app: Any, people: People, settings: Any, monkeypatch: pytest.MonkeyPatch, make_token: Any
) -> None:
    set_mcp(settings, STREAM_KEEPALIVE_SECONDS=0.05)
    clock = Clock().install(monkeypatch)
    token = await in_thread(lambda: make_token(people.alice, expires_in=60))
    stream = await open_session_stream(app, token)
    clock.advance(58)
    await stream.frame()
    await in_thread(notify_resource_list_changed)
    assert await stream.event() == list_changed()
    clock.advance(3)
    assert await stream.until_closed(5) == []  # a session's stream has no result to send: it just ends
    await stream.finished()


async def test_expired_token_cannot_listen(app: Any, people: People, make_token: Callable[..., str]) -> None:
    token = await in_thread(lambda: make_token(people.alice, expires_in=-1))
    stream = await listen(app, token, list_changes=True)
    assert stream.status == 401
    assert "invalid_token" in stream.headers["www-authenticate"]
    await stream.body()


async def test_disconnect_frees_the_stream(app: Any, people: People, settings: Any) -> None:
    set_mcp(settings, STREAMS_PER_CALLER=1)
    doc = people.alice_docs[0]
    stream, _ = await opened(app, people.alice_token, uris=[uri(doc)], list_changes=True)
    assert sum(streams._open_streams.values()) == 1
    hub = await fanout.get_hub()
    assert ("u", uri(doc)) in hub.members
    assert ("l", "") in hub.members
    await stream.disconnect()
    assert dict(streams._open_streams) == {}
    assert ("u", uri(doc)) not in hub.members
    assert ("l", "") not in hub.members
    # The caller's only slot is free again.
    again, _ = await opened(app, people.alice_token, list_changes=True)
    await again.disconnect()


async def test_end_all_streams_ends_gracefully(app: Any, people: People) -> None:
    listening, _ = await opened(app, people.alice_token, request_id="shutdown", list_changes=True)
    session_stream = await open_session_stream(app, people.alice_token)
    await streams.end_all_streams()
    assert await listening.until_closed() == [final_result("shutdown")]
    assert await session_stream.until_closed() == []
    await listening.finished()
    await session_stream.finished()
    assert dict(streams._open_streams) == {}


# Limits and bad input ------------------------------------------------------------------------------------------------


async def test_too_many_uris_is_refused(app: Any, people: People, settings: Any) -> None:
    set_mcp(settings, URIS_PER_LISTEN=3)
    uris = [uri(d) for d in people.alice_docs] + ["learn://documents/999"]
    stream = await listen(app, people.alice_token, request_id=9, uris=uris)
    assert stream.status == 400
    payload = await stream.json()
    assert payload["id"] == 9
    assert payload["error"]["code"] == INVALID_PARAMS
    # Exactly at the limit is fine.
    ok, ack = await opened(app, people.alice_token, uris=uris[:3])
    assert ack["params"]["notifications"]["resourceSubscriptions"] == uris[:3]
    await ok.disconnect()


class CheckingServer(MCPServer):
    """The default registry's server, recording each URI whose access it checks."""

    def __init__(self) -> None:
        super().__init__(registry)
        self.checked: list[str] = []

    def may_read(self, uri: str, ctx: Any) -> bool:
        self.checked.append(uri)
        return super().may_read(uri, ctx)


async def test_thousands_of_uris_are_refused_before_any_is_checked(people: People, settings: Any) -> None:
    from testproject.asgi import django_asgi_app

    server = CheckingServer()
    settings.ROOT_URLCONF = urlconf(path("mcp", MCPView.as_view(server=server)))
    endpoint = MCPEndpoint.as_asgi(django_asgi_app)
    stream = await listen(endpoint, people.alice_token, uris=[f"learn://documents/{i}" for i in range(5000)])
    assert stream.status == 400
    assert (await stream.json())["error"]["code"] == INVALID_PARAMS
    assert server.checked == []
    # Within the limit, each URI is checked once.
    ok, _ = await opened(endpoint, people.alice_token, uris=[uri(doc) for doc in people.alice_docs])
    assert server.checked == [uri(doc) for doc in people.alice_docs]
    await ok.disconnect()


async def test_too_many_streams_per_caller(app: Any, people: People, settings: Any) -> None:
    set_mcp(settings, STREAMS_PER_CALLER=2)
    first, _ = await opened(app, people.alice_token, request_id=1, list_changes=True)
    second, _ = await opened(app, people.alice_token, request_id=2, list_changes=True)
    refused = await listen(app, people.alice_token, request_id=3, list_changes=True)
    assert refused.status == 429
    assert refused.headers["content-type"] == "application/json"
    payload = await refused.json()
    assert payload["id"] == 3
    assert payload["error"]["code"] == -32600
    # Another caller has slots of its own; a closed stream frees one.
    bobs, _ = await opened(app, people.bob_token, request_id=4, list_changes=True)
    await first.disconnect()
    third, _ = await opened(app, people.alice_token, request_id=5, list_changes=True)
    for stream in (second, bobs, third):
        await stream.disconnect()


@pytest.mark.parametrize(
    "notifications",
    [
        OMIT,
        None,
        [],
        "resources",
        {"resourcesListChanged": "yes"},
        {"resourcesListChanged": 1},
        {"toolsListChanged": None},
        {"resourceSubscriptions": "learn://documents/1"},
        {"resourceSubscriptions": [1, 2]},
        {"resourceSubscriptions": [None]},
        {"resourceSubscriptions": {"uri": "learn://documents/1"}},
    ],
)
async def test_malformed_filters(app: Any, people: People, notifications: Any) -> None:
    exchange = Exchange(app, scope("POST", listen_headers(people.alice_token)))
    await exchange.start(listen_body("bad", notifications))
    assert exchange.status == 400
    payload = await exchange.json()
    assert payload["id"] == "bad"
    assert payload["error"]["code"] == INVALID_PARAMS


async def test_listen_without_a_token_is_401_with_a_challenge(app: Any, people: People) -> None:
    stream = await listen(app, None, list_changes=True)
    assert stream.status == 401
    challenge = stream.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert 'resource_metadata="http://127.0.0.1:8000/.well-known/oauth-protected-resource/mcp"' in challenge
    assert "documents:read" in challenge
    await stream.body()


async def test_token_for_another_server_is_401(app: Any, people: People, make_token: Callable[..., str]) -> None:
    token = await in_thread(lambda: make_token(people.alice, resource="http://127.0.0.1:9999/mcp"))
    stream = await listen(app, token, list_changes=True)
    assert stream.status == 401
    await stream.body()


@pytest.mark.parametrize(
    ("headers", "version", "status", "code"),
    [
        ({"mcp_method": None}, V2026_07_28, 400, HEADER_MISMATCH),
        ({"mcp_method": "resources/list"}, V2026_07_28, 400, HEADER_MISMATCH),
        ({"mcp_protocol_version": None}, V2026_07_28, 400, HEADER_MISMATCH),
        ({"mcp_protocol_version": "2025-11-25"}, V2026_07_28, 400, HEADER_MISMATCH),
        ({"mcp_protocol_version": "2099-01-01"}, "2099-01-01", 400, UNSUPPORTED_VERSION),
        ({"mcp_protocol_version": V2025_11_25}, V2025_11_25, 400, UNSUPPORTED_VERSION),
    ],
)
async def test_header_errors(
    app: Any, people: People, headers: dict[str, str | None], version: str, status: int, code: int
) -> None:
    exchange = Exchange(app, scope("POST", listen_headers(people.alice_token, **headers)))
    await exchange.start(listen_body(5, {"resourcesListChanged": True}, version=version))
    assert exchange.status == status
    payload = await exchange.json()
    assert payload["id"] == 5
    assert payload["error"]["code"] == code
    if code == UNSUPPORTED_VERSION:
        assert V2026_07_28 in payload["error"]["data"]["supported"]


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"{",
        b"[]",
        b'{"jsonrpc":"2.0","method":"subscriptions/listen"}',
        b'{"jsonrpc":"2.0","id":1,"result":{}}',
        b"\xff",
    ],
)
async def test_unparseable_listen_requests(app: Any, people: People, body: bytes) -> None:
    exchange = Exchange(app, scope("POST", listen_headers(people.alice_token)))
    await exchange.start(body)
    assert 400 <= exchange.status < 500
    payload = await exchange.json()
    assert payload["error"]["code"] in (-32700, -32600)


async def test_session_subscribe_methods_are_404_in_2026_07_28(app: Any, people: People) -> None:
    for method in ("resources/subscribe", "resources/unsubscribe"):
        body = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": method,
            "params": {"uri": uri(people.alice_docs[0]), "_meta": meta()},
        }
        headers = {
            "mcp-protocol-version": V2026_07_28,
            "mcp-method": method,
            "authorization": f"Bearer {people.alice_token}",
        }
        status, _, payload = await post(app, body, headers)
        assert status == 404
        assert payload["error"]["code"] == METHOD_NOT_FOUND


async def test_listen_refused_when_subscriptions_are_off(app: Any, people: People, settings: Any) -> None:
    set_mcp(settings, SUBSCRIPTIONS=False)
    stream = await listen(app, people.alice_token, list_changes=True)
    assert stream.status == 404
    assert (await stream.json())["error"]["code"] == METHOD_NOT_FOUND


# A client that stops reading --------------------------------------------------------------------------------------


async def test_a_client_that_never_reads_is_ended_and_memory_stays_flat(
    app: Any, people: People, settings: Any
) -> None:
    """The transport stops taking writes (as uvicorn's flow control does when the peer's window is full): the
    stream's queue stays within ``Stream.queue_size`` (past it the stream drops it, to catch up from the log), and
    the stream ends once a write waits past ``STREAM_SEND_TIMEOUT_SECONDS``."""
    set_mcp(settings, STREAM_SEND_TIMEOUT_SECONDS=0.3)
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    await inbox.put(
        {"type": "http.request", "body": listen_body(1, {"resourcesListChanged": True}), "more_body": False}
    )
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and len(sent) >= 3:
            await asyncio.Event().wait()  # the peer never reads again

    task = asyncio.ensure_future(app(scope("POST", listen_headers(people.alice_token)), inbox.get, send))
    try:
        await until(lambda: len(sent) >= 2, 10, "the acknowledgement")
        assert sent[0]["status"] == 200
        assert ACKNOWLEDGED.encode() in sent[1]["body"]
        [stream] = [stream for stream in list(streams._streams) if not stream.released]
        for _ in range(5):
            await in_thread(lambda: [notify_resource_list_changed() for _ in range(1000)])
            assert len(stream.queue) <= stream.queue_size
        await asyncio.wait_for(task, 3)  # ended: the write timed out
    finally:
        task.cancel()
    assert dict(streams._open_streams) == {}
    assert ("l", "") not in (await fanout.get_hub()).members


# Sessions of 2025-11-25 ---------------------------------------------------------------------------------------------


def session_headers(token: str | None, session: str | None = None) -> dict[str, str]:
    headers = {"mcp-protocol-version": V2025_11_25}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    if session is not None:
        headers["mcp-session-id"] = session
    return headers


async def new_session(app: Any, token: str, **headers: str) -> str:
    body = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": V2025_11_25,
            "capabilities": {},
            "clientInfo": {"name": "pytest", "version": "0"},
        },
    }
    extra = {name.replace("_", "-"): value for name, value in headers.items()}
    status, answered, payload = await post(app, body, {"authorization": f"Bearer {token}", **extra})
    assert status == 200, payload
    assert payload["result"]["capabilities"]["resources"] == {"subscribe": True, "listChanged": True}
    return answered["mcp-session-id"]


async def open_session_stream(app: Any, token: str | None, session: str | None = None) -> Exchange:
    if session is None:
        assert token is not None
        session = await new_session(app, token)
    exchange = await Exchange(
        app, scope("GET", {**session_headers(token, session), "accept": "text/event-stream"})
    ).start()
    assert exchange.status == 200, await exchange.body()
    assert exchange.headers["content-type"] == "text/event-stream"
    assert exchange.headers["mcp-session-id"] == session
    return exchange


async def session_call(app: Any, token: str | None, session: str, method: str, **params: Any) -> tuple[int, Any]:
    body = {"jsonrpc": "2.0", "id": 11, "method": method, "params": params}
    status, _, payload = await post(app, body, session_headers(token, session))
    return status, payload


async def test_session_subscribe_updates_on_the_session_stream(app: Any, people: People) -> None:
    doc, other = people.alice_docs[0], people.alice_docs[1]
    session = await new_session(app, people.alice_token)
    stream = await open_session_stream(app, people.alice_token, session)
    assert await session_call(app, people.alice_token, session, "resources/subscribe", uri=uri(doc)) == (
        200,
        {"jsonrpc": "2.0", "id": 11, "result": {}},
    )
    await in_thread(touch, other)  # not subscribed
    await in_thread(touch, doc)
    assert await stream.event() == updated(uri(doc))  # no subscriptionId in 2025-11-25
    await in_thread(notify_resource_list_changed)
    assert await stream.event() == list_changed()
    await stream.disconnect()


async def test_session_subscriptions_made_before_the_stream_opens(app: Any, people: People) -> None:
    doc = people.alice_docs[2]
    session = await new_session(app, people.alice_token)
    status, _ = await session_call(app, people.alice_token, session, "resources/subscribe", uri=uri(doc))
    assert status == 200
    stream = await open_session_stream(app, people.alice_token, session)
    await in_thread(touch, doc)
    assert await stream.event() == updated(uri(doc))
    await stream.disconnect()


async def test_session_unsubscribe_stops_updates(app: Any, people: People) -> None:
    doc, other = people.alice_docs[0], people.alice_docs[1]
    session = await new_session(app, people.alice_token)
    stream = await open_session_stream(app, people.alice_token, session)
    for target in (doc, other):
        status, _ = await session_call(app, people.alice_token, session, "resources/subscribe", uri=uri(target))
        assert status == 200
    assert await session_call(app, people.alice_token, session, "resources/unsubscribe", uri=uri(doc)) == (
        200,
        {"jsonrpc": "2.0", "id": 11, "result": {}},
    )
    await in_thread(touch, doc)
    await in_thread(touch, other)
    assert await stream.event() == updated(uri(other))
    # A stream opened later does not get the unsubscribed URI either.
    await stream.disconnect()
    later = await open_session_stream(app, people.alice_token, session)
    await in_thread(touch, doc)
    await in_thread(touch, other)
    assert await later.event() == updated(uri(other))
    await later.disconnect()


async def test_a_second_get_takes_over(app: Any, people: People) -> None:
    doc = people.alice_docs[0]
    session = await new_session(app, people.alice_token)
    status, _ = await session_call(app, people.alice_token, session, "resources/subscribe", uri=uri(doc))
    assert status == 200
    older = await open_session_stream(app, people.alice_token, session)
    newer = await open_session_stream(app, people.alice_token, session)
    assert await older.until_closed(5) == []  # the older one ended
    await older.finished()
    await in_thread(touch, doc)
    assert await newer.event() == updated(uri(doc))
    await newer.disconnect()


async def test_another_users_session_is_404(app: Any, people: People) -> None:
    session = await new_session(app, people.alice_token)
    stream = await open_session_stream(app, people.alice_token, session)
    for token in (people.bob_token, None):
        get = await Exchange(app, scope("GET", session_headers(token, session))).start()
        assert get.status == 404 if token else get.status in (401, 404)
        await get.body()
    status, payload = await session_call(
        app, people.bob_token, session, "resources/subscribe", uri=uri(people.bob_docs[0])
    )
    assert status == 404
    assert payload["error"]["code"] == -32600
    # Nothing about bob's document reached alice's stream; alice's own subscription still works.
    await in_thread(touch, people.bob_docs[0])
    status, _ = await session_call(
        app, people.alice_token, session, "resources/subscribe", uri=uri(people.alice_docs[0])
    )
    await in_thread(touch, people.alice_docs[0])
    assert await stream.event() == updated(uri(people.alice_docs[0]))
    await stream.disconnect()


async def test_session_subscribe_to_an_unreadable_uri_is_refused(app: Any, people: People) -> None:
    session = await new_session(app, people.alice_token)
    stream = await open_session_stream(app, people.alice_token, session)
    status, payload = await session_call(
        app, people.alice_token, session, "resources/subscribe", uri=uri(people.bob_docs[0])
    )
    assert status == 200
    assert payload["error"]["code"] == -32002
    await in_thread(touch, people.bob_docs[0])
    await in_thread(notify_resource_list_changed)
    assert await stream.event() == list_changed()
    await stream.disconnect()


async def test_delete_of_the_session_ends_its_stream(app: Any, people: People) -> None:
    session = await new_session(app, people.alice_token)
    stream = await open_session_stream(app, people.alice_token, session)
    exchange = await Exchange(app, scope("DELETE", session_headers(people.alice_token, session))).start()
    assert exchange.status == 204
    await exchange.body()
    assert await stream.until_closed(5) == []
    await stream.finished()
    gone = await Exchange(app, scope("GET", session_headers(people.alice_token, session))).start()
    assert gone.status == 404
    await gone.body()


async def test_an_anonymous_sessions_stream_ends_when_a_token_claims_the_session(app: Any, people: People) -> None:
    """From anonymous to one caller (issue 26): a GET stream opened anonymously keeps the anonymous caller's access,
    so it ends when alice's token claims the session; opened again with her token, it notifies her records. Anyone
    else holding the session id (the stream's, say) gets nothing of hers."""
    body = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": V2025_11_25,
            "capabilities": {},
            "clientInfo": {"name": "pytest", "version": "0"},
        },
    }
    status, answered, _ = await post(app, body, {})
    assert status == 200
    session = answered["mcp-session-id"]
    anonymous = await open_session_stream(app, None, session)
    doc = people.alice_docs[0]
    status, payload = await session_call(app, None, session, "resources/subscribe", uri=uri(doc))
    assert status == 401  # what needs a token asks for it, in the session
    status, payload = await session_call(app, people.alice_token, session, "resources/subscribe", uri=uri(doc))
    assert (status, payload["result"]) == (200, {})
    assert await anonymous.until_closed(5) == []
    await anonymous.finished()
    refused = await Exchange(app, scope("GET", session_headers(None, session))).start()
    assert refused.status == 404
    await refused.body()
    alices = await open_session_stream(app, people.alice_token, session)
    await in_thread(touch, doc)
    assert await alices.event() == updated(uri(doc))
    await alices.disconnect()


async def test_get_without_a_session_is_405(app: Any, people: People) -> None:
    exchange = await Exchange(app, scope("GET", {"authorization": f"Bearer {people.alice_token}"})).start()
    assert exchange.status == 405
    await exchange.body()


async def test_a_takeover_is_not_refused_by_the_stream_limit(app: Any, people: People, settings: Any) -> None:
    """A client reconnecting its session's GET stream replaces the old one, even at STREAMS_PER_CALLER."""
    set_mcp(settings, STREAMS_PER_CALLER=1)
    session = await new_session(app, people.alice_token)
    older = await open_session_stream(app, people.alice_token, session)
    newer = await open_session_stream(app, people.alice_token, session)
    assert await older.until_closed(5) == []
    await older.finished()
    await in_thread(notify_resource_list_changed)
    assert await newer.event() == list_changed()
    # A stream of another session still counts: the limit holds.
    refused = await Exchange(
        app, scope("GET", session_headers(people.alice_token, await new_session(app, people.alice_token)))
    ).start()
    assert refused.status == 429
    await refused.body()
    await newer.disconnect()


# The channel layer -------------------------------------------------------------------------------------------------


async def test_a_stream_keeps_receiving_days_later(
    app: Any, people: People, settings: Any, monkeypatch: pytest.MonkeyPatch, make_token: Callable[..., str]
) -> None:
    """Nothing a stream holds expires (the log has no membership to renew): three days on, it still receives."""
    set_mcp(settings, STREAM_KEEPALIVE_SECONDS=0.05)  # the stream wakes often to look at the clock
    token = await in_thread(lambda: make_token(people.alice, expires_in=10 * 86400))
    clock = Clock().install(monkeypatch)
    doc = people.alice_docs[0]
    stream, _ = await opened(app, token, uris=[uri(doc)], list_changes=True)
    for _ in range(6):
        clock.advance(43200)
        await asyncio.sleep(0.1)
    await in_thread(touch, doc)
    assert await stream.event() == updated(uri(doc), 1)
    await in_thread(notify_resource_list_changed)
    assert await stream.event() == list_changed(1)
    await stream.disconnect()


async def test_an_unreachable_log_is_a_clean_error(app: Any, people: People, settings: Any) -> None:
    set_mcp(settings, DELIVERY_URL="redis://127.0.0.1:1/0")
    for request_id in (1, 2):
        stream = await listen(app, people.alice_token, request_id=request_id, list_changes=True)
        assert stream.status != 500
        payload = await stream.json()
        assert payload["id"] == request_id
        assert payload["error"]["code"] == -32603
        await stream.finished()
    assert dict(streams._open_streams) == {}
    # Publishing into an unreachable log is logged, never raised.
    await in_thread(notify_resource_list_changed)
    await in_thread(touch, people.alice_docs[0])


# Shutdown through the ASGI lifespan protocol ----------------------------------------------------------------------


async def test_lifespan_shutdown_ends_every_stream_gracefully(app: Any, people: People) -> None:
    lifespan = ApplicationCommunicator(app, {"type": "lifespan", "asgi": {"version": "3.0"}})
    await lifespan.send_input({"type": "lifespan.startup"})
    assert await lifespan.receive_output(5) == {"type": "lifespan.startup.complete"}
    first, _ = await opened(app, people.alice_token, request_id=1, list_changes=True)
    second, _ = await opened(app, people.bob_token, request_id="two", uris=[uri(people.bob_docs[0])])
    session_stream = await open_session_stream(app, people.alice_token)
    await lifespan.send_input({"type": "lifespan.shutdown"})
    assert await lifespan.receive_output(10) == {"type": "lifespan.shutdown.complete"}
    for stream, request_id in ((first, 1), (second, "two")):
        assert await stream.until_closed(1) == [final_result(request_id)]
        await stream.finished()
    assert await session_stream.until_closed(1) == []
    await session_stream.finished()
    await lifespan.wait(5)
    assert dict(streams._open_streams) == {}


# No thread per stream ----------------------------------------------------------------------------------------------


async def test_open_streams_hold_no_thread(app: Any, people: People, settings: Any) -> None:
    """With one worker thread for the whole event loop, 220 streams stay open at once and are all notified; the
    process's thread count does not grow with them (counted once the process has published: its one thread for
    the publishers' fences is then running)."""
    set_mcp(settings, STREAMS_PER_CALLER=1000)
    loop = asyncio.get_running_loop()
    only = ThreadPoolExecutor(1, thread_name_prefix="only-worker")
    loop.set_default_executor(only)  # where MCPEndpoint checks each listen request, and where in_thread runs
    open_streams: list[Exchange] = []
    try:
        for request_id in range(20):
            open_streams.append((await opened(app, people.alice_token, request_id=request_id, list_changes=True))[0])
        await in_thread(notify_resource_list_changed)
        for request_id, stream in enumerate(open_streams):
            assert await stream.event() == list_changed(request_id)
        threads = threading.active_count()
        for request_id in range(20, 220):
            open_streams.append((await opened(app, people.alice_token, request_id=request_id, list_changes=True))[0])
        assert threading.active_count() <= threads
        assert sum(streams._open_streams.values()) == 220
        await in_thread(notify_resource_list_changed)
        for request_id, stream in enumerate(open_streams):
            assert await stream.event() == list_changed(request_id)
        assert threading.active_count() <= threads
    finally:
        for stream in open_streams:
            await stream.disconnect()
        loop.set_default_executor(ThreadPoolExecutor())
        only.shutdown(wait=False)


# Never a 500 ---------------------------------------------------------------------------------------------------------


async def test_no_bad_request_is_ever_a_500(app: Any, people: People, settings: Any) -> None:
    set_mcp(settings, URIS_PER_LISTEN=5)
    token = people.alice_token
    session = await new_session(app, token)
    long_uri = "learn://documents/" + "9" * 5000
    cases: list[tuple[str, dict[str, str], bytes]] = [
        ("POST", listen_headers(token), listen_body(1, {"resourceSubscriptions": [long_uri]})),
        ("POST", listen_headers(token), listen_body(1, {"resourceSubscriptions": ["\udcff"]})),
        ("POST", listen_headers(token), listen_body(1, {"resourceSubscriptions": ["learn://documents/\x00"]})),
        ("POST", listen_headers(token), listen_body({"nested": "id"}, {"resourcesListChanged": True})),
        ("POST", listen_headers(token), listen_body(1.5, {"resourcesListChanged": True})),
        ("POST", listen_headers(token), listen_body(None, {"resourcesListChanged": True})),
        ("POST", listen_headers(token), b'{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":[]}'),
        ("POST", listen_headers(token), b'{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen"}'),
        ("POST", listen_headers("not-a-token"), listen_body(1, {"resourcesListChanged": True})),
        ("POST", listen_headers(token, authorization="Basic abc"), listen_body(1, {"resourcesListChanged": True})),
        ("POST", listen_headers(token, origin="http://evil.example"), listen_body(1, {"resourcesListChanged": True})),
        ("POST", {**listen_headers(token), "mcp-session-id": session}, listen_body(1, {"resourcesListChanged": True})),
        ("POST", listen_headers(token), b"x" * (2 * 1024 * 1024)),
        ("GET", session_headers(token, "\x01bad"), b""),
        ("GET", session_headers(token, "x" * 300), b""),
        ("GET", session_headers("not-a-token", session), b""),
        ("GET", {**session_headers(token, session), "origin": "http://evil.example"}, b""),
        ("DELETE", session_headers(token, "unknown"), b""),
        ("DELETE", session_headers(people.bob_token, session), b""),
    ]
    for method, headers, body in cases:
        exchange = await Exchange(app, scope(method, headers)).start(body)
        assert exchange.status < 500, (method, headers, body[:100], exchange.status)
        if exchange.status == 200 and exchange.headers.get("content-type") == "text/event-stream":
            await exchange.disconnect()
        else:
            await exchange.body()
    # Bob's DELETE did not end alice's session.
    stream = await open_session_stream(app, token, session)
    await stream.disconnect()


async def test_concurrent_session_subscribes_are_all_kept(app: Any, people: People) -> None:
    """``resources/subscribe`` requests of one session in parallel: none of them is lost (stored or streamed)."""
    docs = await in_thread(
        lambda: [Document.objects.create(owner=people.alice, title=f"C{i}", body="c") for i in range(12)]
    )
    session = await new_session(app, people.alice_token)
    replies = await asyncio.gather(
        *(session_call(app, people.alice_token, session, "resources/subscribe", uri=uri(doc)) for doc in docs)
    )
    assert all(status == 200 and "result" in payload for status, payload in replies), replies
    stream = await open_session_stream(app, people.alice_token, session)
    for doc in docs:  # one at a time: SQLite's shared in-memory test database locks tables under concurrent use
        await in_thread(touch, doc)
        assert await stream.event() == updated(uri(doc))
    await stream.disconnect()


# The URLconf's view prepares the streams -----------------------------------------------------------------------------


class RefusingServer(MCPServer):
    """The default registry's server, refusing the URIs in ``refused`` and recording each URI it checks."""

    def __init__(self, refused: set[str]) -> None:
        super().__init__(registry)
        self.refused = refused
        self.checked: list[str] = []

    def may_read(self, uri: str, ctx: Any) -> bool:
        self.checked.append(uri)
        return uri not in self.refused and super().may_read(uri, ctx)


class DictSessionStore(SessionStore):
    """Sessions kept in a dict of its own, not in ``SESSION_CACHE``; each lookup is recorded."""

    def __init__(self) -> None:
        super().__init__()
        self.sessions: dict[str, Session] = {}
        self.looked_up: list[str] = []

    def create(self, principal: Principal, protocol_version: str) -> Session:
        session = Session(secrets.token_urlsafe(32), owner_of(principal), protocol_version)
        self.sessions[session.id] = session
        return session

    def get(self, session_id: str, principal: Principal) -> Session | None:
        self.looked_up.append(session_id)
        session = self.sessions.get(session_id)
        return session if session is not None and session.owner == owner_of(principal) else None

    def end(self, session: Session) -> None:
        self.sessions.pop(session.id, None)


class GatedView(MCPView):
    """A view of the project's own: its ``precheck`` refuses every request without ``X-Gate: open``."""

    def precheck(self, request: HttpRequest) -> HttpResponse | None:
        if request.headers.get("X-Gate") != "open":
            return error_response(InvalidRequest("Gate closed", request_id=None), 403)
        return super().precheck(request)


@pytest.fixture(params=["wsgi-handler", "asgi-handler"])
def endpoint(request: pytest.FixtureRequest) -> MCPEndpoint:
    """``MCPEndpoint.as_asgi()``, given no server: through Django's WSGI handler (the default) or its ASGI one."""
    if request.param == "wsgi-handler":
        return MCPEndpoint.as_asgi()
    from testproject.asgi import django_asgi_app

    return MCPEndpoint.as_asgi(django_asgi_app)


async def test_listen_is_checked_by_the_urlconf_views_server(
    endpoint: MCPEndpoint, people: People, settings: Any
) -> None:
    mine, refused = uri(people.alice_docs[0]), uri(people.alice_docs[1])
    server = RefusingServer({refused})
    settings.ROOT_URLCONF = urlconf(path("mcp", MCPView.as_view(server=server)))
    stream, ack = await opened(endpoint, people.alice_token, uris=[mine, refused])
    assert ack["params"]["notifications"]["resourceSubscriptions"] == [mine]
    assert server.checked == [mine, refused]
    await stream.disconnect()


async def test_a_session_stream_finds_its_session_in_the_urlconf_views_store(
    endpoint: MCPEndpoint, people: People, settings: Any
) -> None:
    store = DictSessionStore()
    settings.ROOT_URLCONF = urlconf(path("mcp", MCPView.as_view(session_store=store)))
    session = await new_session(endpoint, people.alice_token)
    assert list(store.sessions) == [session]
    stream = await open_session_stream(endpoint, people.alice_token, session)
    assert store.looked_up == [session]
    doc = people.alice_docs[0]
    assert (await session_call(endpoint, people.alice_token, session, "resources/subscribe", uri=uri(doc)))[0] == 200
    await in_thread(touch, doc)
    assert await stream.event() == updated(uri(doc))
    await stream.disconnect()


async def test_the_urlconf_views_hooks_prepare_the_streams(
    endpoint: MCPEndpoint, people: People, settings: Any
) -> None:
    settings.ROOT_URLCONF = urlconf(path("mcp", GatedView.as_view()))
    refused = await listen(endpoint, people.alice_token, list_changes=True)
    assert refused.status == 403
    assert (await refused.json())["error"]["message"] == "Gate closed"
    session = await new_session(endpoint, people.alice_token, x_gate="open")
    get = await Exchange(endpoint, scope("GET", session_headers(people.alice_token, session))).start()
    assert get.status == 403
    await get.body()
    stream, _ = await opened(endpoint, people.alice_token, list_changes=True, x_gate="open")
    await stream.disconnect()


def test_the_endpoint_refuses_a_server_or_store_that_only_its_streams_would_use() -> None:
    """With the middleware on, the URLconf's view serves every request and prepares every stream: a server or store
    given to the endpoint would apply to its streams alone (another server than the one answering the same caller's
    other requests, or sessions looked up where they were not created), so it is refused at start-up."""
    with pytest.raises(ImproperlyConfigured, match=r"server only with middleware=False.*MCPView\.as_view"):
        MCPEndpoint.as_asgi(server=RefusingServer(set()))
    with pytest.raises(ImproperlyConfigured, match="server and session_store only with middleware=False"):
        MCPEndpoint.as_asgi(server=RefusingServer(set()), session_store=DictSessionStore())
    MCPEndpoint.as_asgi(middleware=False, server=RefusingServer(set()), session_store=DictSessionStore())


async def test_an_endpoint_without_middleware_uses_the_session_store_it_is_given(people: People) -> None:
    store = DictSessionStore()
    endpoint = MCPEndpoint.as_asgi(middleware=False, session_store=store)
    session = await new_session(endpoint, people.alice_token)
    assert list(store.sessions) == [session]
    stream = await open_session_stream(endpoint, people.alice_token, session)
    assert store.looked_up == [session]
    await stream.disconnect()


async def test_one_endpoint_at_two_paths_prepares_each_stream_with_the_view_of_its_path(
    people: People, settings: Any
) -> None:
    """resources.md's second endpoint under ASGI: the same ``MCPEndpoint`` routed at both paths, each stream prepared
    by the URLconf's view for its own path (here, the second path's server refuses a URI)."""
    from channels.routing import URLRouter

    mine, refused = uri(people.alice_docs[0]), uri(people.alice_docs[1])
    internal = RefusingServer({refused})
    settings.ROOT_URLCONF = urlconf(
        path("mcp", MCPView.as_view()), path("mcp-internal", MCPView.as_view(server=internal))
    )
    endpoint = MCPEndpoint.as_asgi()
    app = URLRouter([path("mcp", endpoint), path("mcp-internal", endpoint)])  # type: ignore[arg-type]
    for at, honoured in (("/mcp", [mine, refused]), ("/mcp-internal", [mine])):
        stream = await Exchange(app, scope("POST", listen_headers(people.alice_token), path=at)).start(
            listen_body(1, {"resourceSubscriptions": [mine, refused]})
        )
        assert stream.status == 200, await stream.body()
        ack = await stream.event()
        assert ack["params"]["notifications"]["resourceSubscriptions"] == honoured, at
        await stream.disconnect()
    assert internal.checked == [mine, refused]


# The server's access hooks decide every update, not only the acknowledgement -----------------------------------------


class HidingServer(RefusingServer):
    """The default registry's server, whose ``check_readable`` answers not found for the URIs in ``refused``
    (its ``may_read`` is the base one: only ``check_readable`` is overridden)."""

    may_read = MCPServer.may_read

    def check_readable(self, uri: str, ctx: Any) -> None:
        self.checked.append(uri)
        if uri in self.refused:
            raise self.not_found(uri, ctx)
        super().check_readable(uri, ctx)


async def listening(endpoint: MCPEndpoint, tokens: list[str], uris: list[str]) -> list[Exchange]:
    """One listen stream per token on ``uris`` (request ids 1, 2, ...), each acknowledging all of them."""
    opened_streams = []
    for request_id, token in enumerate(tokens, start=1):
        stream, ack = await opened(endpoint, token, request_id=request_id, uris=uris)
        assert ack["params"]["notifications"]["resourceSubscriptions"] == uris
        opened_streams.append(stream)
    return opened_streams


async def revoke_after_the_ack(
    server: RefusingServer,
    refuse: set[str],
    people: People,
    make_token: Callable[..., str],
    settings: Any,
    callers: int,
) -> None:
    """alice listens to two of her documents with ``callers`` tokens (one caller each); once every stream has
    acknowledged both, ``server`` starts refusing the first (added to ``refuse``) and both are updated: each stream
    receives the second's update only, and the server's hook was asked once per caller."""
    revoked, kept = uri(people.alice_docs[0]), uri(people.alice_docs[1])
    settings.ROOT_URLCONF = urlconf(path("mcp", MCPView.as_view(server=server)))
    tokens = [people.alice_token, *[await in_thread(make_token, people.alice) for _ in range(callers - 1)]]
    streams_opened = await listening(MCPEndpoint.as_asgi(), tokens, [revoked, kept])
    refuse.add(revoked)
    server.checked.clear()
    await in_thread(notify_resource_updated, revoked)
    await in_thread(notify_resource_updated, kept)
    for request_id, stream in enumerate(streams_opened, start=1):
        # The revoked URI's update was published first: had it come, it would be the next message.
        assert await stream.event() == updated(kept, request_id)
    assert server.checked.count(revoked) == callers
    for stream in streams_opened:
        await stream.disconnect()


@pytest.mark.parametrize("callers", [1, 2], ids=["one-caller", "two-callers"])
async def test_an_overridden_may_read_decides_every_update_as_it_decided_the_ack(
    people: People, make_token: Callable[..., str], settings: Any, callers: int
) -> None:
    """A server overriding ``may_read`` that refuses a URI after the stream acknowledged it (access revoked): no
    further update of that URI reaches the stream. Before, updates were decided by ``check_readable`` for one caller,
    and for two callers of the owner-only documents in one query (``get_readers``): the override was never asked."""
    server = RefusingServer(set())
    await revoke_after_the_ack(server, server.refused, people, make_token, settings, callers)


@pytest.mark.parametrize("callers", [1, 2], ids=["one-caller", "two-callers"])
async def test_an_overridden_check_readable_decides_every_update(
    people: People, make_token: Callable[..., str], settings: Any, callers: int
) -> None:
    """The same with ``check_readable`` overridden: two callers of the owner-only documents were decided in one query
    that bypassed it."""
    server = HidingServer(set())
    await revoke_after_the_ack(server, server.refused, people, make_token, settings, callers)


# Encoding once per event ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("subscription_id", [7, 'a"b\u00e9\\', None, ["x", 1.5]])
@pytest.mark.parametrize("session_id", [None, "s"])
def test_an_update_encoded_once_for_all_streams_is_each_streams_own_notification(
    subscription_id: Any, session_id: str | None
) -> None:
    """An ``updated`` frame is encoded once per event and the listen's subscription id spliced in: the bytes are
    those the stream's own encoding writes, for any URI and id (quotes, non-ASCII, a lone surrogate)."""
    uri = 'x://doc/"\u00e9\\\ud800'
    plan = streams.StreamPlan(
        owner="o",
        uris={uri},
        list_changed=False,
        check=lambda _uri: True,
        subscription_id=subscription_id,
        session_id=session_id,
    )
    stream = streams.Stream(plan)
    event = streams.Event("1733400000000-12", "updated", uri)
    expected = stream.notification("notifications/resources/updated", {"uri": uri}, event.id)
    assert stream._updated(event, True) == expected
    assert json.loads(expected.split(b"data: ", 1)[1])["params"]["uri"] == uri


def test_a_streams_response_serves_its_own_bytes_unless_a_middleware_replaced_them() -> None:
    """Served as they are made (no wrapper per chunk), unless a middleware set its own iterator: then that one."""
    plan = streams.StreamPlan(owner="o", uris=set(), list_changed=True, check=lambda _uri: True, subscription_id=1)
    response = streams.EventStreamResponse(streams.Stream(plan))
    assert response.streaming_content is response.events

    async def lowered(content: Any) -> Any:
        async for chunk in content:
            yield chunk.lower()

    replaced = lowered(response.streaming_content)
    response.streaming_content = replaced
    assert response.streaming_content is not response.events
    assert response.is_async
