"""Sessions of 2025-11-25 under floods, their bounds and their owners (issue 13 point 3, issue 14 point 5).

Every request goes through Django's test client: the real handler, the project's middleware, the view, and the
session store in the project's own ``SESSION_CACHE`` (the default ``LocMemCache``: ``MAX_ENTRIES`` 300, where
about 250 anonymous ``initialize`` requests used to push a signed-in user's idle session out). The endpoints are
those of tests/urls_sessions.py: the demo's (protected templates) and registries where everything is public.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Any

import anyio
import httpx2
import pytest
from django.core.cache import caches
from django.core.cache.backends.locmem import LocMemCache
from django.core.cache.backends.redis import RedisCache
from django.test import Client
from mcp import Client as SDKClient
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from mcp_resources.auth.tokens import issue_access_token
from mcp_resources.models import StaticResource
from mcp_resources.transport.sessions import SessionStore, session_cache
from testproject.library.models import Document
from tests.conftest import RESOURCE

pytestmark = pytest.mark.django_db

FLOOD = 10_000
PROTECTED_FLOOD = 1_000
"""Anonymous ``initialize`` requests on the demo's endpoint (protected templates): each opens a ring session."""
INVALID_REQUEST = -32600


@pytest.fixture(autouse=True)
def _urls(settings: Any) -> None:
    settings.ROOT_URLCONF = "tests.urls_sessions"
    caches["default"].clear()
    session_cache().clear()


@pytest.fixture
def http() -> Client:
    return Client()


def initialize(http: Client, path: str = "/public/mcp", token: str | None = None, request_id: int = 0) -> Any:
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "flood", "version": "0"},
        },
    }
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return http.post(path, json.dumps(body), content_type="application/json", headers=headers)


def open_session(http: Client, path: str = "/public/mcp", token: str | None = None) -> str:
    response = initialize(http, path, token)
    assert response.status_code == 200, response.content
    return str(response["Mcp-Session-Id"])


def ping(http: Client, session: str, path: str = "/public/mcp", token: str | None = None) -> int:
    headers = {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    response = http.post(path, body, content_type="application/json", headers=headers)
    assert response.status_code in (200, 404), response.content
    return int(response.status_code)


def delete(http: Client, session: str, path: str = "/public/mcp", token: str | None = None) -> int:
    headers = {"Mcp-Session-Id": session}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return int(http.delete(path, headers=headers).status_code)


# Floods -----------------------------------------------------------------------------------------------------


def test_anonymous_flood_leaves_an_authenticated_session_where_anonymous_sessions_are_opened(
    http: Client, alice: Any, make_token: Callable[..., str]
) -> None:
    """Everything is public here, so each anonymous ``initialize`` opens a session; none evicts alice's."""
    token = make_token(alice)
    alices = open_session(http, token=token)
    anonymous = [open_session(http) for _ in range(FLOOD)]
    assert ping(http, alices, token=token) == 200
    # The anonymous ones share their own bounded ring: the latest live, the earliest were replaced.
    capacity = SessionStore().anonymous_capacity()
    assert capacity == 50  # a sixth of the default LocMemCache's MAX_ENTRIES
    assert ping(http, anonymous[-1]) == ping(http, anonymous[-capacity]) == 200
    assert ping(http, anonymous[0]) == ping(http, anonymous[-capacity - 1]) == 404


def test_anonymous_flood_on_a_protected_endpoint_leaves_an_authenticated_session(
    http: Client, alice: Any, make_token: Callable[..., str]
) -> None:
    """The demo serves protected templates, and anonymous ``initialize`` opens sessions there too (issue 26): in the
    anonymous ring, so that none evicts alice's."""
    token = make_token(alice)
    alices = open_session(http, "/mcp", token)
    anonymous = [open_session(http, "/mcp") for _ in range(PROTECTED_FLOOD)]
    assert ping(http, alices, "/mcp", token) == 200
    assert ping(http, anonymous[-1], "/mcp") == 200


def _leaves(group: BaseExceptionGroup[Any]) -> list[BaseException]:
    return [
        leaf
        for item in group.exceptions
        for leaf in (_leaves(item) if isinstance(item, BaseExceptionGroup) else [item])
    ]


# The per-caller cap -----------------------------------------------------------------------------------------


def test_a_caller_at_the_cap_is_refused_with_429_and_retry_after(
    http: Client, alice: Any, bob: Any, make_token: Callable[..., str]
) -> None:
    token = make_token(alice)
    sessions = [open_session(http, "/capped/mcp", token) for _ in range(3)]
    refused = initialize(http, "/capped/mcp", token, request_id=7)
    assert refused.status_code == 429
    assert 0 < int(refused["Retry-After"]) <= 3600
    assert "Mcp-Session-Id" not in refused
    assert json.loads(refused.content) == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": INVALID_REQUEST, "message": "Too many sessions for this caller", "data": {"maxSessions": 3}},
    }
    # Her sessions are untouched; other callers are not limited by hers.
    assert [ping(http, session, "/capped/mcp", token) for session in sessions] == [200, 200, 200]
    open_session(http, "/capped/mcp", make_token(bob))
    open_session(http, "/capped/mcp")
    # The cap counts the person across every OAuth client: another client of hers finds no room either.
    other_client = issue_access_token(alice, "documents:read", [RESOURCE], 3600, "another client")
    assert initialize(http, "/capped/mcp", other_client).status_code == 429
    # Ending one of hers with DELETE makes room for one more.
    assert delete(http, sessions[0], "/capped/mcp", token) == 204
    open_session(http, "/capped/mcp", token)
    assert initialize(http, "/capped/mcp", token).status_code == 429


