"""The consent page of the authorization server: django-oauth-toolkit's authorization view with a template that says
what an MCP client is asking for.

The template is ``mcp_resources/oauth/authorize.html``; a project overrides it by putting a template of the same
name in one of its ``TEMPLATES`` directories (docs/oauth.md). Its context, besides django-oauth-toolkit's own
(``application``, ``form``, ``scopes``, ``scopes_descriptions``, ``redirect_uri``, ``error``...):

- ``requested_scopes``: ``(scope, description)`` pairs;
- ``resources``: the RFC 8707 resources the token will be bound to, each ``{"uri", "this_server"}``, where
  ``this_server`` tells whether it is this project's MCP endpoint (``RESOURCE_URI``);
- ``server_name``: this server's name (``SERVER_INFO``'s ``title``, else its ``name``);
- ``redirect_host``: the host the browser is sent back to (where the authorization code goes).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from oauth2_provider.views import AuthorizationView

from mcp_resources.auth.metadata import normalize_resource_uri
from mcp_resources.conf import mcp_settings

CONSENT_TEMPLATE = "mcp_resources/oauth/authorize.html"


class ConsentView(AuthorizationView):
    """``GET``/``POST`` ``<prefix>authorize/``: sign-in is required (``LOGIN_URL``), then the user allows or denies."""

    template_name = CONSENT_TEMPLATE

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context: dict[str, Any] = super().get_context_data(**kwargs)
        scopes = list(context.get("scopes") or ())
        descriptions = list(context.get("scopes_descriptions") or ())
        context["requested_scopes"] = list(zip(scopes, descriptions, strict=False))
        ours = normalize_resource_uri(mcp_settings.resource_uri or "")
        context["resources"] = [
            {"uri": uri, "this_server": bool(ours) and normalize_resource_uri(uri) == ours}
            for uri in str(context.get("resource") or "").split()
        ]
        info = mcp_settings.server_info
        context["server_name"] = info.get("title") or info["name"]
        redirect_uri = context.get("redirect_uri")
        context["redirect_host"] = urlsplit(str(redirect_uri)).netloc if redirect_uri else ""
        return context
