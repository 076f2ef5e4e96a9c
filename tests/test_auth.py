"""The OAuth 2.1 resource server (``mcp_resources.auth``) and the demo's authorization server.

Requests go through Django's test client to ``/mcp`` of ``tests.urls_auth`` (templates that make each rule
visible) or of the demo's own URLconf; tokens are real django-oauth-toolkit rows. The rules come from the MCP
authorization spec (mcp-protocol.md section 6 and the checklist) and issue 3.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_application_model, get_refresh_token_model
from oauth2_provider.oauth2_validators import OAuth2Validator

from mcp_resources.auth import OAuth2Authentication, expand_scopes
from mcp_resources.auth.authentication import valid_subject
from mcp_resources.auth.metadata import normalize_resource_uri, resource_metadata_url
from mcp_resources.auth.tokencache import CachedToken, TokenCache, token_cache
from mcp_resources.auth.tokens import issue_access_token
from mcp_resources.checks import check_auth_settings
from mcp_resources.models import StaticResource
from testproject.library.models import Document

pytestmark = pytest.mark.django_db

AccessToken = get_access_token_model()
Application = get_application_model()

VERSION = "2026-07-28"
RESOURCE = "http://testserver/mcp"
METADATA_URL = "http://testserver/.well-known/oauth-protected-resource/mcp"
META = {"io.modelcontextprotocol/protocolVersion": VERSION, "io.modelcontextprotocol/clientCapabilities": {}}


# Helpers ----------------------------------------------------------------------------------------------------


def call(
    client: Client,
    method: str,
    params: dict[str, Any] | None = None,
    *,
    token: str | None = None,
    authorization: str | None = None,
    query: str = "",
) -> Any:
    """One 2026-07-28 request to ``/mcp``; ``authorization`` is the raw header value."""
    params = {**(params or {}), "_meta": META}
    headers = {"HTTP_MCP_PROTOCOL_VERSION": VERSION, "HTTP_MCP_METHOD": method}
    if method == "resources/read":
        headers["HTTP_MCP_NAME"] = params["uri"]
    if token is not None:
        headers["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    if authorization is not None:
        headers["HTTP_AUTHORIZATION"] = authorization
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return client.post(
        "/mcp" + query,
        json.dumps(body),
        content_type="application/json",
        HTTP_ACCEPT="application/json, text/event-stream",
        **headers,
    )


def read(client: Client, uri: str, **kwargs: Any) -> Any:
    return call(client, "resources/read", {"uri": uri}, **kwargs)


def text_of(response: Any) -> str:
    assert response.status_code == 200, response.content
    return str(response.json()["result"]["contents"][0]["text"])


def whoami(client: Client, token: str) -> dict[str, Any]:
    return dict(json.loads(text_of(read(client, "auth://whoami/1", token=token))))


def challenge(response: Any, status: int = 401) -> dict[str, str]:
    """The parameters of the response's Bearer challenge (after checking the status)."""
    assert response.status_code == status, (response.status_code, response.content)
    header = response.headers["WWW-Authenticate"]
    assert header.startswith("Bearer ")
    params: dict[str, str] = {}
    for part in header[len("Bearer ") :].split(","):
        key, _, value = part.strip().partition("=")
        params[key] = value.strip('"')
    return params


def checksum(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


# Fixtures ---------------------------------------------------------------------------------------------------


@pytest.fixture
def mcp(settings: Any) -> Any:
    """Serve ``tests.urls_auth``; the resource URI is derived from the request; returns a settings updater."""
    settings.ROOT_URLCONF = "tests.urls_auth"

    def configure(**values: Any) -> None:
        settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, **values}

    configure(RESOURCE_URI=None, TOKEN_CACHE_TTL_SECONDS=0, SCOPE_HIERARCHY={})
    token_cache.clear()
    return configure


@pytest.fixture
def token_for(make_token: Callable[..., str]) -> Callable[..., str]:
    """conftest's ``make_token`` with this module's defaults (scopes ``a:read b:read``, audience ``RESOURCE``).

    ``resource`` may also be a list of several resources, or empty; ``app`` names the application the token is
    issued to (conftest's tokens go to the application ``tests``).
    """

    def make(
        user: Any,
        scope: str = "a:read b:read",
        *,
        resource: str | Sequence[str] = RESOURCE,
        expires_in: float = 3600,
        app: str = "tests",
    ) -> str:
        if isinstance(resource, str) and app == "tests":
            return make_token(user, scope, resource=resource, expires_in=expires_in)
        resources = [resource] if isinstance(resource, str) else list(resource)
        return issue_access_token(user, scope, resources, expires_in, app)  # type: ignore[arg-type]

    return make


def default_application() -> Any:
    """The application conftest's tokens are issued to."""
    return Application.objects.get(name="tests")


def service_application() -> Any:
    """A confidential client-credentials application ``service``: its tokens carry no user."""
    return Application.objects.create(
        name="service",
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_CLIENT_CREDENTIALS,
    )


@pytest.fixture
def cache_clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """The token cache's clocks (monotonic and wall), moved only by the test: no sleeping."""
    clock = Clock(now=time.monotonic(), wall=time.time())
    monkeypatch.setattr(token_cache, "_clock", lambda: clock.now)
    monkeypatch.setattr(token_cache, "_wall_clock", lambda: clock.wall)
    return clock


# Authorization header only ----------------------------------------------------------------------------------

MALFORMED = {
    "basic": "Basic YWxpY2U6YWxpY2U=",
    "no-scheme": "bearer-token",
    "two-tokens": "Bearer tok1 tok2",
    "two-headers-joined": "Bearer tok1,Bearer tok2",
    "empty": "",
    "bearer-empty": "Bearer ",
    "bearer-only": "Bearer",
    "10kB": "Bearer " + "a" * 10_240,
    "non-ascii": "Bearer tök€n",
    "long-s": "Bearer \u017ftoken",  # folds to "s" under a careless case-insensitive match
    "control-char": "Bearer tok\x01en",
    "unknown": "Bearer unknown-token-value-0123456789",
}