@pytest.mark.django_db(transaction=True)
def test_what_the_python_sdk_does_at_the_cap(live_server: Any, alice: Any, make_token: Callable[..., str]) -> None:
    """The official client at the cap: ``initialize`` raises the JSON-RPC error, with its ``data``; a client that
    closes its sessions (the SDK sends ``DELETE`` on exit) makes room again."""
    url = live_server.url + "/capped/mcp"
    token = make_token(alice)

    async def main() -> tuple[list[MCPError], str]:
        async with AsyncExitStack() as stack:
            http = await stack.enter_async_context(
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
            )
            for _ in range(3):
                await stack.enter_async_context(SDKClient(streamable_http_client(url, http_client=http), mode="legacy"))
            refused: list[MCPError] = []
            try:
                async with SDKClient(streamable_http_client(url, http_client=http), mode="legacy"):
                    raise AssertionError("a fourth session was opened")
            except* MCPError as group:  # the SDK raises it from its task group
                refused.extend(leaf for leaf in _leaves(group) if isinstance(leaf, MCPError))
        # The three clients ended their sessions on exit: a new one is opened.
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
            SDKClient(streamable_http_client(url, http_client=http), mode="legacy") as client,
        ):
            return refused, client.protocol_version

    errors, version = anyio.run(main)
    [refused] = errors
    assert (refused.error.code, refused.error.message) == (INVALID_REQUEST, "Too many sessions for this caller")
    assert refused.error.data == {"maxSessions": 3}
    assert version == "2025-11-25"


def test_a_callers_oldest_session_is_replaced_once_old_enough(
    http: Client, alice: Any, make_token: Callable[..., str]
) -> None:
    """Abandoned sessions (a client that restarts without ``DELETE``) never lock their caller out."""
    token = make_token(alice)
    sessions = [open_session(http, "/recycled/mcp", token) for _ in range(5)]
    assert [ping(http, session, "/recycled/mcp", token) for session in sessions] == [404, 404, 200, 200, 200]


