"""Hostile input through the ASGI application in process (``testproject.asgi.application``), a smaller budget.

What only the ASGI deployment serves is attacked here: ``subscriptions/listen`` with generated filters (URIs of
both users, mutated, other schemes, garbage; flags of every type), 2025-11-25 ``resources/subscribe`` and
``unsubscribe`` with generated URIs, a session's GET stream with generated session ids, and generated bodies and
headers arriving in chunks through ``MCPEndpoint`` (which reads and bounds the body itself). Every answer keeps the
rule of tests/hostile_support.py; a stream's acknowledgement honours only URIs the caller may read (its own
records, public resources), never another user's; every stream opened is closed again and nothing stays counted.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcp_resources.transport import streams
from mcp_resources.transport.sessions import session_cache
from testproject.library.models import Document, Note
from tests.conftest import RESOURCE
from tests.hostile_support import (
    CLIENT_CAPABILITIES_META,
    OWNER_MARKERS,
    PROTOCOL_VERSION_META,
    SESSION,
    STATELESS,
    UNKNOWN,
    Answer,
    ErrorLog,
    Headers,
    budget,
    check_answer,
    correct_headers,
    encode,
    error_log,
    messages,
    mutated_headers,
    strict_values,
    uris,
)
from tests.stream_support import Exchange, application, scope

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore:Generating overly large repr"),
]

ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
PUBLIC_URIS = ["test://static-text", "test://watched-resource", "test://template/1/data"]


@dataclass(repr=False)
class World:
    loop: asyncio.AbstractEventLoop
    log: ErrorLog
    tokens: dict[str, str]
    uris: dict[str, list[str]]
    sessions: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        return "World(alice, bob, their records, tokens and sessions)"

    @property
    def all_uris(self) -> list[str]:
        return [uri for owned in self.uris.values() for uri in owned] + PUBLIC_URIS

    def run(self, coroutine: Any) -> Any:
        return self.loop.run_until_complete(asyncio.wait_for(coroutine, 60))


def header_pairs(headers: Headers) -> dict[str, str]:
    """The headers as the ASGI scope carries them (latin-1; ``Host`` defaults to the demo's)."""
    return {name.lower(): value for name, value in headers.present().items()}


async def exchange(
    world: World, body: bytes, headers: Headers, *, method: str = "POST", sent_id: Any = UNKNOWN, chunks: int = 1
) -> tuple[Answer, dict[str, Any] | None]:
    """One request through the ASGI application; a stream's first message is read, then the client leaves.

    Returns the answer (for a stream: its status and headers) and the stream's first message, if any.
    """
    request = Exchange(application(), scope(method, header_pairs(headers)))
    size = max(1, -(-len(body) // chunks))
    parts = [body[i : i + size] for i in range(0, len(body), size)] or [b""]
    await request.start(chunks=parts, timeout=30)
    answer = Answer(request.status, dict(request.headers), b"")
    first = None
    if request.headers.get("content-type") == "text/event-stream":
        assert request.status == 200, request.headers
        if method == "POST":  # a listen stream (a session's GET stream sends nothing first)
            first = await request.event(timeout=30)
        await request.disconnect(timeout=30)
    else:
        answer.body = await request.body(timeout=30)
        await request.finished(timeout=30)
        sent = body + "\n".join(f"{k}: {v}" for k, v in headers.present().items()).encode("utf-8", "surrogatepass")
        check_answer(answer, sent, caller=headers.caller, sent_id=sent_id, method=method)
    world.log.check()
    return answer, first


def check_acknowledgement(world: World, first: dict[str, Any] | None, caller: str | None, request_id: Any) -> None:
    """A listen stream starts with its acknowledgement, which honours only URIs ``caller`` may read."""
    assert first is not None
    assert first["method"] == ACKNOWLEDGED, first
    assert first["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == request_id, first
    honoured = first["params"]["notifications"]
    for uri in honoured.get("resourceSubscriptions", []):
        assert uri in PUBLIC_URIS or (caller is not None and uri.startswith("learn:")), (uri, caller)
        for owner, owned in world.uris.items():
            if owner != caller:
                assert uri not in owned, f"{caller} subscribed to {owner}'s {uri}"
    for owner, marker in OWNER_MARKERS.items():
        if owner != caller:
            assert marker.decode() not in json.dumps(first)


@pytest.fixture
def world(alice: Any, bob: Any, make_token: Any, settings: Any) -> Iterator[World]:
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "RESOURCE_URI": RESOURCE, "STREAM_KEEPALIVE_SECONDS": 30}
    session_cache().clear()  # generated requests with a token claim the anonymous session: start with none stored
    owned: dict[str, list[str]] = {}
    for user in (alice, bob):
        marker = OWNER_MARKERS[user.username].decode()
        docs = [Document.objects.create(owner=user, title=f"{marker} {i}", body=f"{marker} {i}") for i in range(2)]
        note = Note.objects.create(owner=user, title=f"{marker} note", text=f"{marker} text")
        owned[user.username] = [f"learn://documents/{d.pk}" for d in docs] + [f"learn://notes/{note.pk}"]
    loop = asyncio.new_event_loop()
    try:
        with error_log() as log:
            world = World(loop, log, {"alice": make_token(alice), "bob": make_token(bob)}, owned)
            for caller in ("alice", "bob", None):
                session = world.run(initialize(world, caller))
                if session is not None:
                    world.sessions[caller or "anonymous"] = session
            yield world
        assert dict(streams._open_streams) == {}, "a stream is still counted"
    finally:
        loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()


async def initialize(world: World, caller: str | None) -> str | None:
    body = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": SESSION, "capabilities": {}, "clientInfo": {"name": "hostile", "version": "0"}},
    }
    headers: dict[str, str | None] = {"Content-Type": "application/json"}
    if caller is not None:
        headers["Authorization"] = f"Bearer {world.tokens[caller]}"
    answer, _ = await exchange(world, json.dumps(body).encode(), Headers(headers, caller), sent_id=0)
    assert answer.status == 200, answer
    return answer.headers["mcp-session-id"]


def filters(world: World) -> st.SearchStrategy[Any]:
    """``subscriptions/listen`` filters: URIs of both users (mutated too), flags of every type, strays."""
    uri_lists = st.one_of(
        st.lists(uris(world.all_uris), max_size=6),
        st.lists(st.sampled_from(world.all_uris), min_size=99, max_size=102),
        strict_values,
    )
    flags = st.one_of(st.booleans(), strict_values)
    return st.one_of(
        st.fixed_dictionaries(
            {},
            optional={
                "resourceSubscriptions": uri_lists,
                "resourcesListChanged": flags,
                "toolsListChanged": flags,
                "promptsListChanged": flags,
                "RESOURCESUBSCRIPTIONS": uri_lists,
            },
        ),
        strict_values,
    )


# subscriptions/listen ----------------------------------------------------------------------------------------------


@budget(50)
@given(data=st.data(), caller=st.sampled_from(["alice", "bob", None]))
def test_generated_listen_filters_honour_only_what_the_caller_may_read(
    world: World, data: st.DataObject, caller: str | None
) -> None:
    request_id = data.draw(st.one_of(st.integers(0, 2**40), st.text(max_size=10)))
    params = {"_meta": {PROTOCOL_VERSION_META: STATELESS, CLIENT_CAPABILITIES_META: {}}}
    notifications = data.draw(filters(world))
    if data.draw(st.integers(0, 9)):
        params["notifications"] = notifications
    body = encode({"jsonrpc": "2.0", "id": request_id, "method": "subscriptions/listen", "params": params})
    headers = correct_headers("subscriptions/listen", params, era=STATELESS)
    headers["Accept"] = "text/event-stream"
    if caller is not None:
        headers["Authorization"] = f"Bearer {world.tokens[caller]}"
    _, first = world.run(exchange(world, body, Headers(headers, caller), sent_id=request_id))
    if first is not None:
        check_acknowledgement(world, first, caller, request_id)


@budget(50)
@given(data=st.data())
def test_generated_listen_requests_with_mutated_messages_and_headers(world: World, data: st.DataObject) -> None:
    def params_for(method: Any) -> st.SearchStrategy[Any]:
        return st.fixed_dictionaries(
            {"_meta": st.just({PROTOCOL_VERSION_META: STATELESS, CLIENT_CAPABILITIES_META: {}})},
            optional={"notifications": filters(world)},
        )

    message = data.draw(messages(params_for, method_strategy=st.just("subscriptions/listen")))
    base = correct_headers("subscriptions/listen", message.params, era=STATELESS)
    # MCPEndpoint routes on the Mcp-Method header: a listen header with any body.
    base["Mcp-Method"] = "subscriptions/listen"
    headers = data.draw(mutated_headers(base, world.tokens))
    body = message.body(ascii_only=data.draw(st.booleans()))
    _, first = world.run(exchange(world, body, headers, sent_id=message.sent_id, chunks=data.draw(st.integers(1, 4))))
    if first is not None:
        check_acknowledgement(world, first, headers.caller, message.sent_id)


# Sessions: subscribe, unsubscribe, the GET stream ------------------------------------------------------------------


@budget(50)
@given(
    data=st.data(),
    method=st.sampled_from(["resources/subscribe", "resources/unsubscribe", "resources/read"]),
    caller=st.sampled_from(["alice", "bob", None]),
)
def test_generated_uris_in_session_subscriptions(
    world: World, data: st.DataObject, method: str, caller: str | None
) -> None:
    uri = data.draw(uris(world.all_uris))
    body = encode({"jsonrpc": "2.0", "id": 3, "method": method, "params": {"uri": uri}})
    headers = correct_headers(method, {}, era=SESSION, session=world.sessions.get(caller or "anonymous"))
    if caller is not None:
        headers["Authorization"] = f"Bearer {world.tokens[caller]}"
    answer, _ = world.run(exchange(world, body, Headers(headers, caller), sent_id=3))
    payload = answer.json()
    if method == "resources/subscribe" and "result" in payload and isinstance(uri, str):
        for owner, owned in world.uris.items():
            assert owner == caller or uri not in owned, f"{caller} subscribed to {owner}'s {uri}"


@budget(30)
@given(data=st.data(), http_method=st.sampled_from(["GET", "GET", "DELETE", "POST"]))
def test_generated_session_ids_on_the_session_stream(world: World, data: st.DataObject, http_method: str) -> None:
    base = correct_headers("resources/list", {}, era=SESSION, session=None)
    base["Accept"] = "text/event-stream"
    headers = data.draw(mutated_headers(base, world.tokens))
    session = data.draw(
        st.one_of(st.sampled_from(sorted(world.sessions.values())), st.text(max_size=80), st.just("x" * 300))
    )
    headers.values.setdefault("Mcp-Session-Id", None)
    if headers.values["Mcp-Session-Id"] is None and data.draw(st.integers(0, 5)):
        headers.values["Mcp-Session-Id"] = "".join(ch for ch in session if 0x20 <= ord(ch) <= 0xFF) or "s"
    if http_method == "DELETE":
        http_method = "GET"  # a DELETE would end the world's sessions: the GET stream is what is attacked here
    world.run(exchange(world, b"", headers, method=http_method))


# Bodies and headers through MCPEndpoint ----------------------------------------------------------------------------


@budget(50)
@given(data=st.data(), era=st.sampled_from([STATELESS, SESSION]))
def test_generated_messages_in_chunks_through_the_endpoint(world: World, data: st.DataObject, era: str) -> None:
    def params_for(method: Any) -> st.SearchStrategy[Any]:
        meta = {"_meta": st.just({PROTOCOL_VERSION_META: STATELESS, CLIENT_CAPABILITIES_META: {}})}
        return st.fixed_dictionaries(
            meta if era == STATELESS else {},
            optional={"uri": uris(world.all_uris), "cursor": st.text(max_size=20), "notifications": filters(world)},
        )

    message = data.draw(messages(params_for))
    session = world.sessions.get("anonymous", world.sessions["alice"])
    headers = data.draw(mutated_headers(correct_headers(message.method, message.params, era=era), world.tokens))
    if era == SESSION and headers.values.get("Mcp-Session-Id") is None:
        headers.values["Mcp-Session-Id"] = world.sessions.get(headers.caller or "anonymous", session)
    body = message.body(ascii_only=data.draw(st.booleans()))
    world.run(exchange(world, body, headers, sent_id=message.sent_id, chunks=data.draw(st.integers(1, 5))))