@pytest.mark.parametrize("authorization", MALFORMED.values(), ids=MALFORMED.keys())
@pytest.mark.parametrize("method", ["server/discover", "resources/read"])
def test_malformed_or_unknown_authorization_is_401_with_challenge(
    client: Client, mcp: Any, authorization: str, method: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="mcp_resources")
    params = {"uri": "auth://two/1"} if method == "resources/read" else {}
    response = call(client, method, params, authorization=authorization)
    params_ = challenge(response)
    assert params_["error"] == "invalid_token"
    assert params_["resource_metadata"] == METADATA_URL
    assert params_["scope"]  # scopes_supported: the operation's scopes are not known yet
    assert response.json()["error"] == "invalid_token"
    token_part = authorization.partition(" ")[2]
    if len(token_part) > 3:
        assert token_part not in caplog.text
        assert token_part not in response.content.decode()


def test_scheme_is_case_insensitive(client: Client, mcp: Any, alice: User, token_for: Any) -> None:
    token = token_for(alice)
    assert text_of(read(client, "auth://two/1", authorization=f"bearer {token}")) == "two scopes"
    assert text_of(read(client, "auth://two/1", authorization=f"BEARER {token}")) == "two scopes"


def test_token_in_query_string_or_body_is_ignored(client: Client, mcp: Any, alice: User, token_for: Any) -> None:
    token = token_for(alice)
    params = challenge(read(client, "auth://two/1", query=f"?access_token={token}"))
    assert "error" not in params
    body_token = call(client, "resources/read", {"uri": "auth://two/1", "access_token": token})
    assert "error" not in challenge(body_token)


def test_session_cookie_does_not_authenticate(client: Client, mcp: Any, alice: User) -> None:
    client.force_login(alice)
    assert "error" not in challenge(read(client, "auth://whoami/1"))


def test_public_resources_need_no_token(client: Client, mcp: Any) -> None:
    assert text_of(read(client, "auth://open/1")) == "open"
    assert text_of(read(client, "auth://static/public")) == "public static"


# The principal ----------------------------------------------------------------------------------------------


def test_principal_request_user_and_request_auth(client: Client, mcp: Any, alice: User, token_for: Any) -> None:
    caller = whoami(client, token_for(alice))
    assert caller == {
        "user": "alice",
        "auth_is_principal": True,
        "subject": str(alice.pk),
        "client_id": default_application().client_id,
        "scopes": ["a:read", "b:read"],
        "audience": [RESOURCE],
    }


def test_subject_from_an_overridden_get_subject(client: Client, mcp: Any, alice: User, token_for: Any) -> None:
    token = token_for(alice)
    assert whoami(client, token)["subject"] == str(alice.pk)  # the default: the primary key
    mcp(AUTHENTICATION_CLASS="tests.urls_auth.UsernameSubject")
    assert whoami(client, token)["subject"] == "alice"


@pytest.mark.parametrize("username", ["", "al\x01ice", "al\x7fice", "al\x85ice", "tab\tbed"])
def test_invalid_subject_is_refused(client: Client, mcp: Any, token_for: Any, username: str) -> None:
    mcp(AUTHENTICATION_CLASS="tests.urls_auth.UsernameSubject")
    user = User.objects.create(username=username)
    assert challenge(read(client, "auth://whoami/1", token=token_for(user)))["error"] == "invalid_token"


def test_subject_from_an_empty_field_is_refused(client: Client, mcp: Any, alice: User, token_for: Any) -> None:
    token = token_for(alice)
    assert whoami(client, token)["subject"] == str(alice.pk)
    mcp(AUTHENTICATION_CLASS="tests.urls_auth.EmailSubject")  # alice has no email
    assert challenge(read(client, "auth://whoami/1", token=token))["error"] == "invalid_token"


@pytest.mark.parametrize(("length", "accepted"), [(256, True), (257, False)])
def test_subject_length_limit(
    client: Client, mcp: Any, alice: User, token_for: Any, length: int, accepted: bool
) -> None:
    subject = "s" * length
    authentication = type("LongSubject", (OAuth2Authentication,), {"get_subject": lambda self, user: subject})
    mcp(AUTHENTICATION_CLASS=authentication)
    response = read(client, "auth://whoami/1", token=token_for(alice))
    if accepted:
        assert json.loads(text_of(response))["subject"] == subject
    else:
        assert challenge(response)["error"] == "invalid_token"


def test_valid_subject_rules() -> None:
    assert valid_subject("42")
    assert valid_subject("é" * 256)
    assert not valid_subject("")
    assert not valid_subject("x" * 257)
    assert not valid_subject("a\nb")
    assert not valid_subject("\ud800")
    assert not valid_subject(42)


def test_client_credentials_token_has_no_subject(client: Client, mcp: Any, token_for: Any) -> None:
    service = service_application()
    caller = whoami(client, token_for(None, "a:read", app="service"))
    assert caller["subject"] is None
    assert caller["user"] is None
    assert caller["client_id"] == service.client_id


def test_inactive_user_is_refused(client: Client, mcp: Any, alice: User, token_for: Any) -> None:
    token = token_for(alice)
    alice.is_active = False
    alice.save()
    assert challenge(read(client, "auth://whoami/1", token=token))["error"] == "invalid_token"