def test_anonymous_sessions_take_the_slots_of_their_ring(
    http: Client, alice: Any, make_token: Callable[..., str]
) -> None:
    token = make_token(alice)
    alices = open_session(http, "/ring/mcp", token)
    first = [open_session(http, "/ring/mcp") for _ in range(4)]
    assert [ping(http, session, "/ring/mcp") for session in first] == [404, 200, 200, 200]
    assert delete(http, first[2], "/ring/mcp") == 204
    assert ping(http, first[2], "/ring/mcp") == 404
    later = open_session(http, "/ring/mcp")  # takes the next slot in turn: the oldest live one's
    assert [ping(http, session, "/ring/mcp") for session in (*first, later)] == [404, 404, 404, 200, 200]
    assert ping(http, alices, "/ring/mcp", token) == 200


# Owners ------------------------------------------------------------------------------------------------------


def test_sessions_keep_their_owner(http: Client, alice: Any, bob: Any, make_token: Callable[..., str]) -> None:
    token = make_token(alice)
    alices, anonymous = open_session(http, token=token), open_session(http)
    assert ping(http, alices) == 404  # not without her token
    assert ping(http, alices, token=make_token(bob)) == 404  # a session of one caller is never another's
    assert ping(http, anonymous) == 200
    # A refreshed token (same user, same OAuth client) continues her session; another client of hers does not.
    assert ping(http, alices, token=make_token(alice)) == 200
    other_client = issue_access_token(alice, "documents:read", [RESOURCE], 3600, "another client")
    assert ping(http, alices, token=other_client) == 404


def test_forged_anonymous_ids_are_unknown(http: Client) -> None:
    real = open_session(http)
    randomness, slot = real.rsplit(".", 1)
    assert len(randomness) == 43
    assert ping(http, real) == 200
    others = [s for s in ("0", "1", "99", "999999999", "-1", "01", "1e3", "") if s != slot]
    for forged in ("A" * 43 + "." + slot, *(randomness + "." + other for other in others), randomness):
        assert ping(http, forged) == 404, forged


# From anonymous to one caller (issue 26) ------------------------------------------------------------------------

CHALLENGE = (
    'Bearer scope="documents:read",resource_metadata="http://127.0.0.1:8000/.well-known/oauth-protected-resource/mcp"'
)


def session_call(
    http: Client, session: str, method: str, params: dict[str, Any], path: str = "/mcp", token: str | None = None
) -> Any:
    headers = {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    return http.post(path, body, content_type="application/json", headers=headers)


def test_anonymous_initialize_opens_a_session_wherever_something_is_protected(http: Client) -> None:
    """Protected templates (the demo), a protected static resource from code, an enabled protected admin row: an
    anonymous 2025-11-25 client opens its session as an anonymous 2026-07-28 client calls (it used to get 401)."""
    StaticResource.objects.create(
        uri="sessions://admin", name="admin", text="rows", access="protected", required_scopes="documents:read"
    )
    for path in ("/mcp", "/guarded/mcp", "/public/mcp"):
        assert initialize(http, path).status_code == 200, path


def test_an_anonymous_session_reads_what_an_anonymous_stateless_client_reads(http: Client) -> None:
    """One answer for both eras: the demo's public static resource reads in an anonymous session as it reads on the
    2026-07-28 wire without a token."""
    session = open_session(http, "/mcp")
    in_session = session_call(http, session, "resources/read", {"uri": "test://static-text"})
    assert in_session.status_code == 200, in_session.content
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    stateless = http.post(
        "/mcp",
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "resources/read",
                "params": {"uri": "test://static-text", "_meta": meta},
            }
        ),
        content_type="application/json",
        headers={
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "resources/read",
            "Mcp-Name": "test://static-text",
        },
    )
    assert stateless.status_code == 200, stateless.content
    assert json.loads(in_session.content)["result"]["contents"] == json.loads(stateless.content)["result"]["contents"]


