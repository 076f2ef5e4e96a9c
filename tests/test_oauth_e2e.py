"""End to end OAuth: the official MCP python SDK's OAuth client against the live demo authorization server.

The demo runs under uvicorn as a subprocess on a free loopback port, with a fresh temporary SQLite database
(``MCP_DEMO_DB``) loaded by ``migrate`` and ``load_demo_data``, and ``MCP_RESOURCE_URI`` set to its endpoint.
Nothing is pre-provisioned: the SDK (``mcp.client.auth.OAuthClientProvider``) discovers the protected resource
metadata from the 401 challenge, then the authorization server metadata, registers itself (RFC 7591), runs the
authorization code flow with PKCE S256 and the RFC 8707 resource indicator, and retries. A scripted user signs
in on the demo's login page and approves the consent form, as a person would in a browser.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import os
import re
import secrets
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

import httpx2
import pytest
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from mcp.types import TextResourceContents
from pydantic import AnyUrl

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
MANAGE = ROOT / "testproject" / "manage.py"
REDIRECT_URI = "http://127.0.0.1:9/callback"  # never contacted: the scripted user reads the redirect itself
VERSION = "2026-07-28"


# The live demo ----------------------------------------------------------------------------------------


@dataclass
class Demo:
    base: str
    env: dict[str, str]
    database: Path
    log: Path

    @property
    def mcp_url(self) -> str:
        return self.base + "/mcp"

    @property
    def metadata_url(self) -> str:
        return self.base + "/.well-known/oauth-protected-resource/mcp"

    def manage(self, *args: str) -> str:
        completed = subprocess.run(
            [sys.executable, str(MANAGE), *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if completed.returncode != 0:
            raise RuntimeError(f"manage.py {args[0]} failed:\n{completed.stdout}\n{completed.stderr}")
        return completed.stdout

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        with contextlib.closing(sqlite3.connect(self.database)) as conn:
            return conn.execute(sql, params).fetchall()

    def document_ids(self, username: str) -> list[int]:
        rows = self.query(
            "SELECT d.id FROM library_document d JOIN auth_user u ON u.id = d.owner_id "
            "WHERE u.username = ? ORDER BY d.id",
            username,
        )
        return [row[0] for row in rows]

    def stored_token(self, token: str) -> tuple[str, list[str], str, str | None]:
        """(scope, resource, stored token column, owner) of the access token row for ``token``."""
        checksum = hashlib.sha256(token.encode()).hexdigest()
        rows = self.query(
            "SELECT t.scope, t.resource, t.token, u.username FROM oauth2_provider_accesstoken t "
            "LEFT JOIN auth_user u ON u.id = t.user_id WHERE t.token_checksum = ?",
            checksum,
        )
        assert len(rows) == 1, rows
        scope, resource, stored, owner = rows[0]
        return scope, json.loads(resource), stored, owner


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"uvicorn exited with {process.returncode}:\n{log.read_text(errors='replace')}")
        with contextlib.suppress(httpx2.TransportError):
            if httpx2.get(url, timeout=2.0).status_code == 200:
                return
        time.sleep(0.1)
    raise RuntimeError(f"uvicorn did not become ready:\n{log.read_text(errors='replace')}")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    workdir = tmp_path_factory.mktemp("oauth-e2e")
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("MCP_TEST_DB", "PGDATABASE", "MCP_DEMO_DB", "DJANGO_SETTINGS_MODULE", "DJANGO_DEBUG")
    }
    env.update(
        DJANGO_SETTINGS_MODULE="testproject.settings",
        MCP_DEMO_DB=str(workdir / "demo.sqlite3"),
        MCP_RESOURCE_URI=f"{base}/mcp",
        MCP_LOG_LEVEL="INFO",
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
    )
    server = Demo(base=base, env=env, database=workdir / "demo.sqlite3", log=workdir / "uvicorn.log")
    server.manage("migrate", "--verbosity", "0")
    server.manage("load_demo_data", "--alice", "5", "--bob", "3", "--notes", "2")
    with server.log.open("wb") as log_file:
        process = subprocess.Popen(
            [
                *(sys.executable, "-m", "uvicorn", "testproject.asgi:application"),
                *("--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"),
            ],
            cwd=ROOT,
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
        try:
            _wait_ready(server.metadata_url, process, server.log)
            yield server
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=15)


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


@dataclass
class Session:
    """What one SDK session did: every HTTP exchange, the stored token, the results."""

    exchanges: list[Exchange]
    storage: MemoryStorage
    user: ScriptedUser
    results: dict[str, Any]


def run_sdk(demo: Demo, user: ScriptedUser, uri: str, storage: MemoryStorage | None = None) -> Session:
    """Connect the official client with OAuth to the demo, read ``uri`` and list resources."""
    storage = storage or MemoryStorage()
    exchanges: list[Exchange] = []

    async def record(response: httpx2.Response) -> None:
        request = response.request
        body = request.content if isinstance(request.stream, httpx2.ByteStream) else b""
        challenge = response.headers.get("www-authenticate")
        exchanges.append(Exchange(request.method, str(request.url), response.status_code, body, challenge))

    async def main() -> dict[str, Any]:
        provider = OAuthClientProvider(
            server_url=demo.mcp_url,
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
            Client(streamable_http_client(demo.mcp_url, http_client=http)) as client,
        ):
            read = await client.read_resource(uri)
            listed = await client.list_resources()
            return {"read": read, "list": listed, "protocol": client.protocol_version}

    results = asyncio.run(main())
    return Session(exchanges, storage, user, results)


# Raw OAuth and MCP requests (for tokens the SDK would never ask for) -----------------------------------


def obtain_token(demo: Demo, username: str, *, resource: str, scope: str) -> str:
    """Register a public client, authorize it as ``username`` with PKCE S256, and exchange the code."""
    registration = httpx2.post(
        demo.base + "/o/register/",
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
    redirect = asyncio.run(ScriptedUser(username, username).authorize(f"{demo.base}/o/authorize/?{query}"))
    assert redirect["state"] == state
    assert redirect["iss"] == demo.base
    response = httpx2.post(
        demo.base + "/o/token/",
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


def mcp_call(demo: Demo, method: str, params: dict[str, Any], token: str | None) -> httpx2.Response:
    meta = {"io.modelcontextprotocol/protocolVersion": VERSION, "io.modelcontextprotocol/clientCapabilities": {}}
    headers = {"MCP-Protocol-Version": VERSION, "Mcp-Method": method, "Accept": "application/json, text/event-stream"}
    if "uri" in params:
        headers["Mcp-Name"] = params["uri"]
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    return httpx2.post(demo.mcp_url, json=body, headers=headers, timeout=30)


def challenge_params(header: str | None) -> dict[str, str]:
    assert header is not None
    assert header.startswith("Bearer ")
    return dict(re.findall(r'(\w+)="([^"]*)"', header))


# Tests ------------------------------------------------------------------------------------------------


def test_sdk_discovers_registers_authorizes_and_reads(demo: Demo) -> None:
    doc_id = demo.document_ids("alice")[0]
    uri = f"learn://documents/{doc_id}"
    user = ScriptedUser("alice", "alice")
    session = run_sdk(demo, user, uri)

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
    assert params["resource_metadata"] == demo.metadata_url
    assert params["scope"] == "documents:read"
    assert "error" not in params  # no token had been sent yet
    after = calls[calls.index(("POST", demo.mcp_url, 401)) + 1 :]
    assert after[:5] == [
        ("GET", demo.metadata_url, 200),
        ("GET", demo.base + "/.well-known/oauth-authorization-server", 200),
        ("POST", demo.base + "/o/register/", 201),
        ("POST", demo.base + "/o/token/", 200),
        ("POST", demo.mcp_url, 200),
    ]

    # The authorization and token requests carried the resource indicator; PKCE used S256.
    consent = user.consents[0]
    assert consent["resource"] == demo.mcp_url
    assert consent["code_challenge_method"] == "S256"
    assert consent["scope"] == "documents:read"
    token_request = parse_qs(next(e for e in session.exchanges if e.url.endswith("/o/token/")).request_body.decode())
    assert token_request["resource"] == [demo.mcp_url]
    assert "code_verifier" in token_request

    # The client registered itself (public, no secret) and the token row is bound to the endpoint, hashed at rest.
    assert session.storage.client_info is not None
    assert session.storage.client_info.client_secret is None
    assert session.storage.tokens is not None
    scope, resource, stored, owner = demo.stored_token(session.storage.tokens.access_token)
    assert (scope, resource, stored, owner) == ("documents:read", [demo.mcp_url], "", "alice")
    assert session.storage.tokens.access_token.encode() not in demo.log.read_bytes()


def test_token_for_another_resource_is_refused(demo: Demo) -> None:
    doc_uri = f"learn://documents/{demo.document_ids('alice')[0]}"
    token = obtain_token(demo, "alice", resource="http://other.example/mcp", scope="documents:read")
    assert demo.stored_token(token)[1] == ["http://other.example/mcp"]
    for method, params in (("resources/read", {"uri": doc_uri}), ("server/discover", {})):
        response = mcp_call(demo, method, params, token)
        assert response.status_code == 401, response.text
        params_ = challenge_params(response.headers.get("www-authenticate"))
        assert params_["error"] == "invalid_token"
        assert params_["resource_metadata"] == demo.metadata_url
        assert b"alice" not in response.content
    # The same flow for this server's resource works, and a broad scope implies the narrower one.
    good = obtain_token(demo, "alice", resource=demo.mcp_url, scope="documents")
    response = mcp_call(demo, "resources/read", {"uri": doc_uri}, good)
    assert response.status_code == 200, response.text
    assert response.json()["result"]["contents"][0]["text"] == "This is document 1 of alice."
    assert token.encode() not in demo.log.read_bytes()


def test_token_lacking_the_scope_gets_the_step_up_challenge(demo: Demo) -> None:
    doc_id = demo.document_ids("bob")[0]
    uri = f"learn://documents/{doc_id}"
    weak = demo.manage("mcp_token", "--user", "bob", "--scope", "").strip()
    assert demo.stored_token(weak)[:2] == ("", [demo.mcp_url])

    response = mcp_call(demo, "resources/read", {"uri": uri}, weak)
    assert response.status_code == 403, response.text
    params = challenge_params(response.headers.get("www-authenticate"))
    assert params == {
        "error": "insufficient_scope",
        "scope": "documents:read",
        "resource_metadata": demo.metadata_url,
    }
    assert mcp_call(demo, "server/discover", {}, weak).status_code == 200  # the token itself is valid

    # The SDK, holding the weak token, answers the 403 by re-authorizing with the challenged scope.
    user = ScriptedUser("bob", "bob")
    session = run_sdk(demo, user, uri, MemoryStorage(OAuthToken(access_token=weak, scope="")))
    assert [e.status for e in session.exchanges if e.url == demo.mcp_url and e.status in (401, 403)] == [403]
    assert user.consents[0]["scope"] == "documents:read"
    assert session.results["read"].contents[0].text == "This is document 1 of bob."
    assert session.storage.tokens is not None
    assert session.storage.tokens.access_token != weak
    assert demo.stored_token(session.storage.tokens.access_token)[0] == "documents:read"