# Audience (RFC 8707) ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("uri", "normal"),
    [
        ("http://testserver/mcp", "http://testserver/mcp"),
        ("HTTP://TestServer/mcp/", "http://testserver/mcp"),
        ("http://testserver:80/mcp", "http://testserver/mcp"),
        ("https://example.com:443", "https://example.com"),
        ("https://example.com:8443/", "https://example.com:8443"),
        ("https://example.com/MCP", "https://example.com/MCP"),
        ("https://example.com/mcp#frag", "https://example.com/mcp"),
        ("http://[::1]:8000/mcp", "http://[::1]:8000/mcp"),
        ("https://user@example.com/mcp", ""),
        ("mcp", ""),
        ("http://example.com:99999/", ""),
    ],
)
def test_normalize_resource_uri(uri: str, normal: str) -> None:
    assert normalize_resource_uri(uri) == normal


@pytest.mark.parametrize(
    "resource",
    [
        [RESOURCE],
        ["HTTP://TESTSERVER/mcp/"],
        ["http://testserver:80/mcp"],
        ["https://other.example/mcp", RESOURCE],
    ],
)
def test_token_for_this_resource_is_accepted(
    client: Client, mcp: Any, alice: User, token_for: Any, resource: list[str]
) -> None:
    assert whoami(client, token_for(alice, resource=resource))["audience"] == resource


@pytest.mark.parametrize(
    "resource",
    [
        ["http://other.example/mcp"],
        ["http://testserver/mcp2"],
        ["http://testserver/mcp/sub"],
        ["http://testserver"],  # django-oauth-toolkit's prefix rule would accept the origin: we do not
        ["http://testserver/"],
        ["https://testserver/mcp"],
        ["http://testserver:8000/mcp"],
        ["http://testserver/mcp?tenant=1"],
        ["not a uri"],
    ],
)
def test_token_for_another_resource_is_401(
    client: Client, mcp: Any, alice: User, token_for: Any, resource: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="mcp_resources")
    token = token_for(alice, resource=resource)
    for response in (read(client, "auth://whoami/1", token=token), call(client, "server/discover", token=token)):
        params = challenge(response)
        assert params["error"] == "invalid_token"
        assert params["resource_metadata"] == METADATA_URL
    assert token not in caplog.text


def test_token_without_resource_is_refused_unless_allowed(
    client: Client, mcp: Any, alice: User, token_for: Any
) -> None:
    token = token_for(alice, resource=())
    assert challenge(read(client, "auth://whoami/1", token=token))["error"] == "invalid_token"
    mcp(ACCEPT_TOKENS_WITHOUT_RESOURCE=True)
    assert whoami(client, token)["audience"] == []


def test_configured_resource_uri_is_the_audience(client: Client, mcp: Any, alice: User, token_for: Any) -> None:
    mcp(RESOURCE_URI="https://MCP.example.com/mcp/")
    accepted = token_for(alice, resource=["https://mcp.example.com/mcp"])
    assert whoami(client, accepted)["subject"] == str(alice.pk)
    refused = token_for(alice, resource=[RESOURCE])  # the URL the request was made to, not the canonical one
    params = challenge(read(client, "auth://whoami/1", token=refused))
    assert params["error"] == "invalid_token"
    assert params["resource_metadata"] == "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"


def test_resource_metadata_url_is_path_inserted() -> None:
    assert (
        resource_metadata_url("https://x.example/a/mcp")
        == "https://x.example/.well-known/oauth-protected-resource/a/mcp"
    )
    assert resource_metadata_url("https://x.example") == "https://x.example/.well-known/oauth-protected-resource"


# Expired and revoked ---------------------------------------------------------------------------------------


def test_expired_token_is_401(client: Client, mcp: Any, alice: User, token_for: Any) -> None:
    token = token_for(alice, expires_in=-1)
    assert challenge(read(client, "auth://whoami/1", token=token))["error"] == "invalid_token"
    assert challenge(call(client, "server/discover", token=token))["error"] == "invalid_token"


def test_revoked_token_is_401(client: Client, mcp: Any, alice: User, token_for: Any) -> None:
    token = token_for(alice)
    access_token = AccessToken.objects.get(token_checksum=checksum(token))
    refresh = get_refresh_token_model().objects.create(
        user=alice,
        application=access_token.application,
        token="r-" + secrets.token_urlsafe(16),
        access_token=access_token,
    )
    assert whoami(client, token)["subject"] == str(alice.pk)
    refresh.revoke()  # RFC 7009 revocation of the pair, as /o/revoke_token/ does
    assert challenge(read(client, "auth://whoami/1", token=token))["error"] == "invalid_token"


# Challenges --------------------------------------------------------------------------------------------


def test_401_names_the_scopes_and_the_metadata(client: Client, mcp: Any) -> None:
    params = challenge(read(client, "auth://two/1"))
    assert params == {"scope": "a:read b:read", "resource_metadata": METADATA_URL}


def test_403_names_every_needed_scope_in_one_challenge(client: Client, mcp: Any, alice: User, token_for: Any) -> None:
    response = read(client, "auth://two/1", token=token_for(alice, "a:read"))
    assert challenge(response, 403) == {
        "error": "insufficient_scope",
        "scope": "a:read b:read",
        "resource_metadata": METADATA_URL,
    }
    assert response.json()["error"] == "insufficient_scope"
    assert challenge(read(client, "auth://static/scoped", token=token_for(alice, "a:read")), 403)["scope"] == "s:read"


def test_challenges_never_name_offline_access(client: Client, mcp: Any, alice: User, token_for: Any) -> None:
    assert challenge(read(client, "auth://offline/1"))["scope"] == "c:read"
    assert challenge(read(client, "auth://offline/1", token=token_for(alice, "c:read")), 403)["scope"] == "c:read"
    assert text_of(read(client, "auth://offline/1", token=token_for(alice, "c:read offline_access"))) == "offline"


def test_401_without_operation_scopes_names_scopes_supported(client: Client, mcp: Any) -> None:
    assert challenge(read(client, "auth://bare/1")) == {
        "scope": "a:read b:read c:read s:read",
        "resource_metadata": METADATA_URL,
    }


