"""A replayed authorization code revokes the tokens issued from it (issue 27, failure 4; RFC 6749 sections 4.1.2 and
10.5), end to end on a live uvicorn server of the demo: registration, sign-in and consent as a browser does them, the
code exchanged at ``/o/token/``, the tokens used at ``/mcp``.

django-oauth-toolkit refuses the second exchange (``invalid_grant``) but leaves the first exchange's tokens valid;
``mcp_resources.auth.validators.OAuth2Validator`` (named by ``authorization_server_settings()``) revokes them, and
every token refreshed from them since.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import secrets
from typing import Any
from urllib.parse import urlencode

import httpx2
import pytest

from tests import live
from tests.test_oauth_e2e import REDIRECT_URI, ScriptedUser, first_document, mcp_call

pytestmark = pytest.mark.e2e


def authorize(server: live.Server, username: str) -> dict[str, str]:
    """Register a public client, sign in as ``username`` and consent; the code and what redeeming it needs."""
    registration = httpx2.post(
        server.base + "/o/register/",
        json={"client_name": "replay", "redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "none"},
        timeout=30,
    )
    assert registration.status_code == 201, registration.text
    client_id = registration.json()["client_id"]
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    query = urlencode(
        {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": REDIRECT_URI,
            "scope": "documents:read",
            "state": "s",
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "resource": server.url,
        }
    )
    redirect = asyncio.run(ScriptedUser(username, username).authorize(f"{server.base}/o/authorize/?{query}"))
    return {
        "grant_type": "authorization_code",
        "code": redirect["code"],
        "redirect_uri": REDIRECT_URI,
        "client_id": client_id,
        "code_verifier": verifier,
        "resource": server.url,
    }


def token_request(server: live.Server, data: dict[str, str]) -> httpx2.Response:
    return httpx2.post(server.base + "/o/token/", data=data, timeout=30)


def reads(server: live.Server, token: str, uri: str) -> int:
    return mcp_call(server, "resources/read", {"uri": uri}, token).status_code


def test_a_replayed_code_revokes_the_tokens_issued_from_it(demo_server: live.Server) -> None:
    uri = f"learn://documents/{first_document(demo_server, 'alice')}"
    exchange = authorize(demo_server, "alice")
    first = token_request(demo_server, exchange)
    assert first.status_code == 200, first.text
    tokens: dict[str, Any] = first.json()
    assert reads(demo_server, tokens["access_token"], uri) == 200

    # The client refreshes once: the new pair descends from the code too.
    refreshed = token_request(
        demo_server,
        {
            "grant_type": "refresh_token",
            "refresh_token": tokens["refresh_token"],
            "client_id": exchange["client_id"],
            "resource": demo_server.url,
        },
    ).json()
    assert reads(demo_server, refreshed["access_token"], uri) == 200

    # Another person's tokens, from another code of another client, are no part of it.
    bystander = token_request(demo_server, authorize(demo_server, "bob")).json()
    bob_uri = f"learn://documents/{first_document(demo_server, 'bob')}"
    assert reads(demo_server, bystander["access_token"], bob_uri) == 200

    replay = token_request(demo_server, exchange)
    assert replay.status_code == 400
    assert replay.json()["error"] == "invalid_grant"

    assert reads(demo_server, tokens["access_token"], uri) == 401
    assert reads(demo_server, refreshed["access_token"], uri) == 401
    again = token_request(
        demo_server,
        {
            "grant_type": "refresh_token",
            "refresh_token": refreshed["refresh_token"],
            "client_id": exchange["client_id"],
            "resource": demo_server.url,
        },
    )
    assert again.status_code == 400
    assert again.json()["error"] == "invalid_grant"
    assert reads(demo_server, bystander["access_token"], bob_uri) == 200
    assert "authorization code used again: revoked the tokens of 1 exchange(s)" in demo_server.logged()


def test_a_code_never_exchanged_revokes_nothing(demo_server: live.Server) -> None:
    """An unknown or mistyped code is only refused: there is nothing it was exchanged for."""
    exchange = authorize(demo_server, "alice")
    tokens = token_request(demo_server, exchange).json()
    wrong = token_request(demo_server, {**exchange, "code": exchange["code"][:-2] + "xx"})
    assert wrong.json()["error"] == "invalid_grant"
    uri = f"learn://documents/{first_document(demo_server, 'alice')}"
    assert reads(demo_server, tokens["access_token"], uri) == 200
