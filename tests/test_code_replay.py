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
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx2
import pytest

from tests import live
from tests.conftest import RESOURCE
from tests.test_oauth_e2e import REDIRECT_URI, ScriptedUser, first_document, mcp_call


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


@pytest.mark.e2e
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


@pytest.mark.e2e
def test_a_code_never_exchanged_revokes_nothing(demo_server: live.Server) -> None:
    """An unknown or mistyped code is only refused: there is nothing it was exchanged for."""
    exchange = authorize(demo_server, "alice")
    tokens = token_request(demo_server, exchange).json()
    wrong = token_request(demo_server, {**exchange, "code": exchange["code"][:-2] + "xx"})
    assert wrong.json()["error"] == "invalid_grant"
    uri = f"learn://documents/{first_document(demo_server, 'alice')}"
    assert reads(demo_server, tokens["access_token"], uri) == 200


@pytest.mark.django_db
def test_two_exchanges_racing_each_other_lose_both_tokens(client: Any, alice: Any) -> None:
    """Two exchanges of one code at once both pass django-oauth-toolkit's check (the grant is still there) and are
    both given tokens; the one that loses the grant's deletion is refused, and the tokens of both are revoked.

    oauthlib's order for each exchange: ``validate_code``, ``save_bearer_token``, ``invalidate_authorization_code``;
    here the two are interleaved as two workers would, on the real validator and database."""
    from django.test import Client as DjangoClient
    from oauth2_provider.models import get_access_token_model, get_application_model, get_grant_model
    from oauthlib.common import Request
    from oauthlib.oauth2.rfc6749 import errors

    from mcp_resources.auth.validators import OAuth2Validator
    from tests.test_auth import authorize as authorize_request
    from tests.test_auth import pkce, register

    browser: DjangoClient = client
    client_id = register(browser)
    _, challenge = pkce()
    browser.force_login(alice)
    consent = authorize_request(
        browser, client_id, code_challenge=challenge, code_challenge_method="S256", resource=RESOURCE
    )
    form = {k: v for k, v in consent.context["form"].initial.items() if v is not None}
    approved = browser.post(consent.request["PATH_INFO"], {**form, "allow": "Authorize"})
    code = parse_qs(urlsplit(approved["Location"]).query)["code"][0]
    application = get_application_model().objects.get(client_id=client_id)

    def exchange() -> Any:
        request = Request(f"http://testserver/o/token/?{urlencode({'resource': RESOURCE})}", http_method="POST")
        request.client, request.client_id, request.grant_type, request.code = (
            application,
            client_id,
            "authorization_code",
            code,
        )
        request.resource = RESOURCE
        return request

    validator = OAuth2Validator()
    first, second = exchange(), exchange()
    assert validator.validate_code(client_id, code, application, first)
    assert validator.validate_code(client_id, code, application, second)
    tokens = []
    for request in (first, second):
        token = {
            "access_token": secrets.token_urlsafe(24),
            "refresh_token": secrets.token_urlsafe(24),
            "scope": "documents:read",
            "expires_in": 3600,
            "token_type": "Bearer",
        }
        validator.save_bearer_token(token, request)
        tokens.append(token["access_token"])
    issued = get_access_token_model().objects.filter(application=application, user=alice)
    assert issued.count() == 2
    validator.invalidate_authorization_code(client_id, code, first)
    with pytest.raises(errors.InvalidGrantError):
        validator.invalidate_authorization_code(client_id, code, second)
    assert not get_grant_model().objects.filter(application=application).exists()
    assert not issued.exists()
    assert get_access_token_model().objects.filter(application=application).count() == 1  # its registration token
