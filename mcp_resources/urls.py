"""``path("mcp", include("mcp_resources.urls"))`` mounts the endpoint at ``/mcp``."""

from __future__ import annotations

from django.urls import path

from mcp_resources.transport import MCPView

app_name = "mcp_resources"

urlpatterns = [
    path("", MCPView.as_view(), name="endpoint"),
]
