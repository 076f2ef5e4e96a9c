"""The authorization server the package ships (``mcp_resources.auth.server_settings``, ``server_urls``,
``server_views``) and the system checks for the traps of a project's own authorization server (E030, E031, E032,
W030, W031; docs/checks.md), one test per id.

The demo (``testproject``) mounts exactly the shipped pieces, so requests to its URLconf exercise them; each trap is
a small URLconf or settings change of the demo.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from base64 import urlsafe_b64encode
from typing import Any
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import User
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.test import Client
from django.urls import include, path
from oauth2_provider import urls as dot_urls

from mcp_resources.auth.server_settings import authorization_server_settings
from mcp_resources.auth.server_urls import authorization_server_urlpatterns
from mcp_resources.checks import (
    check_authorization_server_metadata,
    check_authorization_server_scopes,
    check_client_registration,
    check_resource_metadata_routes,
    mcp_endpoint_paths,
)
from mcp_resources.registries import ResourceRegistry, registry
from mcp_resources.resources import ModelResourceTemplate
from mcp_resources.urls import well_known_urlpatterns
from testproject.library.models import Document
from tests.conftest import urlconf

REDIRECT_URI = "http://127.0.0.1:9/cb"
DEMO_SCOPES = {"documents:read": "Read your documents and notes", "documents": "All of your documents"}


def ids(messages: list[checks.CheckMessage]) -> list[str]:
    return [message.id for message in messages]


def endpoint() -> Any:
    return path("mcp", include("mcp_resources.urls"))


def all_authorization_server_checks() -> list[str]:
    return ids(
        check_resource_metadata_routes()
        + check_authorization_server_metadata()
        + check_authorization_server_scopes(registry)
        + check_client_registration()
    )


# The settings block ---------------------------------------------------------------------------------------------


def test_settings_block_is_what_mcp_clients_need() -> None:
    block = authorization_server_settings({"tickets:read": "Read tickets"})
    assert block["SCOPES"] == {"tickets:read": "Read tickets"}
    assert block["PKCE_REQUIRED"] is True
    assert block["COMPLIANT_BCP_RFC9700_PKCE_METHOD"] is True  # S256 only
    assert block["OAUTH2_SERVER_CLASS"] == "oauthlib.oauth2.WebApplicationServer"
    assert block["DCR_ENABLED"] is True
    assert block["DCR_REGISTRATION_PERMISSION_CLASSES"] == ("oauth2_provider.dcr.AllowAllDCRPermission",)
    assert block["CIMD_ENABLED"] is True
    assert "DEFAULT_SCOPES" not in block
    closed = authorization_server_settings(
        {"a": "A"}, dynamic_client_registration=False, client_id_metadata_documents=False, default_scopes=["a"]
    )
    assert (closed["DCR_ENABLED"], closed["CIMD_ENABLED"], closed["DEFAULT_SCOPES"]) == (False, False, ["a"])
    # A fresh dict every time: a project's changes never leak into another call.
    block["SCOPES"]["x"] = "y"
    assert authorization_server_settings({"tickets:read": "Read tickets"})["SCOPES"] == {"tickets:read": "Read tickets"}


@pytest.mark.parametrize(
    ("scopes", "kwargs"),
    [({}, {}), ({"two words": "x"}, {}), ({"a": 1}, {}), ({"a": "A"}, {"default_scopes": ["b"]})],
    ids=["empty", "space", "description", "unknown-default"],
)
def test_settings_block_refuses_bad_scopes(scopes: Any, kwargs: Any) -> None:
    with pytest.raises(ImproperlyConfigured):
        authorization_server_settings(scopes, **kwargs)


def test_settings_block_is_importable_before_django_is_set_up() -> None:
    import subprocess
    import sys

    code = (
        "import sys; from mcp_resources.auth.server_settings import authorization_server_settings; "
        "authorization_server_settings({'a': 'A'}); "
        "assert 'django.contrib.auth.models' not in sys.modules; assert 'oauth2_provider' not in sys.modules"
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": "."}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


# The URL patterns, as the demo mounts them ------------------------------------------------------------------------


@pytest.mark.django_db
def test_metadata_at_the_root_names_the_endpoints(client: Client) -> None:
    document = client.get("/.well-known/oauth-authorization-server").json()
    assert document["issuer"] == "http://testserver"
    assert document["registration_endpoint"] == "http://testserver/o/register/"
    assert document["code_challenge_methods_supported"] == ["S256"]
    assert "introspection_endpoint" not in document  # not mounted
    assert set(document["scopes_supported"]) == set(DEMO_SCOPES)


@pytest.mark.django_db
def test_the_endpoints_protected_resource_metadata_is_ours(client: Client) -> None:
    for url in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
        document = client.get(url).json()
        assert document["scopes_supported"] == ["documents:read"], url  # not django-oauth-toolkit's SCOPES
        assert document["authorization_servers"] == ["http://testserver"]


def test_prefix_moves_the_endpoints_not_the_metadata(settings: Any) -> None:
    from django.urls import reverse

    patterns = authorization_server_urlpatterns("oauth")
    settings.ROOT_URLCONF = urlconf(endpoint(), *well_known_urlpatterns("mcp"), *patterns)
    assert reverse("oauth2_provider:authorize") == "/oauth/authorize/"
    assert reverse("oauth2_provider:dcr-register") == "/oauth/register/"
    assert reverse("oauth2_provider:oauth-server-metadata") == "/.well-known/oauth-authorization-server"
    assert all_authorization_server_checks() == []


# The consent page ---------------------------------------------------------------------------------------------


def _consent(client: Client, user: User, resource: str) -> Any:
    registration = client.post(
        "/o/register/",
        json.dumps(
            {"client_name": "Acme Assistant", "redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "none"}
        ),
        content_type="application/json",
    )
    assert registration.status_code == 201, registration.content
    verifier = secrets.token_urlsafe(48)
    challenge = urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    client.force_login(user)
    query = {
        "response_type": "code",
        "client_id": registration.json()["client_id"],
        "redirect_uri": REDIRECT_URI,
        "scope": "documents:read",
        "state": "s",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": resource,
    }
    return client.get("/o/authorize/?" + urlencode(query))


@pytest.mark.django_db
def test_consent_page_says_who_asks_what_for_which_server(client: Client, alice: User, settings: Any) -> None:
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "RESOURCE_URI": "http://testserver/mcp"}
    page = _consent(client, alice, "http://testserver/mcp")
    assert page.status_code == 200
    assert page.templates[0].name == "mcp_resources/oauth/authorize.html"
    html = page.content.decode()
    assert "Acme Assistant asks to act on your behalf" in html
    assert "Read your documents and notes" in html
    assert "Demo library <small>(<code>http://testserver/mcp</code>)" in html  # SERVER_INFO's title
    assert "127.0.0.1:9" in html  # where the code goes
    assert 'id="authorizationForm"' in html
    assert page.context["resources"] == [{"uri": "http://testserver/mcp", "this_server": True}]

    other = _consent(client, alice, "http://other.example/mcp")
    assert other.context["resources"] == [{"uri": "http://other.example/mcp", "this_server": False}]
    assert "Another service:" in other.content.decode()


@pytest.mark.django_db
def test_a_project_overrides_the_consent_page(client: Client, alice: User, settings: Any, tmp_path: Any) -> None:
    override = tmp_path / "mcp_resources" / "oauth"
    override.mkdir(parents=True)
    (override / "authorize.html").write_text("Our own consent for {{ application.name }} on {{ server_name }}")
    settings.TEMPLATES = [{**settings.TEMPLATES[0], "DIRS": [tmp_path, *settings.TEMPLATES[0]["DIRS"]]}]
    page = _consent(client, alice, "http://testserver/mcp")
    assert page.content.decode() == "Our own consent for Acme Assistant on Demo library"


# E030: the endpoint's protected resource metadata shadowed ---------------------------------------------------------


def test_e030_protected_resource_metadata_shadowed(settings: Any) -> None:
    settings.ROOT_URLCONF = urlconf(endpoint(), *dot_urls.metadata_urlpatterns, *well_known_urlpatterns("mcp"))
    messages = check_resource_metadata_routes()
    assert ids(messages) == ["mcp_resources.E030", "mcp_resources.E030"]  # the path-inserted URL and the root one
    assert "oauth2_provider.views.metadata.OAuthProtectedResourceMetadataView" in messages[0].msg
    assert "/.well-known/oauth-protected-resource/mcp" in messages[0].msg

    settings.ROOT_URLCONF = urlconf(endpoint(), *well_known_urlpatterns("mcp"), *dot_urls.metadata_urlpatterns)
    assert check_resource_metadata_routes() == []  # ours come first: nothing shadowed


def test_endpoint_paths_are_found_through_includes_and_regexes(settings: Any) -> None:
    from django.urls import re_path

    from mcp_resources.transport.views import MCPView

    settings.ROOT_URLCONF = urlconf(
        path("api/", include([path("v1/mcp", include("mcp_resources.urls"))])),
        re_path(r"^other\.mcp$", MCPView.as_view()),
        path("<slug:tenant>/mcp", MCPView.as_view()),  # captures: not checkable
    )
    assert mcp_endpoint_paths() == ["api/v1/mcp", "other.mcp"]


# W030: the endpoint's protected resource metadata not mounted ------------------------------------------------------


def test_w030_protected_resource_metadata_not_mounted(settings: Any) -> None:
    settings.ROOT_URLCONF = urlconf(endpoint(), *authorization_server_urlpatterns())
    messages = check_resource_metadata_routes()
    assert ids(messages) == ["mcp_resources.W030"]
    assert 'well_known_urlpatterns("mcp")' in str(messages[0].hint)
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "AUTHENTICATION_CLASS": "mcp_resources.auth.NoAuthentication"}
    assert check_resource_metadata_routes() == []  # no metadata is advertised without OAuth


# E031: an authorization server without RFC 8414 metadata where clients look ---------------------------------------


def test_e031_issuer_without_rfc8414_metadata(settings: Any) -> None:
    # The quickstart's former hint: django-oauth-toolkit's URLs under /o/. The metadata names the issuer .../o, whose
    # RFC 8414 document would be /.well-known/oauth-authorization-server/o: not served.
    dot_under_o = path("o/", include("oauth2_provider.urls"))
    settings.ROOT_URLCONF = urlconf(endpoint(), *well_known_urlpatterns("mcp"), dot_under_o)
    messages = check_authorization_server_metadata()
    assert ids(messages) == ["mcp_resources.E031"]
    assert "/.well-known/oauth-authorization-server/o" in messages[0].msg

    # A configured issuer on this project's origin is checked the same way; a remote one is not ours to check.
    settings.ROOT_URLCONF = urlconf(endpoint(), *well_known_urlpatterns("mcp"), *authorization_server_urlpatterns())
    settings.MCP_RESOURCES = {
        **settings.MCP_RESOURCES,
        "RESOURCE_URI": "https://mcp.example.com/mcp",
        "AUTHORIZATION_SERVERS": ["https://mcp.example.com/tenant"],
    }
    assert ids(check_authorization_server_metadata()) == ["mcp_resources.E031"]
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "AUTHORIZATION_SERVERS": ["https://MCP.example.com:443"]}
    assert check_authorization_server_metadata() == []
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "AUTHORIZATION_SERVERS": ["https://auth.example.com/tenant"]}
    assert check_authorization_server_metadata() == []


# E032: a template scope the authorization server does not know ----------------------------------------------------


def test_e032_template_scope_missing_from_the_toolkits_scopes(settings: Any) -> None:
    settings.OAUTH2_PROVIDER = authorization_server_settings({"documents": "All of your documents"})
    messages = check_authorization_server_scopes(registry)
    assert {m.id for m in messages} == {"mcp_resources.E032"}
    assert "'documents:read'" in messages[0].msg

    class Tickets(ModelResourceTemplate):
        model = Document
        name = "tickets"
        uri_template = "tickets://{id}"
        required_scopes = ("tickets:read",)
        owner_field = "owner"

    own = ResourceRegistry()
    own.register(Tickets)
    settings.OAUTH2_PROVIDER = authorization_server_settings(DEMO_SCOPES)
    assert check_authorization_server_scopes(registry) == []
    (message,) = check_authorization_server_scopes(own)
    assert (message.id, message.obj) == ("mcp_resources.E032", Tickets)

    # A remote authorization server's scopes are not this project's to check.
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "AUTHORIZATION_SERVERS": ["https://auth.example.com"]}
    assert check_authorization_server_scopes(own) == []


# W031: MCP clients cannot register ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes",
    [
        {"DCR_ENABLED": False, "CIMD_ENABLED": False},
        {
            "CIMD_ENABLED": False,
            "DCR_REGISTRATION_PERMISSION_CLASSES": ("oauth2_provider.dcr.IsAuthenticatedDCRPermission",),
        },
    ],
    ids=["both-off", "registration-for-signed-in-users"],
)
def test_w031_clients_cannot_register(settings: Any, changes: dict[str, Any]) -> None:
    settings.OAUTH2_PROVIDER = {**authorization_server_settings(DEMO_SCOPES), **changes}
    assert ids(check_client_registration()) == ["mcp_resources.W031"]
    settings.OAUTH2_PROVIDER = {**authorization_server_settings(DEMO_SCOPES), **changes, "CIMD_ENABLED": True}
    assert check_client_registration() == []


def test_demo_passes_every_authorization_server_check() -> None:
    assert all_authorization_server_checks() == []
