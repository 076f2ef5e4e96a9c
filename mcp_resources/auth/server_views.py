"""The pages of the authorization server a person sees: consent (django-oauth-toolkit's authorization view with a
template that says what an MCP client is asking for), sign-in, and the connected apps.

Each sends ``Cache-Control: no-store`` (with Django's ``never_cache``) and refuses to be framed
(``X-Frame-Options: DENY`` and the Content Security Policy ``frame-ancestors 'none'``): :class:`PrivatePageMixin`.

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

from django.contrib import messages
from django.contrib.auth.mixins import LoginRequiredMixin
from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.cache import add_never_cache_headers
from django.utils.translation import gettext as _
from django.views.generic import TemplateView
from oauth2_provider.views import AuthorizationView

from mcp_resources.auth.connections import connections_of, revoke_connection
from mcp_resources.auth.metadata import normalize_resource_uri
from mcp_resources.conf import mcp_settings

CONSENT_TEMPLATE = "mcp_resources/oauth/authorize.html"
CONNECTED_APPS_TEMPLATE = "mcp_resources/oauth/connected_apps.html"
FRAME_ANCESTORS = "frame-ancestors 'none'"


def make_private(response: HttpResponse) -> HttpResponse:
    """Never cached (``no-store``), never framed (``X-Frame-Options: DENY``, CSP ``frame-ancestors 'none'``)."""
    add_never_cache_headers(response)
    response["X-Frame-Options"] = "DENY"
    policy = response.get("Content-Security-Policy", "")
    if "frame-ancestors" not in policy:
        response["Content-Security-Policy"] = f"{policy.rstrip('; ')}; {FRAME_ANCESTORS}" if policy else FRAME_ANCESTORS
    return response


class PrivatePageMixin:
    """A page only its person may see: every response (redirects and errors too) is :func:`make_private`."""

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response: HttpResponse = super().dispatch(request, *args, **kwargs)  # type: ignore[misc]
        return make_private(response)


class SignInView(PrivatePageMixin, LoginView):
    """Django's ``LoginView`` (template ``registration/login.html``), neither cached nor framed: mount it at your
    ``LOGIN_URL`` if your sign-in page is not already such a view."""


class ConsentView(PrivatePageMixin, AuthorizationView):
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


class ConnectedAppsView(PrivatePageMixin, LoginRequiredMixin, TemplateView):
    """``GET``/``POST`` ``<prefix>connected/``: the AI clients the signed-in person authorized, with what they may do,
    since when and their last token; ``POST client_id=...`` takes one back (its tokens stop working at once).

    The template is ``mcp_resources/oauth/connected_apps.html`` (override it as the consent page's). Its context:
    ``connections`` (:class:`~mcp_resources.auth.connections.Connection` each: ``name``, ``client_id``,
    ``scope_descriptions``, ``authorized``, ``last_used``) and ``server_name``. A disconnection is confirmed with
    a message of ``django.contrib.messages``, when the project uses it.
    """

    template_name = CONNECTED_APPS_TEMPLATE

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context: dict[str, Any] = super().get_context_data(**kwargs)
        context["connections"] = connections_of(self.request.user)
        info = mcp_settings.server_info
        context["server_name"] = info.get("title") or info["name"]
        return context

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        client_id = str(request.POST.get("client_id", ""))
        names = {connection.client_id: connection.name for connection in connections_of(request.user)}
        if client_id in names and revoke_connection(request.user, client_id):
            message = _("%(name)s is disconnected: it can no longer act on your behalf.") % {"name": names[client_id]}
            messages.success(request, message, fail_silently=True)
        return HttpResponseRedirect(request.path, status=303)
