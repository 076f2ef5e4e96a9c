"""From the bare URL to a listing with the official MCP Python SDK's OAuth client (``mcp.client.auth``), against the
teams project's own authorization server, mounted only through what django-mcp-resources ships.

Nothing is pre-provisioned: the SDK reads the protected resource metadata named by the 401 challenge, the
authorization server's RFC 8414 metadata at the root, registers itself (RFC 7591), sends a scripted user through
sign-in and the consent page with PKCE S256 and the RFC 8707 resource, exchanges the code and retries. In
2026-07-28 mode every request stands alone; in legacy mode (2025-11-25) the client initializes a session first.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from mcp.types import BlobResourceContents
from pydantic import AnyUrl

import live
from teams.management.commands.seed_teams import PAYLOAD


@pytest.fixture(scope="module")
def server(project: live.Project) -> Iterator[live.Server]:
    with live.serving(project, name="uvicorn") as served:
        yield served


class MemoryStorage:
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
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
class Run:
    calls: list[tuple[str, str, int]]
    token_request: dict[str, list[str]]
    storage: MemoryStorage
    user: live.ScriptedUser
    results: dict[str, Any]


def run_sdk(server: live.Server, mode: str, username: str) -> Run:
    user = live.ScriptedUser(username)
    storage = MemoryStorage()
    calls: list[tuple[str, str, int]] = []
    token_request: dict[str, list[str]] = {}
    redirect: dict[str, str] = {}

    async def record(response: httpx2.Response) -> None:
        request = response.request
        calls.append((request.method, str(request.url).split("?")[0], response.status_code))
        if str(request.url).endswith("/o/token/"):
            token_request.update(parse_qs(request.content.decode()))

    async def redirect_handler(url: str) -> None:
        redirect.update(await anyio.to_thread.run_sync(user.authorize, url))

    async def callback_handler() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(code=redirect["code"], state=redirect.get("state"), iss=redirect.get("iss"))

    async def main() -> dict[str, Any]:
        provider = OAuthClientProvider(
            server_url=server.url,
            client_metadata=OAuthClientMetadata(
                client_name="teams e2e",
                redirect_uris=[AnyUrl(live.REDIRECT_URI)],
                grant_types=["authorization_code", "refresh_token"],
                response_types=["code"],
                token_endpoint_auth_method="none",
            ),
            storage=storage,
            redirect_handler=redirect_handler,
            callback_handler=callback_handler,
        )
        async with (
            httpx2.AsyncClient(auth=provider, timeout=30, event_hooks={"response": [record]}) as http,
            Client(streamable_http_client(server.url, http_client=http), mode=mode) as client,
        ):
            uris: list[str] = []
            pages = 0
            cursor = None
            while True:
                page = await client.list_resources(cursor=cursor, cache_mode="bypass")
                pages += 1
                uris += [resource.uri for resource in page.resources]
                cursor = page.next_cursor
                if cursor is None:
                    break
            attachment = next(uri for uri in uris if uri.startswith("teams://attachments/"))
            read = await client.read_resource(attachment)
            return {"protocol": client.protocol_version, "uris": uris, "pages": pages, "attachment": read}

    return Run(calls, token_request, storage, user, anyio.run(main))


def expected_uris(project: live.Project, username: str) -> set[str]:
    code = (
        "import json; from django.contrib.auth import get_user_model; from teams.models import *; "
        f"u = get_user_model().objects.get(username={username!r}); "
        "print(json.dumps([f'teams://organisations/{o.slug}' for o in Organisation.objects.filter(members=u)]"
        " + [f'teams://projects/{p.pk}' for p in Project.objects.filter(members=u)]"
        " + [f'teams://tickets/{t.pk}' for t in Ticket.objects.filter(project__members=u)]"
        " + [f'teams://attachments/{a.pk}' for a in Attachment.objects.filter(ticket__project__members=u)]))"
    )
    import json

    return {"teams://about", *json.loads(project.shell(code))}


def assert_from_the_bare_url_to_a_listing(server: live.Server, run: Run, protocol: str, username: str) -> None:
    assert run.results["protocol"] == protocol
    assert set(run.results["uris"]) == expected_uris(server.project, username)
    assert len(run.results["uris"]) == len(set(run.results["uris"]))
    assert run.results["pages"] >= 2
    (content,) = run.results["attachment"].contents
    assert isinstance(content, BlobResourceContents)
    assert base64.b64decode(content.blob) == PAYLOAD

    # Discovery from the 401, by the metadata this package mounts, and registration where the metadata says.
    first_refusal = next(i for i, call in enumerate(run.calls) if call[2] == 401)
    assert run.calls[first_refusal][:2] == ("POST", server.url)
    assert run.calls[first_refusal + 1 : first_refusal + 6] == [
        ("GET", server.base + "/.well-known/oauth-protected-resource/mcp", 200),
        ("GET", server.base + "/.well-known/oauth-authorization-server", 200),
        ("POST", server.base + "/o/register/", 201),
        ("POST", server.base + "/o/token/", 200),
        ("POST", server.url, 200),
    ]
    assert all(status < 400 for _, _, status in run.calls[first_refusal + 1 :])
    assert run.token_request["resource"] == [server.url]
    assert "code_verifier" in run.token_request

    # The consent page the package ships: the client, the scopes' descriptions, this server's name.
    (page,) = run.user.consent_pages
    assert "teams e2e asks to act on your behalf" in page
    assert "See your organisations, your projects and their tickets" in page
    assert "Download the attachments of your projects&#x27; tickets" in page
    assert f"Teams <small>(<code>{server.url}</code>)" in page

    assert run.storage.tokens is not None
    stored = server.project.stored_token(run.storage.tokens.access_token)
    assert stored == {"scope": live.SCOPES, "resource": [server.url], "user": username}


def test_2026_07_28_mode_from_the_bare_url_to_a_listing(server: live.Server) -> None:
    run = run_sdk(server, "2026-07-28", "ann")
    assert_from_the_bare_url_to_a_listing(server, run, "2026-07-28", "ann")


def test_legacy_mode_from_the_bare_url_to_a_listing(server: live.Server) -> None:
    run = run_sdk(server, "legacy", "ben")
    assert_from_the_bare_url_to_a_listing(server, run, "2025-11-25", "ben")


def test_server_log_is_clean(server: live.Server) -> None:
    server.assert_log_clean()