def test_what_needs_a_token_asks_for_it_with_the_challenge(http: Client, alice: Any) -> None:
    """How a 2025-11-25 client learns it must authenticate: the request that needs a token is answered 401 with the
    challenge (the listing of the caller's inventory, a protected read), in the session it already has."""
    document = Document.objects.create(owner=alice, title="t", body="alice's body")
    session = open_session(http, "/mcp")
    for method, params in (("resources/list", {}), ("resources/read", {"uri": f"learn://documents/{document.pk}"})):
        refused = session_call(http, session, method, params)
        assert refused.status_code == 401, (method, refused.content)
        assert refused["WWW-Authenticate"] == CHALLENGE
        assert b"alice's body" not in refused.content
    assert ping(http, session, "/mcp") == 200  # the session goes on


def test_a_session_goes_from_anonymous_to_one_caller_never_to_another(
    http: Client, alice: Any, bob: Any, make_token: Callable[..., str]
) -> None:
    """The 401 above, the OAuth flow, then the same request again on the same session with the token: it claims the
    session. From then on the session is alice's alone: anonymous, or bob, find no such session."""
    document = Document.objects.create(owner=alice, title="t", body="alice's body")
    read = {"uri": f"learn://documents/{document.pk}"}
    token = make_token(alice)
    session = open_session(http, "/mcp")
    assert session_call(http, session, "resources/read", read).status_code == 401
    retried = session_call(http, session, "resources/read", read, token=token)
    assert retried.status_code == 200, retried.content
    assert json.loads(retried.content)["result"]["contents"][0]["text"] == "alice's body"
    assert ping(http, session, "/mcp", token) == 200
    assert ping(http, session, "/mcp") == 404  # not anonymous any more
    assert ping(http, session, "/mcp", make_token(bob)) == 404  # never another caller's
    assert session_call(http, session, "resources/read", read, token=make_token(bob)).status_code == 404
    assert ping(http, session, "/mcp", make_token(alice)) == 200  # her refreshed token (the same OAuth client)
    assert delete(http, session, "/mcp", token) in (200, 204)
    assert ping(http, session, "/mcp", token) == 404


def test_a_session_claimed_first_by_bob_is_never_alices(
    http: Client, alice: Any, bob: Any, make_token: Callable[..., str]
) -> None:
    session = open_session(http, "/mcp")
    bobs = make_token(bob)
    assert ping(http, session, "/mcp", bobs) == 200
    assert ping(http, session, "/mcp", make_token(alice)) == 404
    assert ping(http, session, "/mcp") == 404
    assert ping(http, session, "/mcp", bobs) == 200


def test_no_authentication_opens_anonymous_sessions(http: Client, settings: Any) -> None:
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "AUTHENTICATION_CLASS": "mcp_resources.auth.NoAuthentication"}
    assert initialize(http, "/mcp").status_code == 200


# The store's bounds ------------------------------------------------------------------------------------------


def test_the_anonymous_ring_fits_a_culling_backend() -> None:
    store = SessionStore()
    assert store.anonymous_capacity(LocMemCache("a", {})) == 50
    assert store.anonymous_capacity(LocMemCache("b", {"OPTIONS": {"MAX_ENTRIES": 30_000}})) == 1000
    assert store.anonymous_capacity(LocMemCache("c", {"OPTIONS": {"MAX_ENTRIES": 2}})) == 1
    assert store.anonymous_capacity(RedisCache("redis://127.0.0.1:6379/15", {})) == 1000
    assert SessionStore(anonymous_sessions=50).anonymous_capacity(RedisCache("redis://127.0.0.1:6379/15", {})) == 50


def test_bounds_are_checked() -> None:
    with pytest.raises(TypeError):
        SessionStore(max_sessions=3)
    with pytest.raises(ValueError):
        SessionStore(max_sessions_per_caller=0)
    with pytest.raises(ValueError):
        SessionStore(anonymous_sessions=-1)
    assert SessionStore(replace_after_seconds=0).replace_after_seconds == 0