def test_no_authentication_advertises_no_metadata(client: Client, mcp: Any) -> None:
    mcp(AUTHENTICATION_CLASS="mcp_resources.auth.NoAuthentication")
    assert challenge(read(client, "auth://two/1")) == {"scope": "a:read b:read"}
    assert client.get("/.well-known/oauth-protected-resource/mcp").status_code == 404


# Scope hierarchy ----------------------------------------------------------------------------------------


def test_expand_scopes_is_transitive_and_terminates() -> None:
    hierarchy = {"all": ["docs"], "docs": ["docs:read", "docs:write"], "loop": ["all", "loop"]}
    assert expand_scopes(["all"], hierarchy) == {"all", "docs", "docs:read", "docs:write"}
    assert expand_scopes(["loop"], hierarchy) == {"loop", "all", "docs", "docs:read", "docs:write"}
    assert expand_scopes(["other"], hierarchy) == {"other"}


def test_broad_scope_implies_narrower_ones(client: Client, mcp: Any, alice: User, token_for: Any) -> None:
    token = token_for(alice, "everything")
    assert challenge(read(client, "auth://two/1", token=token), 403)["scope"] == "a:read b:read"
    mcp(SCOPE_HIERARCHY={"everything": ["reader"], "reader": ["a:read", "b:read"]})
    assert text_of(read(client, "auth://two/1", token=token)) == "two scopes"
    assert whoami(client, token)["scopes"] == ["a:read", "b:read", "everything", "reader"]


# Protected resource metadata (RFC 9728) --------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"])
def test_protected_resource_metadata(client: Client, mcp: Any, path: str) -> None:
    StaticResource.objects.create(uri="auth://admin/1", name="a", access="protected", required_scopes="z:read")
    StaticResource.objects.create(
        uri="auth://admin/2", name="b", access="protected", required_scopes="y:read", enabled=False
    )
    response = client.get(path)
    assert response.status_code == 200
    assert response["Access-Control-Allow-Origin"] == "*"
    assert response.json() == {
        "resource": RESOURCE,
        "authorization_servers": ["http://testserver"],
        "scopes_supported": ["a:read", "b:read", "c:read", "s:read", "z:read"],
        "bearer_methods_supported": ["header"],
        "resource_name": "Demo library",  # SERVER_INFO's title
    }


def test_protected_resource_metadata_settings(client: Client, mcp: Any) -> None:
    mcp(
        RESOURCE_URI="https://mcp.example.com/mcp",
        AUTHORIZATION_SERVERS=["https://auth.example.com"],
        SERVER_INFO={"name": "example", "title": "Example library"},
    )
    document = client.get("/.well-known/oauth-protected-resource/mcp").json()
    assert document["resource"] == "https://mcp.example.com/mcp"
    assert document["authorization_servers"] == ["https://auth.example.com"]
    assert document["resource_name"] == "Example library"
    mcp(SERVER_INFO={"name": "example"})  # without a title, the name
    assert client.get("/.well-known/oauth-protected-resource/mcp").json()["resource_name"] == "example"


def test_demo_mounts_the_metadata(client: Client, settings: Any) -> None:
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "RESOURCE_URI": "http://127.0.0.1:8000/mcp"}
    document = client.get("/.well-known/oauth-protected-resource/mcp").json()
    assert document["resource"] == "http://127.0.0.1:8000/mcp"
    assert document["scopes_supported"] == ["documents:read"]
    assert document["authorization_servers"] == ["http://testserver"]
    assert client.get("/.well-known/oauth-protected-resource").json() == document


# The token cache ------------------------------------------------------------------------------------------


class Clock:
    """Monotonic and wall clocks that only move when told to."""

    def __init__(self, now: float = 1_000.0, wall: float = 1_700_000_000.0) -> None:
        self.now = now
        self.wall = wall

    def advance(self, seconds: float) -> None:
        self.now += seconds
        self.wall += seconds


def entry(clock: Clock, expires_in: float = 3600, subject: str = "1") -> CachedToken:
    return CachedToken(None, "client", "a:read", (RESOURCE,), subject, clock.wall + expires_in)


def test_cache_entry_lives_exactly_ttl_seconds() -> None:
    clock = Clock()
    cache = TokenCache(clock=lambda: clock.now, wall_clock=lambda: clock.wall)
    cache.put("k", entry(clock), ttl=30, maxsize=10)
    clock.advance(29.999)
    assert cache.get("k") is not None
    clock.advance(0.001)
    assert cache.get("k") is None
    assert len(cache) == 0


def test_cache_entry_never_outlives_the_token() -> None:
    clock = Clock()
    cache = TokenCache(clock=lambda: clock.now, wall_clock=lambda: clock.wall)
    cache.put("k", entry(clock, expires_in=5), ttl=30, maxsize=10)
    clock.advance(4.999)
    assert cache.get("k") is not None
    clock.advance(0.001)
    assert cache.get("k") is None
    cache.put("expired", entry(clock, expires_in=0), ttl=30, maxsize=10)
    assert cache.get("expired") is None


def test_cache_is_a_bounded_lru() -> None:
    clock = Clock()
    cache = TokenCache(clock=lambda: clock.now, wall_clock=lambda: clock.wall)
    for key in "ab":
        cache.put(key, entry(clock, subject=key), ttl=30, maxsize=2)
    assert cache.get("a") is not None  # a is now the most recently used
    cache.put("c", entry(clock, subject="c"), ttl=30, maxsize=2)
    assert len(cache) == 2
    assert cache.get("b") is None
    assert [cache.get(k).subject for k in "ac"] == ["a", "c"]  # type: ignore[union-attr]
    cache.put("d", entry(clock), ttl=30, maxsize=0)
    assert cache.get("d") is None


