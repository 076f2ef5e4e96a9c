"""The teams project's URLs: its pages, the MCP endpoint, and its own OAuth authorization server, mounted only
through what django-mcp-resources ships (docs/oauth.md)."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from mcp_resources.auth.server_urls import authorization_server_urlpatterns
from mcp_resources.urls import well_known_urlpatterns

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("mcp", include("mcp_resources.urls")),
    *well_known_urlpatterns("mcp"),
    *authorization_server_urlpatterns(),
]
