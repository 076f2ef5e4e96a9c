"""The plain-SQL token loading (mcp_resources.auth.loading) against django-oauth-toolkit's own, side by side.

Both loaders must hand the validator identical tokens (the token's fields, its application's and its user's), and
the validator must then make identical decisions, whatever the token's state. The loading may change; the decision
never does.
"""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from typing import Any

import pytest
from django.db import DatabaseError, connection
from django.forms.models import model_to_dict
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_application_model
from oauth2_provider.oauth2_validators import OAuth2Validator
from oauthlib.common import Request as OAuthRequest

from mcp_resources.auth import loading
from mcp_resources.auth.loading import TokenLoading, load_access_token, validator_class
from tests.conftest import RESOURCE

pytestmark = pytest.mark.django_db

AccessToken = get_access_token_model()
Application = get_application_model()


class DefaultLoading(OAuth2Validator):
    """django-oauth-toolkit's validator as shipped (a subclass, so that ``validator_class`` keeps it)."""

    def _load_access_token(self, token: str) -> Any:
        return OAuth2Validator._load_access_token(self, token)


def fields(obj: Any) -> dict[str, Any] | None:
    if obj is None:
        return None
    values = model_to_dict(obj)
    values.update({f.attname: getattr(obj, f.attname) for f in obj._meta.concrete_fields})
    return values


def loaded(token: str) -> tuple[Any, Any]:
    return load_access_token(token), DefaultLoading()._load_access_token(token)


def decision(validator: OAuth2Validator, token: str, scopes: list[str], uri: str) -> tuple[bool, Any]:
    request = OAuthRequest(uri, http_method="POST")
    accepted = validator.validate_bearer_token(token, scopes, request)
    return accepted, getattr(request, "oauth2_error", None)


@pytest.fixture
def application(alice: Any) -> Any:
    return Application.objects.create(
        name="loading tests",
        user=alice,
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_CLIENT_CREDENTIALS,
    )


def make(
    raw: str,
    *,
    user: Any,
    application: Any,
    expires_in: float = 3600,
    scope: str = "documents:read",
    resource: list[str] | None = None,
) -> Any:
    from oauth2_provider.models import set_token_value

    token = AccessToken(
        user=user,
        application=application,
        scope=scope,
        expires=timezone.now() + timedelta(seconds=expires_in),
        resource=[RESOURCE] if resource is None else resource,
    )
    set_token_value(token, raw)
    token.save()
    return token


STATES = ["valid", "expired", "no-user", "no-application", "other-resource", "no-resource", "inactive-user", "unknown"]


@pytest.fixture(params=STATES)
def state(request: pytest.FixtureRequest, alice: Any, application: Any) -> str:
    """A token ``raw-<state>`` in the given state (``unknown``: no row at all)."""
    name = request.param
    raw = f"raw-{name}"
    if name == "unknown":
        return raw
    if name == "inactive-user":
        alice.is_active = False
        alice.save()
    make(
        raw,
        user=None if name == "no-user" else alice,
        application=None if name == "no-application" else application,
        expires_in=-60 if name == "expired" else 3600,
        resource={"other-resource": ["https://elsewhere.example/mcp"], "no-resource": []}.get(name),
    )
    return raw


def test_both_loaders_hand_the_validator_the_same_token(state: str) -> None:
    ours, theirs = loaded(state)
    assert (ours is None) == (theirs is None)
    if theirs is None:
        return
    assert fields(ours) == fields(theirs)
    assert fields(ours.application) == fields(theirs.application)
    assert fields(ours.user) == fields(theirs.user)
    assert ours.scopes == theirs.scopes
    assert ours.is_valid(["documents:read"]) == theirs.is_valid(["documents:read"])


@pytest.mark.parametrize("scopes", [[], ["documents:read"], ["documents:write"]])
@pytest.mark.parametrize("uri", [RESOURCE, "https://elsewhere.example/mcp"])
def test_the_validator_decides_the_same_with_either_loader(state: str, scopes: list[str], uri: str) -> None:
    ours = validator_class(DefaultLoading.__mro__[1])()
    assert isinstance(ours, TokenLoading)
    assert decision(ours, state, scopes, uri) == decision(DefaultLoading(), state, scopes, uri)