def token_queries(context: CaptureQueriesContext) -> int:
    return sum("oauth2_provider_accesstoken" in query["sql"] for query in context.captured_queries)


def test_cached_token_skips_the_database(client: Client, mcp: Any, alice: User, token_for: Any) -> None:
    mcp(TOKEN_CACHE_TTL_SECONDS=60)
    token = token_for(alice)
    with CaptureQueriesContext(connection) as first:
        assert whoami(client, token)["subject"] == str(alice.pk)
    with CaptureQueriesContext(connection) as second:
        caller = whoami(client, token)
    assert token_queries(first) == 1
    assert token_queries(second) == 0
    assert caller["user"] == "alice"
    assert caller["scopes"] == ["a:read", "b:read"]
    assert len(token_cache) == 1


def test_cache_is_keyed_by_the_whole_token(client: Client, mcp: Any, alice: User, bob: User, token_for: Any) -> None:
    mcp(TOKEN_CACHE_TTL_SECONDS=60)
    alice_token, bob_token = token_for(alice), token_for(bob, "a:read")
    for _ in range(3):
        assert whoami(client, alice_token)["user"] == "alice"
        assert whoami(client, bob_token)["user"] == "bob"
    assert len(token_cache) == 2
    for variant in (alice_token + "x", alice_token[:-1], alice_token.upper()):
        assert challenge(read(client, "auth://whoami/1", token=variant))["error"] == "invalid_token"
    assert checksum(alice_token) in token_cache._entries
    assert alice_token not in repr(token_cache._entries)


def test_cached_token_is_still_audience_checked(client: Client, mcp: Any, alice: User, token_for: Any) -> None:
    mcp(TOKEN_CACHE_TTL_SECONDS=60)
    token = token_for(alice)
    assert whoami(client, token)["subject"] == str(alice.pk)
    mcp(RESOURCE_URI="https://elsewhere.example/mcp")  # clears the cache; re-validate and refuse
    assert challenge(read(client, "auth://whoami/1", token=token))["error"] == "invalid_token"


def test_revocation_in_this_process_evicts_at_once(client: Client, mcp: Any, alice: User, token_for: Any) -> None:
    mcp(TOKEN_CACHE_TTL_SECONDS=3600)
    token = token_for(alice)
    assert whoami(client, token)["scopes"] == ["a:read", "b:read"]
    stored = AccessToken.objects.get(token_checksum=checksum(token))
    stored.scope = "a:read"
    stored.save()  # a change is seen at once
    assert whoami(client, token)["scopes"] == ["a:read"]
    stored.revoke()
    assert challenge(read(client, "auth://whoami/1", token=token))["error"] == "invalid_token"


def test_deactivating_a_user_in_this_process_evicts_at_once(
    client: Client, mcp: Any, alice: User, bob: User, token_for: Any
) -> None:
    mcp(TOKEN_CACHE_TTL_SECONDS=3600)
    alice_token, bob_token = token_for(alice), token_for(bob)
    assert whoami(client, alice_token)["user"] == "alice"
    assert whoami(client, bob_token)["user"] == "bob"
    alice.is_active = False
    alice.save()
    assert len(token_cache) == 1  # only alice's entry went
    assert challenge(read(client, "auth://whoami/1", token=alice_token))["error"] == "invalid_token"
    assert whoami(client, bob_token)["user"] == "bob"


REVOCATION_BOUND = 30  # TOKEN_CACHE_TTL_SECONDS in the test below


def test_revocation_elsewhere_is_seen_within_the_ttl(
    client: Client, mcp: Any, alice: User, token_for: Any, cache_clock: Clock
) -> None:
    """The documented bound: a token revoked by another process is refused at most TOKEN_CACHE_TTL_SECONDS
    after this process last validated it against the database."""
    mcp(TOKEN_CACHE_TTL_SECONDS=REVOCATION_BOUND)
    token = token_for(alice)
    assert whoami(client, token)["subject"] == str(alice.pk)  # validated against the database
    with connection.cursor() as cursor:  # another process revokes it: no signal reaches this one
        cursor.execute("DELETE FROM oauth2_provider_accesstoken WHERE token_checksum = %s", [checksum(token)])
    cache_clock.advance(REVOCATION_BOUND - 0.001)
    assert whoami(client, token)["subject"] == str(alice.pk)  # still within the bound: served from the cache
    cache_clock.advance(0.001)
    assert challenge(read(client, "auth://whoami/1", token=token))["error"] == "invalid_token"


def test_cache_never_serves_an_expired_token(
    client: Client, mcp: Any, alice: User, token_for: Any, cache_clock: Clock
) -> None:
    mcp(TOKEN_CACHE_TTL_SECONDS=24 * 3600)
    token = token_for(alice, expires_in=60)
    assert whoami(client, token)["subject"] == str(alice.pk)  # cached for the token's own minute, not a day
    # The database reaches the expiry as well (an update sends no signal: the cache keeps its entry).
    AccessToken.objects.filter(token_checksum=checksum(token)).update(expires=timezone.now() - timedelta(seconds=1))
    cache_clock.advance(59)
    assert whoami(client, token)["subject"] == str(alice.pk)  # served from the cache until the cached expiry
    # Past the expiry, far short of the TTL. (The fake clocks started before the token was issued, so its expiry
    # lies a little over 60 seconds after their start: the step leaves room for that.)
    cache_clock.advance(600)
    assert challenge(read(client, "auth://whoami/1", token=token))["error"] == "invalid_token"
    assert len(token_cache) == 0


def test_cache_off_by_default(client: Client, mcp: Any, alice: User, token_for: Any, settings: Any) -> None:
    settings.MCP_RESOURCES = {k: v for k, v in settings.MCP_RESOURCES.items() if k != "TOKEN_CACHE_TTL_SECONDS"}
    settings.MCP_RESOURCES["RESOURCE_URI"] = None
    token = token_for(alice)
    for _ in range(2):
        with CaptureQueriesContext(connection) as context:
            whoami(client, token)
        assert token_queries(context) == 1
    assert len(token_cache) == 0


