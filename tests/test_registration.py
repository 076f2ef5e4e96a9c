"""Client registration under MCP's rules (issue 27, failures 1 and 2): redirect URIs https or loopback http, RFC
8252 private-use schemes only where the project names them, no userinfo, fragment or wildcard host; only the grants
and response types the server serves; a throttle per client address; RFC 7591's errors.

The requests go to the demo's real endpoints (``/o/register/``, ``/o/authorize/``): through Django's test client
for the rules, and through a live uvicorn server of the demo for what the issue saw (a plain-http redirect receiving
the authorization code, 200 of 200 registrations accepted in a burst).
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from base64 import urlsafe_b64encode
from html import unescape
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx2
import pytest
from django.contrib.auth.models import User
from django.core.cache import caches
from django.test import Client
from django.urls import include, path
from oauth2_provider.cimd import resolve_cimd_application
from oauth2_provider.models import get_application_model

from mcp_resources.auth.registration import MetadataFetcher, parse_rate, redirect_uri_problem
from mcp_resources.auth.server_urls import authorization_server_urlpatterns
from mcp_resources.urls import well_known_urlpatterns
from tests import live
from tests.conftest import urlconf

HIDDEN = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)"')
ALLOWED = [
    "https://app.example.com/cb",
    "https://app.example.com:8443/oauth/callback?x=1",
    "http://127.0.0.1/cb",
    "http://127.0.0.1:53124/cb",
    "http://[::1]:3000/cb",
    "http://localhost:6274/oauth/callback",
    "HTTP://LOCALHOST:1/cb",
]
REFUSED = [
    "http://evil.example.com/cb",  # plain http off loopback (the issue)
    "http://10.0.0.5/cb",
    "http://0.0.0.0:3000/cb",
    "http://127.0.0.1.evil.example.com/cb",
    "http://localhost.evil.example.com/cb",
    "https://app.example.com@evil.example.com/cb",  # userinfo (the issue)
    "https://user:pass@app.example.com/cb",
    "http://evil.example.com@127.0.0.1/cb",
    "https://app.example.com/cb#fragment",
    "https://*.example.com/cb",
    "https://app.example.com\\@evil.example.com/cb",
    "https://app.example.com/c b",
    "https:///cb",
    "https://app.example.com:99999/cb",
    "cursor://anysphere.cursor-retrieval/oauth/callback",  # a private-use scheme the project did not name
    "javascript:alert(1)",
    "data:text/html,x",
    "file:///etc/passwd",
    "/relative/cb",
]


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    return verifier, urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


def register(client: Client, **metadata: Any) -> Any:
    body = {"redirect_uris": ["http://127.0.0.1:9/cb"], "token_endpoint_auth_method": "none", **metadata}
    return client.post("/o/register/", json.dumps(body), content_type="application/json")


# The rule itself ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("uri", ALLOWED)
def test_mcp_allows_https_and_loopback_http(uri: str) -> None:
    assert redirect_uri_problem(uri) is None


@pytest.mark.parametrize("uri", REFUSED)
def test_mcp_refuses_everything_else(uri: str) -> None:
    assert redirect_uri_problem(uri) is not None


def test_private_use_schemes_only_where_named() -> None:
    uri = "cursor://anysphere.cursor-retrieval/oauth/callback"
    assert redirect_uri_problem(uri, frozenset({"cursor"})) is None
    assert redirect_uri_problem("com.example.app:/oauth2redirect", frozenset({"com.example.app"})) is None
    assert redirect_uri_problem("cursor://x@evil/cb", frozenset({"cursor"})) is not None  # userinfo still refused
    assert redirect_uri_problem("cursor://cb#f", frozenset({"cursor"})) is not None


def test_an_unknown_registration_cache_fails_at_startup() -> None:
    from django.core.exceptions import ImproperlyConfigured

    with pytest.raises(ImproperlyConfigured, match="'nowhere'"):
        authorization_server_urlpatterns(registration_cache="nowhere")
    authorization_server_urlpatterns(registration_rate=None, registration_cache="nowhere")  # no throttle: unused


@pytest.mark.parametrize("rate", ["20", "x/hour", "0/hour", "5/fortnight", "-1/day"])
def test_malformed_rates_fail_at_startup(rate: str) -> None:
    from django.core.exceptions import ImproperlyConfigured

    with pytest.raises(ImproperlyConfigured):
        parse_rate(rate)
    with pytest.raises(ImproperlyConfigured):
        authorization_server_urlpatterns(registration_rate=rate)


# Through the demo's registration endpoint ---------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("uri", REFUSED)
def test_registration_refuses_redirect_uris_mcp_does_not_allow(client: Client, uri: str) -> None:
    response = register(client, redirect_uris=["https://app.example.com/ok", uri])
    assert response.status_code == 400, response.content
    assert response.json()["error"] == "invalid_redirect_uri"
    assert response["Cache-Control"] == "no-store"
    assert not get_application_model().objects.exists()


@pytest.mark.django_db
def test_registration_accepts_what_mcp_allows(client: Client) -> None:
    response = register(client, redirect_uris=ALLOWED)
    assert response.status_code == 201, response.content
    assert response.json()["redirect_uris"] == ALLOWED


@pytest.mark.django_db
def test_a_private_use_scheme_the_project_names_is_registered(client: Client, settings: Any) -> None:
    uri = "cursor://anysphere.cursor-retrieval/oauth/callback"
    assert register(client, redirect_uris=[uri]).json()["error"] == "invalid_redirect_uri"
    settings.OAUTH2_PROVIDER = {
        **settings.OAUTH2_PROVIDER,
        "ALLOWED_REDIRECT_URI_SCHEMES": ["http", "https", "cursor"],
    }
    response = register(client, redirect_uris=[uri])
    assert response.status_code == 201, response.content


@pytest.mark.django_db
@pytest.mark.parametrize(
    "metadata",
    [
        {"grant_types": ["client_credentials"]},
        {"grant_types": ["password"]},
        {"grant_types": ["implicit"], "response_types": ["token"]},
        {"grant_types": ["implicit"]},
        {"grant_types": ["urn:ietf:params:oauth:grant-type:device_code"]},
        {"grant_types": ["authorization_code", "refresh_token", "client_credentials"]},
        {"response_types": ["token"]},
        {"response_types": ["code", "id_token"]},
        {"response_types": "code"},
    ],
    ids=lambda metadata: json.dumps(metadata),
)
def test_registration_refuses_what_the_server_does_not_serve(client: Client, metadata: dict[str, Any]) -> None:
    response = register(client, **metadata)
    assert response.status_code == 400, response.content
    assert response.json()["error"] == "invalid_client_metadata"
    assert not get_application_model().objects.exists()


@pytest.mark.django_db
def test_registration_accepts_the_authorization_code_grant(client: Client) -> None:
    response = register(client, grant_types=["authorization_code", "refresh_token"], response_types=["code"])
    assert response.status_code == 201, response.content


@pytest.mark.django_db
def test_an_update_follows_the_same_rules(client: Client) -> None:
    registered = register(client).json()
    headers = {"Authorization": f"Bearer {registered['registration_access_token']}"}
    url = urlsplit(registered["registration_client_uri"]).path
    update = {"redirect_uris": ["http://evil.example.com/cb"], "token_endpoint_auth_method": "none"}
    response = client.put(url, json.dumps(update), content_type="application/json", headers=headers)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_redirect_uri"
    application = get_application_model().objects.get(client_id=registered["client_id"])
    assert application.redirect_uris == "http://127.0.0.1:9/cb"
    # Without the registration access token, the rules are not even consulted: 401 as before.
    assert client.put(url, json.dumps(update), content_type="application/json").status_code == 401
    good = {**update, "redirect_uris": ["https://app.example.com/cb"]}
    assert client.put(url, json.dumps(good), content_type="application/json", headers=headers).status_code == 200


# The throttle -------------------------------------------------------------------------------------------------


def _throttled_urls(rate: str | None, cache: str = "default") -> Any:
    return urlconf(
        path("mcp", include("mcp_resources.urls")),
        *well_known_urlpatterns("mcp"),
        *authorization_server_urlpatterns(registration_rate=rate, registration_cache=cache),
    )


@pytest.mark.django_db
@pytest.mark.parametrize("cache", ["default", "redis"])
def test_registration_is_throttled_per_client_address(client: Client, settings: Any, cache: str) -> None:
    if cache == "redis":
        settings.CACHES = {
            **settings.CACHES,
            "redis": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": live.require_redis()},
        }
    caches[cache].clear()
    settings.ROOT_URLCONF = _throttled_urls("3/hour", cache)
    assert [register(client).status_code for _ in range(3)] == [201, 201, 201]
    refused = register(client)
    assert refused.status_code == 429
    assert refused.json()["error"] == "temporarily_unavailable"
    assert 1 <= int(refused["Retry-After"]) <= 3600
    # A refused attempt registers nothing; another address is counted apart.
    assert get_application_model().objects.count() == 3
    other = Client(REMOTE_ADDR="192.0.2.7")
    assert register(other).status_code == 201
    assert register(client, redirect_uris=["http://evil.example.com/cb"]).status_code == 429  # counted first
    caches[cache].clear()


@pytest.mark.django_db
def test_no_throttle_when_the_rate_is_none(client: Client, settings: Any) -> None:
    settings.ROOT_URLCONF = _throttled_urls(None)
    assert {register(client).status_code for _ in range(25)} == {201}


# Client ID metadata documents ------------------------------------------------------------------------------------

DOCUMENTS: dict[str, dict[str, Any]] = {}


class DocumentsFetcher(MetadataFetcher):
    """The package's fetcher with the network step answered from ``DOCUMENTS`` (loopback tests cannot serve the
    public https URL a client ID metadata document needs)."""

    def fetch_document(self, client_id: str) -> tuple[dict[str, Any], int]:
        return DOCUMENTS[client_id], 3600


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("redirect_uri", "resolved"),
    [
        ("https://client.example/cb", True),
        ("http://127.0.0.1:4000/cb", True),
        ("http://client.example/cb", False),
        ("https://client.example@evil.example/cb", False),
        ("https://client.example/cb#x", False),
    ],
)
def test_client_id_metadata_documents_follow_the_same_rules(
    client: Client, settings: Any, alice: User, redirect_uri: str, resolved: bool
) -> None:
    assert settings.OAUTH2_PROVIDER["CIMD_METADATA_FETCHER"] == "mcp_resources.auth.registration.MetadataFetcher"
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "CIMD_METADATA_FETCHER": DocumentsFetcher}
    client_id = f"https://client.example/{secrets.token_hex(4)}.json"
    DOCUMENTS[client_id] = {
        "client_id": client_id,
        "client_name": "Documented client",
        "redirect_uris": [redirect_uri],
        "token_endpoint_auth_method": "none",
    }
    caches["default"].clear()  # django-oauth-toolkit's failure backoff
    _, challenge = pkce()
    client.force_login(alice)
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "scope": "documents:read",
        "state": "s",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    page = client.get("/o/authorize/?" + urlencode(query))
    assert get_application_model().objects.filter(client_id=client_id).exists() is resolved
    if resolved:
        assert page.status_code == 200
        assert "Documented client asks to act on your behalf" in page.content.decode()
    else:
        assert page.status_code == 400
        assert page.context["error"].error == "invalid_request"  # oauthlib's InvalidClientIdError: an unknown client
        assert "Location" not in page
    DOCUMENTS.pop(client_id)


@pytest.mark.django_db
def test_a_document_granting_more_than_is_served_is_refused(settings: Any) -> None:
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "CIMD_METADATA_FETCHER": DocumentsFetcher}
    client_id = "https://client.example/implicit.json"
    DOCUMENTS[client_id] = {
        "client_id": client_id,
        "redirect_uris": ["https://client.example/cb"],
        "grant_types": ["implicit"],
        "response_types": ["token"],
        "token_endpoint_auth_method": "none",
    }
    caches["default"].clear()
    assert resolve_cimd_application(client_id, None) is None
    DOCUMENTS.pop(client_id)


# What the issue saw, on a live server -----------------------------------------------------------------------------


@pytest.mark.e2e
def test_a_live_server_sends_no_code_to_a_plain_http_redirect(demo_server: live.Server) -> None:
    with httpx2.Client(base_url=demo_server.base, timeout=30) as http:
        for uri in ("http://evil.example.com/cb", "http://10.0.0.5/cb", "http://0.0.0.0:3000/cb"):
            refused = http.post("/o/register/", json={"redirect_uris": [uri], "token_endpoint_auth_method": "none"})
            assert refused.status_code == 400, (uri, refused.text)
            assert refused.json()["error"] == "invalid_redirect_uri"
        trick = {"redirect_uris": ["https://app.example.com@evil.example.com/cb"], "token_endpoint_auth_method": "none"}
        userinfo = http.post("/o/register/", json=trick)
        assert userinfo.json()["error"] == "invalid_redirect_uri"
        granted = http.post(
            "/o/register/", json={"redirect_uris": ["http://127.0.0.1:9/cb"], "grant_types": ["client_credentials"]}
        )
        assert granted.json()["error"] == "invalid_client_metadata"

        # A loopback client still goes all the way: sign in, consent, the code on its loopback redirect.
        client_id = http.post(
            "/o/register/", json={"redirect_uris": ["http://127.0.0.1:9/cb"], "token_endpoint_auth_method": "none"}
        ).json()["client_id"]
        _, challenge = pkce()
        query = urlencode(
            {
                "response_type": "code",
                "client_id": client_id,
                "redirect_uri": "http://127.0.0.1:9/cb",
                "scope": "documents:read",
                "state": "s",
                "code_challenge": challenge,
                "code_challenge_method": "S256",
                "resource": demo_server.url,
            }
        )
        login = http.get("/accounts/login/")
        csrf = http.cookies["csrftoken"]
        credentials = {"username": "alice", "password": "alice", "csrfmiddlewaretoken": csrf}
        signed_in = http.post("/accounts/login/", data={**credentials, "next": "/o/authorize/?" + query})
        assert signed_in.status_code == 302, login.text
        consent = http.get("/o/authorize/?" + query)
        assert consent.status_code == 200
        fields = {name: unescape(value) for name, value in HIDDEN.findall(consent.text)}
        approved = http.post("/o/authorize/?" + query, data={**fields, "allow": "Authorize"})
        assert approved.status_code == 302
        location = approved.headers["location"]
        assert location.startswith("http://127.0.0.1:9/cb?")
        assert "code" in parse_qs(urlsplit(location).query)


@pytest.mark.e2e
def test_a_live_server_throttles_a_burst_of_registrations(demo_server: live.Server) -> None:
    """200 registrations in a burst from one address: the first 20 (the default rate, 20 an hour) are accepted."""
    with httpx2.Client(base_url=demo_server.base, timeout=30) as http:
        body = {"redirect_uris": ["http://127.0.0.1:9/cb"], "token_endpoint_auth_method": "none"}
        statuses = [http.post("/o/register/", json=body).status_code for _ in range(200)]
    accepted = statuses.count(201)
    assert accepted <= 20
    assert statuses.count(429) == 200 - accepted
    assert statuses[-1] == 429
