"""End to end OAuth: the official MCP python SDK's OAuth client against the live demo authorization server.

The demo is ``demo_server`` (uvicorn, ``testproject.asgi``, its own fresh database with ``load_demo_data``, its
endpoint as ``MCP_RESOURCE_URI``, the app logging at INFO). Nothing is pre-provisioned: the SDK
(``mcp.client.auth.OAuthClientProvider``) discovers the protected resource metadata from the 401 challenge, then
the authorization server metadata, registers itself (RFC 7591), runs the authorization code flow with PKCE S256
and the RFC 8707 resource indicator, and retries. A scripted user signs in on the demo's login page and approves
the consent form, as a person would in a browser. Stored token rows are read through the ORM in a
``manage.py shell`` of the project (SQLite or PostgreSQL alike).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from mcp.types import TextResourceContents
from pydantic import AnyUrl

from tests import live

pytestmark = pytest.mark.e2e

REDIRECT_URI = "http://127.0.0.1:9/callback"  # never contacted: the scripted user reads the redirect itself
VERSION = "2026-07-28"
V2025_11_25 = "2025-11-25"


def metadata_url(server: live.Server) -> str:
    """The path-inserted protected resource metadata URL (RFC 9728) of the server's endpoint."""
    return server.base + "/.well-known/oauth-protected-resource/mcp"


def stored_token(server: live.Server, token: str) -> tuple[str, list[str], str, str | None]:
    """(scope, resource, stored token column, owner) of the access token row for ``token``."""
    row = server.project.stored_token(token)
    assert row is not None, "no access token row"
    return row["scope"], row["resource"], row["token"], row["user"]


def first_document(server: live.Server, user: str) -> int:
    return server.project.ids("Document", user)[0]


# A scripted user in a browser -------------------------------------------------------------------------