def test_cached_user_is_a_copy_per_request(client: Client, mcp: Any, alice: User, token_for: Any) -> None:
    mcp(TOKEN_CACHE_TTL_SECONDS=60)
    token = token_for(alice)
    whoami(client, token)
    first = token_cache.get(checksum(token))
    assert first is not None
    response = read(client, "auth://whoami/1", token=token)
    assert response.wsgi_request.user == first.user
    assert response.wsgi_request.user is not first.user


# System checks (one test per id) --------------------------------------------------------------------------


def ids_of(settings: Any, **values: Any) -> list[str]:
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, **values}
    return [message.id for message in check_auth_settings()]


def test_demo_settings_pass_the_auth_checks(settings: Any) -> None:
    assert ids_of(settings) == []


def test_check_e015_resource_uri(settings: Any) -> None:
    assert ids_of(settings, RESOURCE_URI="mcp.example.com/mcp") == ["mcp_resources.E015"]
    assert ids_of(settings, RESOURCE_URI="https://mcp.example.com/mcp#x") == ["mcp_resources.E015"]
    assert ids_of(settings, RESOURCE_URI=None) == []


def test_check_e016_scope_hierarchy(settings: Any) -> None:
    assert ids_of(settings, SCOPE_HIERARCHY={"docs": "docs:read"}) == ["mcp_resources.E016"]
    assert ids_of(settings, SCOPE_HIERARCHY=[("docs", ["docs:read"])]) == ["mcp_resources.E016"]
    assert ids_of(settings, SCOPE_HIERARCHY={"docs": ["docs:read docs:write"]}) == ["mcp_resources.E016"]


def test_check_e017_authorization_servers(settings: Any) -> None:
    assert ids_of(settings, AUTHORIZATION_SERVERS="https://auth.example.com") == ["mcp_resources.E017"]
    assert ids_of(settings, AUTHORIZATION_SERVERS=["auth.example.com"]) == ["mcp_resources.E017"]
    assert ids_of(settings, AUTHORIZATION_SERVERS=["https://auth.example.com"]) == []


def test_check_e018_token_cache(settings: Any) -> None:
    assert ids_of(settings, TOKEN_CACHE_TTL_SECONDS=-1) == ["mcp_resources.E018"]
    assert ids_of(settings, TOKEN_CACHE_TTL_SECONDS="30") == ["mcp_resources.E018"]
    assert ids_of(settings, TOKEN_CACHE_TTL_SECONDS=30) == []
    assert ids_of(settings, AUTHENTICATION_CLASS="tests.urls_auth.TwoTokenCache") == []
    assert ids_of(settings, AUTHENTICATION_CLASS="tests.urls_auth.ManyTokenCache") == ["mcp_resources.E018"]


def test_check_w003_tokens_without_resource(settings: Any) -> None:
    assert ids_of(settings, ACCEPT_TOKENS_WITHOUT_RESOURCE=True) == ["mcp_resources.W003"]


def test_check_w004_no_authorization_server(settings: Any) -> None:
    settings.ROOT_URLCONF = "tests.urls_extra"  # no authorization-server metadata mounted
    assert ids_of(settings) == ["mcp_resources.W004"]
    assert ids_of(settings, AUTHORIZATION_SERVERS=["https://auth.example.com"]) == []
    assert ids_of(settings, AUTHORIZATION_SERVERS=[], AUTHENTICATION_CLASS="mcp_resources.auth.NoAuthentication") == []


# The demo authorization server -----------------------------------------------------------------------


def test_authorization_server_metadata(client: Client) -> None:
    document = client.get("/.well-known/oauth-authorization-server").json()
    assert document["issuer"] == "http://testserver"
    assert document["authorization_endpoint"] == "http://testserver/o/authorize/"
    assert document["token_endpoint"] == "http://testserver/o/token/"
    assert document["registration_endpoint"] == "http://testserver/o/register/"
    assert document["code_challenge_methods_supported"] == ["S256"]
    assert document["response_types_supported"] == ["code"]
    assert document["grant_types_supported"] == ["authorization_code", "refresh_token"]
    assert document["client_id_metadata_document_supported"] is True
    assert document["authorization_response_iss_parameter_supported"] is True
    assert "none" in document["token_endpoint_auth_methods_supported"]


def test_login_page_names_the_demo_users(client: Client) -> None:
    page = client.get("/accounts/login/").content.decode()
    assert "alice" in page
    assert "bob" in page
    assert 'id="login-form"' in page


def register(client: Client) -> str:
    response = client.post(
        "/o/register/",
        json.dumps({"redirect_uris": ["http://127.0.0.1:9/cb"], "token_endpoint_auth_method": "none"}),
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    return str(response.json()["client_id"])


def pkce() -> tuple[str, str]:
    import base64

    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def authorize(client: Client, client_id: str, **params: str) -> Any:
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": "http://127.0.0.1:9/cb",
        "scope": "documents:read",
        "state": "xyz",
        **params,
    }
    return client.get("/o/authorize/?" + urlencode(query))


