"""The pages a person sees (issue 27, failures 5 and 6): consent, sign-in and connected apps are neither cached nor
framed; the connected-apps page lists the AI clients a signed-in person authorized, with scopes and last use, and
disconnecting one stops its tokens at once and ends its 2025-11-25 sessions.

Through the demo's URLs with Django's test client; tests/test_browser.py walks the same pages in Chromium.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from base64 import urlsafe_b64encode
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_application_model, get_refresh_token_model

from mcp_resources.auth.connections import connections_of
from mcp_resources.auth.tokens import issue_access_token
from mcp_resources.transport.sessions import session_cache
from tests.conftest import RESOURCE
from tests.test_sessions import initialize, ping

pytestmark = pytest.mark.django_db

CONNECTED = "/o/connected/"


def assert_private(response: Any) -> None:
    """Never stored by a cache, never framed."""
    assert "no-store" in response["Cache-Control"], response.get("Cache-Control")
    assert response["X-Frame-Options"] == "DENY"
    assert "frame-ancestors 'none'" in response["Content-Security-Policy"]


def token_for(user: User, client_name: str, scope: str = "documents:read") -> str:
    return issue_access_token(user, scope, [RESOURCE], 3600, client_name)


def mcp_read_status(token: str) -> int:
    """The status of an authenticated ``resources/list`` (2026-07-28) with ``token``."""
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "resources/list", "params": {"_meta": meta}}
    headers = {"Authorization": f"Bearer {token}", "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "resources/list"}
    return int(Client().post("/mcp", json.dumps(body), content_type="application/json", headers=headers).status_code)


def application(name: str) -> Any:
    return get_application_model().objects.get(name=name)


# Not cached, not framed ---------------------------------------------------------------------------------------


def test_the_consent_page_is_private(client: Client, alice: User) -> None:
    registration = client.post(
        "/o/register/",
        json.dumps({"redirect_uris": ["http://127.0.0.1:9/cb"], "token_endpoint_auth_method": "none"}),
        content_type="application/json",
    )
    verifier = secrets.token_urlsafe(48)
    challenge = urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    query = urlencode(
        {
            "response_type": "code",
            "client_id": registration.json()["client_id"],
            "redirect_uri": "http://127.0.0.1:9/cb",
            "scope": "documents:read",
            "code_challenge": challenge,
            "code_challenge_method": "S256",
        }
    )
    assert_private(client.get("/o/authorize/?" + query))  # the redirect to sign in
    client.force_login(alice)
    page = client.get("/o/authorize/?" + query)
    assert page.status_code == 200
    assert_private(page)
    assert_private(client.get("/o/authorize/?client_id=unknown&response_type=code"))  # the error page


def test_the_sign_in_page_is_private(client: Client) -> None:
    page = client.get("/accounts/login/?next=/o/connected/")
    assert page.status_code == 200
    assert_private(page)
    assert_private(client.post("/accounts/login/", {"username": "nobody", "password": "x"}))


def test_the_connected_apps_page_is_private(client: Client, alice: User) -> None:
    anonymous = client.get(CONNECTED)
    assert anonymous.status_code == 302
    assert anonymous["Location"].startswith("/accounts/login/?next=")
    assert_private(anonymous)
    client.force_login(alice)
    assert_private(client.get(CONNECTED))


def test_a_projects_own_policy_keeps_its_directives() -> None:
    from django.http import HttpResponse

    from mcp_resources.auth.server_views import make_private

    response = HttpResponse()
    response["Content-Security-Policy"] = "default-src 'self'"
    assert make_private(response)["Content-Security-Policy"] == "default-src 'self'; frame-ancestors 'none'"
    response["Content-Security-Policy"] = "frame-ancestors https://portal.example.com"
    assert make_private(response)["Content-Security-Policy"] == "frame-ancestors https://portal.example.com"


# The list ---------------------------------------------------------------------------------------------------


def test_a_person_sees_the_clients_they_authorized(client: Client, alice: User, bob: User) -> None:
    token_for(alice, "Claude Desktop", "documents:read")
    token_for(alice, "Cursor", "documents")
    token_for(bob, "Bob's agent")
    expired = token_for(alice, "Old client")
    get_access_token_model().objects.filter(application=application("Old client")).update(
        expires=timezone.now() - timedelta(seconds=1)
    )
    client.force_login(alice)
    page = client.get(CONNECTED)
    html = page.content.decode()
    assert page.templates[0].name == "mcp_resources/oauth/connected_apps.html"
    names = [connection.name for connection in page.context["connections"]]
    assert sorted(names) == ["Claude Desktop", "Cursor"]  # not bob's, not an expired token's
    assert "Read your documents and notes" in html  # the scope's description
    assert "All of your documents" in html
    assert "Bob&#x27;s agent" not in html
    assert "Bob's agent" not in html
    assert expired
    cursor = next(c for c in page.context["connections"] if c.name == "Cursor")
    assert cursor.scope_descriptions == [("documents", "All of your documents (implies documents:read)")]
    assert cursor.last_used is not None
    assert cursor.authorized is not None


def test_a_client_with_only_a_refresh_token_left_is_still_connected(alice: User) -> None:
    token_for(alice, "Refreshing client")
    access = get_access_token_model().objects.get(application=application("Refreshing client"))
    get_refresh_token_model().objects.create(
        user=alice, application=access.application, token=secrets.token_urlsafe(16), access_token=access
    )
    get_access_token_model().objects.filter(pk=access.pk).update(expires=timezone.now() - timedelta(seconds=1))
    [connection] = connections_of(alice)
    assert connection.name == "Refreshing client"
    assert connection.scopes == {"documents:read"}


def test_registration_tokens_are_no_connection(client: Client, alice: User) -> None:
    client.force_login(alice)  # a signed-in registration gets a registration access token of hers
    response = client.post(
        "/o/register/",
        json.dumps({"redirect_uris": ["http://127.0.0.1:9/cb"], "token_endpoint_auth_method": "none"}),
        content_type="application/json",
    )
    assert response.status_code == 201
    assert connections_of(alice) == []


# Disconnecting ---------------------------------------------------------------------------------------------


def test_disconnecting_a_client_stops_its_tokens_at_once(client: Client, alice: User, bob: User) -> None:
    claude = token_for(alice, "Claude Desktop")
    claude_again = token_for(alice, "Claude Desktop")
    refresh = get_refresh_token_model().objects.create(
        user=alice,
        application=application("Claude Desktop"),
        token=secrets.token_urlsafe(16),
        access_token=get_access_token_model().objects.filter(application=application("Claude Desktop")).first(),
    )
    cursor = token_for(alice, "Cursor")
    bobs_claude = token_for(bob, "Claude Desktop")
    assert {mcp_read_status(token) for token in (claude, claude_again, cursor, bobs_claude)} == {200}

    client.force_login(alice)
    response = client.post(CONNECTED, {"client_id": application("Claude Desktop").client_id})
    assert response.status_code == 303
    assert response["Location"] == CONNECTED
    assert_private(response)
    page = client.get(CONNECTED)
    assert [c.name for c in page.context["connections"]] == ["Cursor"]
    assert "Claude Desktop is disconnected" in page.content.decode()

    assert mcp_read_status(claude) == 401
    assert mcp_read_status(claude_again) == 401
    refresh.refresh_from_db()
    assert refresh.revoked is not None
    assert mcp_read_status(cursor) == 200  # her other client
    assert mcp_read_status(bobs_claude) == 200  # the same client, for another person


def test_disconnecting_ends_the_clients_sessions(client: Client, alice: User, settings: Any) -> None:
    settings.ROOT_URLCONF = "tests.urls_sessions"
    session_cache().clear()
    claude = token_for(alice, "Claude Desktop")
    cursor = token_for(alice, "Cursor")
    claudes = initialize(client, "/public/mcp", claude)["Mcp-Session-Id"]
    cursors = initialize(client, "/public/mcp", cursor)["Mcp-Session-Id"]
    client.force_login(alice)
    client.post(CONNECTED, {"client_id": application("Claude Desktop").client_id})
    # Re-authorized, the client gets a new token: its old session is gone all the same.
    claude = token_for(alice, "Claude Desktop")
    assert ping(client, claudes, "/public/mcp", claude) == 404
    assert ping(client, cursors, "/public/mcp", cursor) == 200
    session_cache().clear()


def test_one_cannot_disconnect_what_is_not_theirs(client: Client, alice: User, bob: User) -> None:
    bobs = token_for(bob, "Bob's agent")
    client.force_login(alice)
    response = client.post(CONNECTED, {"client_id": application("Bob's agent").client_id})
    assert response.status_code == 303
    assert mcp_read_status(bobs) == 200
    assert client.post(CONNECTED, {"client_id": "no such client"}).status_code == 303


def test_disconnecting_needs_the_csrf_token(alice: User) -> None:
    token = token_for(alice, "Claude Desktop")
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)
    assert browser.post(CONNECTED, {"client_id": application("Claude Desktop").client_id}).status_code == 403
    assert mcp_read_status(token) == 200


def test_a_project_overrides_the_connected_apps_page(client: Client, alice: User, settings: Any, tmp_path: Any) -> None:
    override = tmp_path / "mcp_resources" / "oauth"
    override.mkdir(parents=True)
    (override / "connected_apps.html").write_text(
        "{% for c in connections %}{{ c.name }}:{% for s, d in c.scope_descriptions %}{{ s }}{% endfor %};{% endfor %}"
    )
    settings.TEMPLATES = [{**settings.TEMPLATES[0], "DIRS": [tmp_path, *settings.TEMPLATES[0]["DIRS"]]}]
    token_for(alice, "Claude Desktop")
    client.force_login(alice)
    assert client.get(CONNECTED).content.decode() == "Claude Desktop:documents:read;"
