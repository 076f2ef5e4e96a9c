"""Demo URLs: the MCP endpoint at ``/mcp``, its OAuth authorization server, the sign-in page and the admin.

- ``/mcp``: the MCP endpoint (an OAuth 2.1 resource server).
- ``/.well-known/oauth-protected-resource[/mcp]``: its protected resource metadata (RFC 9728).
- ``/.well-known/oauth-authorization-server``: the authorization server metadata (RFC 8414).
- ``/o/authorize/`` (the consent page), ``/o/token/``, ``/o/revoke_token/``, ``/o/register/``: django-oauth-toolkit's
  endpoints, as ``mcp_resources.auth.server_urls`` mounts them.
- ``/o/connected/``: the AI clients a signed-in person authorized, and disconnecting one.
- ``/accounts/login/``: where the authorization endpoint sends a visitor to sign in (alice/alice, bob/bob), neither
  cached nor framed (``SignInView``).
- ``/api/bookmarks/``: the REST framework API of the bookmarks that the MCP endpoint also serves
  (``testproject/library/api.py``).
"""

from __future__ import annotations

from django.apps import apps
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from mcp_resources.auth.server_urls import authorization_server_urlpatterns
from mcp_resources.auth.server_views import SignInView
from mcp_resources.urls import well_known_urlpatterns

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/login/", SignInView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    *authorization_server_urlpatterns(),
    *well_known_urlpatterns("mcp"),
    path("mcp", include("mcp_resources.urls")),
]

if apps.is_installed("testproject.library"):  # not in the conformance profile
    from testproject.library.api import router

    urlpatterns.append(path("api/", include(router.urls)))