def test_demo_authorization_code_flow_stores_the_resource(client: Client, settings: Any, alice: User) -> None:
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "RESOURCE_URI": RESOURCE}
    document = Document.objects.create(owner=alice, title="t", body="alice's text")
    client_id = register(client)
    verifier, code_challenge = pkce()
    params = {"code_challenge": code_challenge, "code_challenge_method": "S256", "resource": RESOURCE}

    response = authorize(client, client_id, **params)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=")
    login = client.post("/accounts/login/", {"username": "alice", "password": "alice", "next": "/o/authorize/?x"})
    assert login.status_code == 302
    consent = authorize(client, client_id, **params)
    assert consent.status_code == 200
    form = {k: v for k, v in consent.context["form"].initial.items() if v is not None}
    assert form["resource"] == RESOURCE
    approved = client.post(
        consent.request["PATH_INFO"] + "?" + consent.request["QUERY_STRING"], {**form, "allow": "Authorize"}
    )
    assert approved.status_code == 302
    redirect = parse_qs(urlsplit(approved["Location"]).query)
    assert redirect["state"] == ["xyz"]
    assert redirect["iss"] == ["http://testserver"]

    token_response = client.post(
        "/o/token/",
        {
            "grant_type": "authorization_code",
            "code": redirect["code"][0],
            "redirect_uri": "http://127.0.0.1:9/cb",
            "client_id": client_id,
            "code_verifier": verifier,
            "resource": RESOURCE,
        },
    )
    assert token_response.status_code == 200, token_response.content
    token = token_response.json()["access_token"]
    stored = AccessToken.objects.get(token_checksum=checksum(token))
    assert stored.resource == [RESOURCE]
    assert stored.token == ""  # hashed at rest
    assert stored.scope == "documents:read"
    client.logout()
    assert text_of(read(client, f"learn://documents/{document.pk}", token=token)) == "alice's text"


@pytest.mark.parametrize(
    "params",
    [{}, {"code_challenge": "x" * 43, "code_challenge_method": "plain"}],
    ids=["no-pkce", "plain"],
)
def test_demo_requires_pkce_s256(client: Client, alice: User, params: dict[str, str]) -> None:
    client_id = register(client)
    client.force_login(alice)
    response = authorize(client, client_id, **params)
    if response.status_code == 200:  # "plain" is refused when the code would be issued, after consent
        form = {k: v for k, v in response.context["form"].initial.items() if v is not None}
        response = client.post(response.request["PATH_INFO"], {**form, "allow": "Authorize"})
    assert response.status_code == 302
    assert not get_application_model().objects.get(client_id=client_id).grant_set.exists()
    location = response["Location"]
    assert location.startswith("http://127.0.0.1:9/cb?")
    assert parse_qs(urlsplit(location).query)["error"] == ["invalid_request"]


@pytest.mark.parametrize("grant_type", ["client_credentials", "password"])
def test_demo_issues_tokens_by_authorization_code_only(client: Client, alice: User, grant_type: str) -> None:
    client_id = register(client)
    response = client.post(
        "/o/token/",
        {"grant_type": grant_type, "client_id": client_id, "username": "alice", "password": "alice"},
    )
    assert response.status_code == 400
    assert response.json()["error"] == "unsupported_grant_type"
    assert not AccessToken.objects.filter(user=alice).exists()


def test_demo_endpoint_ignores_the_login_session(client: Client, alice: User) -> None:
    document = Document.objects.create(owner=alice, title="t", body="secret")
    client.force_login(alice)
    response = read(client, f"learn://documents/{document.pk}")
    assert challenge(response)["scope"] == "documents:read"
    assert b"secret" not in response.content


def test_mcp_token_refuses_to_mint_an_unbound_token(settings: Any, alice: User) -> None:
    from django.core.management import CommandError, call_command

    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "RESOURCE_URI": None}
    with pytest.raises(CommandError, match="--resource"):
        call_command("mcp_token", "--user", "alice", "--scope", "documents:read")
    assert not AccessToken.objects.exists()


# django-oauth-toolkit decides ---------------------------------------------------------------------------------
# Every token is validated by django-oauth-toolkit's OAUTH2_VALIDATOR_CLASS (validate_bearer_token): a check a
# project (or a later django-oauth-toolkit) adds there is a check our endpoint makes.

validated_by_the_toolkit: list[str] = []


class CountingValidator(OAuth2Validator):
    """django-oauth-toolkit's validator, recording every token it is asked about."""

    def validate_bearer_token(self, token: Any, scopes: Any, request: Any) -> bool:
        validated_by_the_toolkit.append(token)
        return bool(super().validate_bearer_token(token, scopes, request))


class RefusingValidator(OAuth2Validator):
    def validate_bearer_token(self, token: Any, scopes: Any, request: Any) -> bool:
        return False


SUSPENDED_APPLICATIONS = {"suspended"}


class SuspendingValidator(OAuth2Validator):
    """A project's own rule on top of django-oauth-toolkit's: tokens of suspended applications are refused."""

    def validate_bearer_token(self, token: Any, scopes: Any, request: Any) -> bool:
        if not super().validate_bearer_token(token, scopes, request):
            return False
        return request.access_token.application.name not in SUSPENDED_APPLICATIONS


def toolkit_validator(settings: Any, validator: type) -> None:
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "OAUTH2_VALIDATOR_CLASS": validator}


def outcome(client: Client, token: str) -> Any:
    """What a request with ``token`` gets: the caller it was served as, or the challenge's error."""
    response = read(client, "auth://whoami/1", token=token)
    if response.status_code == 200:
        return json.loads(text_of(response))
    return (response.status_code, challenge(response, response.status_code).get("error"))


def cases(token_for: Any) -> dict[str, str]:
    alice = User.objects.get(username="alice")
    inactive = User.objects.create_user("carol", password="carol", is_active=False)
    service_application()
    return {
        "valid": token_for(alice),
        "one scope": token_for(alice, "a:read"),
        "no scope": token_for(alice, ""),
        "expired": token_for(alice, expires_in=-1),
        "expires in a minute": token_for(alice, expires_in=60),
        "unknown": "x" * 43,
        "client credentials": token_for(None, "a:read", app="service"),
        "inactive user": token_for(inactive),
        "other resource": token_for(alice, resource=["http://elsewhere.example/mcp"]),
        "two resources": token_for(alice, resource=["http://elsewhere.example/mcp", "http://testserver/mcp"]),
        "no resource": token_for(alice, resource=[]),
    }


