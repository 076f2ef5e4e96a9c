"""Test-only URLconf for the resource-server tests: ``/mcp`` over a registry built for them.

Its templates make the authorization rules visible: one needs two scopes, one needs ``offline_access`` (never
advertised) next to another scope, one is protected without scopes, one is public; ``whoami`` returns what the
template sees of its caller (``request.user``, ``request.auth`` and the principal). django-oauth-toolkit's
authorization-server metadata is mounted at the root so the protected resource metadata can name it.

:class:`UsernameSubject` and :class:`EmailSubject` are authentication classes as a project writes them to take
the subject from another user field (``MCP_RESOURCES["AUTHENTICATION_CLASS"] = "tests.urls_auth.UsernameSubject"``).
"""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpRequest
from django.urls import include, path
from oauth2_provider import urls as oauth2_urls

from mcp_resources import MCPServer, MCPView, ResourceRegistry, ResourceTemplate
from mcp_resources.auth import OAuth2Authentication
from mcp_resources.urls import well_known_urlpatterns


class UsernameSubject(OAuth2Authentication):
    def get_subject(self, user: Any) -> str | None:
        return str(user.get_username())


class TwoTokenCache(OAuth2Authentication):
    """An authentication class whose token cache holds two tokens (``token_cache_size``)."""

    token_cache_size = 2


class ManyTokenCache(OAuth2Authentication):
    """A token cache size that is not a number: refused by ``mcp_resources.E018``."""

    token_cache_size = "many"  # type: ignore[assignment]


class EmailSubject(OAuth2Authentication):
    def get_subject(self, user: Any) -> str | None:
        return str(user.email)


registry = ResourceRegistry("tests-auth")


def _caller(request: HttpRequest) -> dict[str, Any]:
    principal = request.auth  # type: ignore[attr-defined]
    return {
        "user": request.user.get_username() if request.user.is_authenticated else None,
        "auth_is_principal": principal is request.mcp_principal,  # type: ignore[attr-defined]
        "subject": principal.subject,
        "client_id": principal.client_id,
        "scopes": sorted(principal.scopes),
        "audience": list(principal.audience),
    }


@registry.register
class WhoAmI(ResourceTemplate):
    name = "whoami"
    uri_template = "auth://whoami/{id}"
    access = "protected"
    required_scopes = ("a:read",)

    def read(self, request: HttpRequest, uri: str, variables: Any) -> Any:
        return json.dumps(_caller(request))


@registry.register
class TwoScopes(ResourceTemplate):
    name = "two-scopes"
    uri_template = "auth://two/{id}"
    access = "protected"
    required_scopes = ("a:read", "b:read")

    def read(self, request: HttpRequest, uri: str, variables: Any) -> Any:
        return "two scopes"


@registry.register
class OfflineScope(ResourceTemplate):
    name = "offline"
    uri_template = "auth://offline/{id}"
    access = "protected"
    required_scopes = ("offline_access", "c:read")

    def read(self, request: HttpRequest, uri: str, variables: Any) -> Any:
        return "offline"


@registry.register
class Bare(ResourceTemplate):
    name = "bare"
    uri_template = "auth://bare/{id}"
    access = "protected"

    def read(self, request: HttpRequest, uri: str, variables: Any) -> Any:
        return "bare"


@registry.register
class Open(ResourceTemplate):
    name = "open"
    uri_template = "auth://open/{id}"
    access = "public"

    def read(self, request: HttpRequest, uri: str, variables: Any) -> Any:
        return "open"


registry.register_resource(
    "auth://static/scoped", "scoped", lambda: "scoped static", access="protected", required_scopes=("s:read",)
)
registry.register_resource("auth://static/public", "public", lambda: "public static")

server = MCPServer(registry)

urlpatterns = [
    path("", include(([p for p in oauth2_urls.metadata_urlpatterns if "server" in str(p.name)], "oauth2_provider"))),
    *well_known_urlpatterns("mcp", registry),
    path("mcp", MCPView.as_view(server=server)),
]