def test_one_query_through_djangos_cursor(alice: Any, application: Any) -> None:
    make("raw-one", user=alice, application=application)
    with CaptureQueriesContext(connection) as queries:
        token = load_access_token("raw-one")
        assert token.user.username == "alice"
        assert token.application.name == "loading tests"
    assert len(queries) == 1  # the relations come with the token: no query on access
    checksum = hashlib.sha256(b"raw-one").hexdigest()
    assert queries[0]["sql"].count(checksum) == 1  # the SQL is logged as Django logs any query


def test_a_validator_that_loads_tokens_its_own_way_is_used_as_it_is() -> None:
    class Cached(OAuth2Validator):
        def _load_access_token(self, token: str) -> Any:
            return None

    assert validator_class(Cached) is Cached
    assert issubclass(validator_class(OAuth2Validator), TokenLoading)


def test_a_failing_plain_query_falls_back_to_django_oauth_toolkits_loading(
    monkeypatch: pytest.MonkeyPatch, alice: Any, application: Any
) -> None:
    make("raw-fallback", user=alice, application=application)

    def broken(token: str) -> Any:
        raise DatabaseError("no such column")

    monkeypatch.setattr(loading, "load_access_token", broken)
    validator = validator_class(OAuth2Validator)()
    assert decision(validator, "raw-fallback", [], RESOURCE) == (True, None)


def test_the_authentication_class_validates_through_the_composed_validator(
    alice: Any, application: Any, make_token: Any, settings: Any
) -> None:
    """A validator subclass's own check still decides when our loading is in front of it."""
    from django.test import RequestFactory

    from mcp_resources.auth import OAuth2Authentication
    from mcp_resources.exceptions import AuthenticationRequired

    token = make_token(alice)
    request = RequestFactory().post("/mcp", HTTP_HOST="127.0.0.1:8000", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert OAuth2Authentication().authenticate(request).subject == str(alice.pk)

    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "OAUTH2_VALIDATOR_CLASS": f"{__name__}.RefusingAll"}
    request = RequestFactory().post("/mcp", HTTP_HOST="127.0.0.1:8000", HTTP_AUTHORIZATION=f"Bearer {token}")
    with pytest.raises(AuthenticationRequired):
        OAuth2Authentication().authenticate(request)


class RefusingAll(OAuth2Validator):
    """A project's validator with a check of its own (here: every token is refused)."""

    def validate_bearer_token(self, token: str, scopes: list[str], request: Any) -> bool:
        return False


SWAPPED_SETTINGS = "tests.settings_swapped_token"


def test_a_swapped_token_models_manager_decides_which_tokens_exist(tmp_path: Any) -> None:
    """A project's own access token model whose default manager leaves out soft-revoked rows
    (``tests.swapped_token``): the token it hides is refused by the server, as django-oauth-toolkit refuses it; the
    token it shows is accepted. The plain query would have read the revoked row around the manager."""
    import httpx2

    from tests import live

    with live.project(tmp_path, settings=SWAPPED_SETTINGS) as project:
        server = live.Server(project).start()
        try:
            tokens = server.tokens("alice", "bob")
            checksum = hashlib.sha256(tokens["bob"].encode()).hexdigest()
            verdicts = project.shell(
                "import json; from django.utils import timezone\n"
                "from oauth2_provider.models import get_access_token_model\n"
                "from oauth2_provider.oauth2_validators import OAuth2Validator\n"
                "model = get_access_token_model()\n"
                f"model._base_manager.filter(token_checksum={checksum!r}).update(revoked_at=timezone.now())\n"
                "load = OAuth2Validator()._load_access_token\n"
                f"print(json.dumps([model.__name__, load({tokens['alice']!r}) is not None, "
                f"load({tokens['bob']!r}) is not None]))"
            )
            assert json.loads(verdicts) == ["SoftRevokedAccessToken", True, False]  # django-oauth-toolkit's view

            def status(token: str) -> int:
                body = {"jsonrpc": "2.0", "id": 1, "method": "resources/templates/list", "params": {"_meta": META}}
                headers = {
                    "Authorization": f"Bearer {token}",
                    "MCP-Protocol-Version": "2026-07-28",
                    "Mcp-Method": "resources/templates/list",
                    "Accept": "application/json, text/event-stream",
                }
                return int(httpx2.post(server.url, json=body, headers=headers, timeout=30).status_code)

            assert status(tokens["alice"]) == 200
            assert status(tokens["bob"]) == 401
            server.assert_log_clean()
        finally:
            server.stop()


META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