def test_every_token_is_validated_by_django_oauth_toolkit(
    client: Client, mcp: Any, settings: Any, alice: User, token_for: Any
) -> None:
    tokens = cases(token_for)
    by_default = {name: outcome(client, token) for name, token in tokens.items()}
    validated_by_the_toolkit.clear()
    toolkit_validator(settings, CountingValidator)
    through_subclass = {name: outcome(client, token) for name, token in tokens.items()}
    # The configured validator class was asked about every token, and answered as the default one does.
    assert set(validated_by_the_toolkit) == set(tokens.values())
    assert through_subclass == by_default
    served = {name for name, verdict in by_default.items() if isinstance(verdict, dict)}
    assert served == {"valid", "one scope", "expires in a minute", "client credentials", "two resources"}
    assert by_default["valid"]["user"] == "alice"
    assert by_default["client credentials"]["user"] is None
    assert by_default["no scope"] == (403, "insufficient_scope")  # a valid token, without the scope it needs
    for refused in ("expired", "unknown", "inactive user", "other resource", "no resource"):
        assert by_default[refused] == (401, "invalid_token"), refused


def test_a_custom_validator_class_decides(client: Client, mcp: Any, settings: Any, alice: User, token_for: Any) -> None:
    token = token_for(alice)
    assert whoami(client, token)["user"] == "alice"
    toolkit_validator(settings, RefusingValidator)
    assert challenge(read(client, "auth://whoami/1", token=token))["error"] == "invalid_token"


def test_a_check_added_by_a_validator_subclass_is_honoured(
    client: Client, mcp: Any, settings: Any, alice: User, token_for: Any
) -> None:
    """Proof that the decision stays with django-oauth-toolkit: a rule of a validator subclass applies to us."""
    allowed = token_for(alice)
    suspended = token_for(alice, app="suspended")
    assert whoami(client, suspended)["user"] == "alice"  # nothing in django-oauth-toolkit itself refuses it
    toolkit_validator(settings, SuspendingValidator)
    assert whoami(client, allowed)["user"] == "alice"
    params = challenge(read(client, "auth://whoami/1", token=suspended))
    assert params["error"] == "invalid_token"
    assert params["resource_metadata"] == METADATA_URL
    mcp(TOKEN_CACHE_TTL_SECONDS=3600)  # the token cache only ever holds what the validator accepted
    assert challenge(read(client, "auth://whoami/1", token=suspended))["error"] == "invalid_token"
    assert whoami(client, allowed)["user"] == "alice"
    assert list(token_cache._entries) == [checksum(allowed)]


def test_the_cache_holds_at_most_token_cache_size_tokens(
    client: Client, mcp: Any, alice: User, bob: User, token_for: Any
) -> None:
    """The bound is ``OAuth2Authentication.token_cache_size`` (1024), which a subclass changes; the least recently
    used token goes first."""
    mcp(TOKEN_CACHE_TTL_SECONDS=3600, AUTHENTICATION_CLASS="tests.urls_auth.TwoTokenCache")
    token_cache.clear()
    first, second, third = token_for(alice), token_for(bob), token_for(alice)
    for token in (first, second, first, third):
        assert whoami(client, token)["user"] in ("alice", "bob")
    assert list(token_cache._entries) == [checksum(first), checksum(third)]  # second was the least recently used
    mcp(TOKEN_CACHE_TTL_SECONDS=3600, AUTHENTICATION_CLASS="mcp_resources.auth.OAuth2Authentication")
    token_cache.clear()
    for token in (first, second, third):
        whoami(client, token)
    assert len(token_cache) == 3  # the default holds 1024


def test_eviction_receivers_are_connected_when_the_app_is_ready(alice: User, bob: User, token_for: Any) -> None:
    """Saving or deleting a token or a user evicts its cache entries. The receivers are connected when the app is
    ready, not by a first cached validation: none runs in this test, the entries are put directly."""
    raw = {"alice": token_for(alice), "alice 2": token_for(alice), "bob": token_for(bob)}
    owner = {"alice": alice, "alice 2": alice, "bob": bob}

    def cache(name: str) -> None:
        entry = CachedToken(owner[name], "client", "a:read", (RESOURCE,), str(owner[name].pk), time.time() + 3600)
        token_cache.put(checksum(raw[name]), entry, ttl=3600, maxsize=10)

    def cached() -> set[str]:
        return {name for name in raw if token_cache.get(checksum(raw[name])) is not None}

    token_cache.clear()
    for name in raw:
        cache(name)
    assert cached() == {"alice", "alice 2", "bob"}
    AccessToken.objects.get(token_checksum=checksum(raw["alice"])).save()  # a token changed
    assert cached() == {"alice 2", "bob"}
    AccessToken.objects.get(token_checksum=checksum(raw["bob"])).delete()  # a token revoked
    assert cached() == {"alice 2"}
    cache("bob")
    bob.save()  # a user changed (deactivated, say)
    assert cached() == {"alice 2"}
    alice.delete()  # a user deleted
    assert cached() == set()


def test_changes_to_the_token_row_are_seen_by_the_next_request(
    client: Client, mcp: Any, alice: User, token_for: Any
) -> None:
    token = token_for(alice)
    assert whoami(client, token)["scopes"] == ["a:read", "b:read"]
    AccessToken.objects.filter(token_checksum=checksum(token)).update(scope="a:read")
    assert whoami(client, token)["scopes"] == ["a:read"]
    alice.username = "alice2"
    alice.save()
    assert whoami(client, token)["user"] == "alice2"
    AccessToken.objects.filter(token_checksum=checksum(token)).delete()
    assert challenge(read(client, "auth://whoami/1", token=token))["error"] == "invalid_token"
