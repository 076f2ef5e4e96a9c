"""Demo URLs: the MCP endpoint at ``/mcp`` and the admin."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("mcp", include("mcp_resources.urls")),
]