class _FormParser(HTMLParser):
    """The named fields of the form with id ``form_id`` (inputs only, as the demo's pages use)."""

    def __init__(self, form_id: str) -> None:
        super().__init__()
        self.form_id = form_id
        self.inside = False
        self.found = False
        self.fields: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if tag == "form" and values.get("id") == self.form_id:
            self.inside = self.found = True
        elif tag == "input" and self.inside and values.get("name") and values.get("type") != "submit":
            self.fields[values["name"]] = values.get("value", "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False


def _form(html: str, form_id: str) -> dict[str, str]:
    parser = _FormParser(form_id)
    parser.feed(html)
    assert parser.found, f"no form {form_id!r} in:\n{html[:2000]}"
    return parser.fields


@dataclass
class ScriptedUser:
    """Signs in on the demo's login page and approves the consent form; used as the SDK's redirect handler."""

    username: str
    password: str
    consents: list[dict[str, str]] = field(default_factory=list)
    _redirect: dict[str, str] | None = None

    async def authorize(self, url: str) -> dict[str, str]:
        """Follow ``url`` (an authorization request) like a browser; return the redirect's query parameters."""
        async with httpx2.AsyncClient(timeout=30) as browser:
            response = await browser.get(url)
            assert response.status_code == 302, response.text
            login_url = urljoin(url, response.headers["location"])
            assert urlsplit(login_url).path == "/accounts/login/"
            page = await browser.get(login_url)
            assert page.status_code == 200
            form = _form(page.text, "login-form")
            form.update(username=self.username, password=self.password)
            response = await browser.post(login_url, data=form)
            assert response.status_code == 302, response.text
            consent_url = urljoin(login_url, response.headers["location"])
            page = await browser.get(consent_url)
            assert page.status_code == 200, page.text
            form = _form(page.text, "authorizationForm")
            self.consents.append(dict(form))
            response = await browser.post(consent_url, data={**form, "allow": "Authorize"})
            assert response.status_code == 302, response.text
        location = response.headers["location"]
        assert location.startswith(REDIRECT_URI + "?"), location
        return {key: values[0] for key, values in parse_qs(urlsplit(location).query).items()}

    async def redirect_handler(self, url: str) -> None:
        self._redirect = await self.authorize(url)

    async def callback_handler(self) -> AuthorizationCodeResult:
        assert self._redirect is not None
        assert "code" in self._redirect, self._redirect
        redirect, self._redirect = self._redirect, None
        return AuthorizationCodeResult(code=redirect["code"], state=redirect.get("state"), iss=redirect.get("iss"))


class MemoryStorage:
    """The SDK's ``TokenStorage``, in memory."""

    def __init__(self, tokens: OAuthToken | None = None) -> None:
        self.tokens = tokens
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


@dataclass
class Exchange:
    method: str
    url: str
    status: int
    request_body: bytes
    www_authenticate: str | None
    session: str | None = None
    """The request's ``Mcp-Session-Id``."""
    issued_session: str | None = None
    """The response's ``Mcp-Session-Id``."""
    authorized: bool = False
    """Whether the request carried an ``Authorization`` header."""

    @property
    def rpc_method(self) -> str | None:
        try:
            return str(json.loads(self.request_body)["method"])
        except (ValueError, KeyError, TypeError):
            return None


@dataclass
class Session:
    """What one SDK session did: every HTTP exchange, the stored token, the results."""

    exchanges: list[Exchange]
    storage: MemoryStorage
    user: ScriptedUser
    results: dict[str, Any]


def run_sdk(
    server: live.Server,
    user: ScriptedUser,
    uri: str,
    storage: MemoryStorage | None = None,
    *,
    mode: str = "auto",
    midway: Callable[[], object] | None = None,
) -> Session:
    """Connect the official client with OAuth to ``server`` (``mode`` as ``Client`` takes it), read ``uri`` and list
    resources; with ``midway``, then run it (in a thread) and list again in the same client (``results["again"]``)."""
    storage = storage or MemoryStorage()
    exchanges: list[Exchange] = []

    async def record(response: httpx2.Response) -> None:
        request = response.request
        body = request.content if isinstance(request.stream, httpx2.ByteStream) else b""
        challenge = response.headers.get("www-authenticate")
        exchanges.append(
            Exchange(
                request.method,
                str(request.url),
                response.status_code,
                body,
                challenge,
                session=request.headers.get("mcp-session-id"),
                issued_session=response.headers.get("mcp-session-id"),
                authorized="authorization" in request.headers,
            )
        )

    async def main() -> dict[str, Any]:
        provider = OAuthClientProvider(
            server_url=server.url,
            client_metadata=OAuthClientMetadata(
                client_name="django-mcp-resources e2e",
                redirect_uris=[AnyUrl(REDIRECT_URI)],
                grant_types=["authorization_code", "refresh_token"],
                response_types=["code"],
                token_endpoint_auth_method="none",
            ),
            storage=storage,
            redirect_handler=user.redirect_handler,
            callback_handler=user.callback_handler,
        )
        async with (
            httpx2.AsyncClient(auth=provider, timeout=30, event_hooks={"response": [record]}) as http,
            Client(streamable_http_client(server.url, http_client=http), mode=mode) as client,
        ):
            read = await client.read_resource(uri)
            listed = await client.list_resources()
            results: dict[str, Any] = {"read": read, "list": listed, "protocol": client.protocol_version}
            if midway is not None:
                await anyio.to_thread.run_sync(midway)
                results["again"] = await client.list_resources()
            return results

    results = asyncio.run(main())
    return Session(exchanges, storage, user, results)


# Raw OAuth and MCP requests (for tokens the SDK would never ask for) -----------------------------------


def obtain_token(server: live.Server, username: str, *, resource: str, scope: str) -> str:
    """Register a public client, authorize it as ``username`` with PKCE S256, and exchange the code."""
    registration = httpx2.post(
        server.base + "/o/register/",
        json={
            "client_name": "raw flow",
            "redirect_uris": [REDIRECT_URI],
            "grant_types": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_method": "none",
        },
        timeout=30,
    )
    assert registration.status_code == 201, registration.text
    client_id = registration.json()["client_id"]
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    state = secrets.token_urlsafe(16)
    query = urlencode(
        {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": REDIRECT_URI,
            "scope": scope,
            "state": state,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "resource": resource,
        }
    )
    redirect = asyncio.run(ScriptedUser(username, username).authorize(f"{server.base}/o/authorize/?{query}"))
    assert redirect["state"] == state
    assert redirect["iss"] == server.base
    response = httpx2.post(
        server.base + "/o/token/",
        data={
            "grant_type": "authorization_code",
            "code": redirect["code"],
            "redirect_uri": REDIRECT_URI,
            "client_id": client_id,
            "code_verifier": verifier,
            "resource": resource,
        },
        timeout=30,
    )
    assert response.status_code == 200, response.text
    return str(response.json()["access_token"])


def mcp_call(server: live.Server, method: str, params: dict[str, Any], token: str | None) -> httpx2.Response:
    meta = {"io.modelcontextprotocol/protocolVersion": VERSION, "io.modelcontextprotocol/clientCapabilities": {}}
    headers = {"MCP-Protocol-Version": VERSION, "Mcp-Method": method, "Accept": "application/json, text/event-stream"}
    if "uri" in params:
        headers["Mcp-Name"] = params["uri"]
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    return httpx2.post(server.url, json=body, headers=headers, timeout=30)


def challenge_params(header: str | None) -> dict[str, str]:
    assert header is not None
    assert header.startswith("Bearer ")
    return dict(re.findall(r'(\w+)="([^"]*)"', header))


# Tests ------------------------------------------------------------------------------------------------


def test_sdk_discovers_registers_authorizes_and_reads(demo_server: live.Server) -> None:
    doc_id = first_document(demo_server, "alice")
    uri = f"learn://documents/{doc_id}"
    user = ScriptedUser("alice", "alice")
    session = run_sdk(demo_server, user, uri)

    read = session.results["read"]
    assert session.results["protocol"] == VERSION
    assert isinstance(read.contents[0], TextResourceContents)
    assert read.contents[0].text == "This is document 1 of alice."
    listed = [str(resource.uri) for resource in session.results["list"].resources]
    assert "learn://about" in listed
    assert uri in listed

    # Discovery started from the 401 challenge, which named the path-inserted metadata URL and the scope.
    calls = [(e.method, e.url.split("?")[0], e.status) for e in session.exchanges]
    refused = next(e for e in session.exchanges if e.status == 401)
    params = challenge_params(refused.www_authenticate)
    assert params["resource_metadata"] == metadata_url(demo_server)
    assert params["scope"] == "documents:read"
    assert "error" not in params  # no token had been sent yet
    after = calls[calls.index(("POST", demo_server.url, 401)) + 1 :]
    assert after[:5] == [
        ("GET", metadata_url(demo_server), 200),
        ("GET", demo_server.base + "/.well-known/oauth-authorization-server", 200),
        ("POST", demo_server.base + "/o/register/", 201),
        ("POST", demo_server.base + "/o/token/", 200),
        ("POST", demo_server.url, 200),
    ]

    # The authorization and token requests carried the resource indicator; PKCE used S256.
    consent = user.consents[0]
    assert consent["resource"] == demo_server.url
    assert consent["code_challenge_method"] == "S256"
    assert consent["scope"] == "documents:read"
    token_request = parse_qs(next(e for e in session.exchanges if e.url.endswith("/o/token/")).request_body.decode())
    assert token_request["resource"] == [demo_server.url]
    assert "code_verifier" in token_request

    # The client registered itself (public, no secret) and the token row is bound to the endpoint, hashed at rest.
    assert session.storage.client_info is not None
    assert session.storage.client_info.client_secret is None
    assert session.storage.tokens is not None
    scope, resource, stored, owner = stored_token(demo_server, session.storage.tokens.access_token)
    assert (scope, resource, stored, owner) == ("documents:read", [demo_server.url], "", "alice")
    assert session.storage.tokens.access_token.encode() not in demo_server.log.read_bytes()


def revoke(server: live.Server, token: str) -> None:
    """Delete the access token row of ``token`` (what revocation or an administrator does), in another process."""
    checksum = hashlib.sha256(token.encode()).hexdigest()
    server.project.shell(
        "from oauth2_provider.models import get_access_token_model; "
        f"print(get_access_token_model().objects.filter(token_checksum={checksum!r}).delete()[0])"
    )


def mcp_exchanges(session: Session, server: live.Server) -> list[Exchange]:
    return [e for e in session.exchanges if e.url == server.url]


def test_legacy_sdk_authenticates_where_asked_and_lists_in_one_client(demo_server: live.Server) -> None:
    """The Python SDK in 2025-11-25 mode, knowing only the MCP URL: ``initialize`` opens an anonymous session (as an
    anonymous 2026-07-28 client may call); the first request that needs a token, reading alice's document, is
    answered 401 with the challenge; the SDK runs the whole OAuth flow inside that request and sends it again with
    its token on the same session, which the token claims: alice's from then on, used by every later request."""
    doc_id = first_document(demo_server, "alice")
    uri = f"learn://documents/{doc_id}"
    user = ScriptedUser("alice", "alice")
    session = run_sdk(demo_server, user, uri, mode="legacy")

    assert session.results["protocol"] == V2025_11_25
    assert session.results["read"].contents[0].text == "This is document 1 of alice."
    listed = [str(resource.uri) for resource in session.results["list"].resources]
    assert "learn://about" in listed
    assert uri in listed

    mcp = mcp_exchanges(session, demo_server)
    first = mcp[0]
    assert (first.method, first.rpc_method, first.status, first.authorized) == ("POST", "initialize", 200, False)
    issued = first.issued_session
    assert issued is not None  # an anonymous session
    [refused] = [e for e in mcp if e.status == 401]
    assert (refused.rpc_method, refused.session, refused.authorized) == ("resources/read", issued, False)
    params = challenge_params(refused.www_authenticate)
    assert params == {"scope": "documents:read", "resource_metadata": metadata_url(demo_server)}
    calls = [(e.method, e.url.split("?")[0], e.status) for e in session.exchanges]
    at = calls.index(("POST", demo_server.url, 401))
    assert calls[at + 1 : at + 6] == [
        ("GET", metadata_url(demo_server), 200),
        ("GET", demo_server.base + "/.well-known/oauth-authorization-server", 200),
        ("POST", demo_server.base + "/o/register/", 201),
        ("POST", demo_server.base + "/o/token/", 200),
        ("POST", demo_server.url, 200),
    ]
    retried = mcp[mcp.index(refused) + 1]
    assert (retried.rpc_method, retried.authorized, retried.session) == ("resources/read", True, issued)
    # One session, opened anonymously and claimed by the token, used by every request (the closing DELETE too).
    assert {e.session for e in mcp if e.session} == {issued}
    later = mcp[mcp.index(retried) :]
    assert {e.method for e in later} == {"POST", "DELETE"}
    assert all(e.session == issued and e.authorized and 200 <= e.status < 300 for e in later), [
        (e.method, e.rpc_method, e.status, e.session == issued) for e in later
    ]
    assert len(user.consents) == 1
    assert user.consents[0]["scope"] == "documents:read"


def test_legacy_sdk_reauthorizes_on_a_later_401_and_keeps_its_session(demo_server: live.Server) -> None:
    """A 401 after the session exists (here the token is revoked midway): the SDK authorizes again, as the same
    user through the same registered client, and retries on the same session, which still belongs to that caller."""
    uri = f"learn://documents/{first_document(demo_server, 'bob')}"
    user = ScriptedUser("bob", "bob")
    storage = MemoryStorage()

    def revoke_current() -> None:
        assert storage.tokens is not None
        revoke(demo_server, storage.tokens.access_token)

    session = run_sdk(demo_server, user, uri, storage, mode="legacy", midway=revoke_current)

    again = [str(resource.uri) for resource in session.results["again"].resources]
    assert uri in again
    mcp = mcp_exchanges(session, demo_server)
    refused = [e for e in mcp if e.status == 401]
    # The read before any token; after the revocation, the first request with the revoked token: the listing, or the
    # GET stream that the claim ended and the SDK opens again (whichever its reconnection delay puts first).
    assert refused[0].rpc_method == "resources/read"
    assert len(refused) == 2
    assert (refused[1].method, refused[1].rpc_method) in (("POST", "resources/list"), ("GET", None))
    assert challenge_params(refused[1].www_authenticate)["error"] == "invalid_token"
    issued = {e.issued_session for e in mcp if e.issued_session}
    assert len(issued) == 1
    assert {refused[1].session} == issued
    retried = [e for e in mcp[mcp.index(refused[1]) + 1 :] if e.rpc_method == "resources/list"]
    assert (retried[0].status, {retried[0].session}) == (200, issued)
    assert all(e.status != 404 for e in mcp)
    assert len(user.consents) == 2  # signed in twice, registered once
    assert [e.status for e in session.exchanges if e.url.endswith("/o/register/")] == [201]


def test_token_for_another_resource_is_refused(demo_server: live.Server) -> None:
    doc_uri = f"learn://documents/{first_document(demo_server, 'alice')}"
    token = obtain_token(demo_server, "alice", resource="http://other.example/mcp", scope="documents:read")
    assert stored_token(demo_server, token)[1] == ["http://other.example/mcp"]
    for method, params in (("resources/read", {"uri": doc_uri}), ("server/discover", {})):
        response = mcp_call(demo_server, method, params, token)
        assert response.status_code == 401, response.text
        params_ = challenge_params(response.headers.get("www-authenticate"))
        assert params_["error"] == "invalid_token"
        assert params_["resource_metadata"] == metadata_url(demo_server)
        assert b"alice" not in response.content
    # The same flow for this server's resource works, and a broad scope implies the narrower one.
    good = obtain_token(demo_server, "alice", resource=demo_server.url, scope="documents")
    response = mcp_call(demo_server, "resources/read", {"uri": doc_uri}, good)
    assert response.status_code == 200, response.text
    assert response.json()["result"]["contents"][0]["text"] == "This is document 1 of alice."
    assert token.encode() not in demo_server.log.read_bytes()


def test_token_lacking_the_scope_gets_the_step_up_challenge(demo_server: live.Server) -> None:
    doc_id = first_document(demo_server, "bob")
    uri = f"learn://documents/{doc_id}"
    weak = demo_server.token("bob", scope="")
    assert stored_token(demo_server, weak)[:2] == ("", [demo_server.url])

    response = mcp_call(demo_server, "resources/read", {"uri": uri}, weak)
    assert response.status_code == 403, response.text
    params = challenge_params(response.headers.get("www-authenticate"))
    assert params == {
        "error": "insufficient_scope",
        "scope": "documents:read",
        "resource_metadata": metadata_url(demo_server),
    }
    assert mcp_call(demo_server, "server/discover", {}, weak).status_code == 200  # the token itself is valid

    # The SDK, holding the weak token, answers the 403 by re-authorizing with the challenged scope.
    user = ScriptedUser("bob", "bob")
    session = run_sdk(demo_server, user, uri, MemoryStorage(OAuthToken(access_token=weak, scope="")))
    assert [e.status for e in session.exchanges if e.url == demo_server.url and e.status in (401, 403)] == [403]
    assert user.consents[0]["scope"] == "documents:read"
    assert session.results["read"].contents[0].text == "This is document 1 of bob."
    assert session.storage.tokens is not None
    assert session.storage.tokens.access_token != weak
    assert stored_token(demo_server, session.storage.tokens.access_token)[0] == "documents:read"


def test_server_log_has_no_tracebacks(demo_server: live.Server) -> None:
    """Runs last in this module: no flow above made the server log an unexpected exception."""
    demo_server.assert_log_clean()
