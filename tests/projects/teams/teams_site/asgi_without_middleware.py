"""The explicit opt-out: ``MCPEndpoint.as_asgi(..., middleware=False)`` serves MCP requests without Django's handler,
so no middleware of the project (the request recorder included) sees them. Not what this project deploys; its tests
use it to show the recorder's test can tell the difference."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "teams_site.settings")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path, re_path  # noqa: E402
from mcp_resources import MCPEndpoint  # noqa: E402

mcp_endpoint = MCPEndpoint.as_asgi(middleware=False)

application = ProtocolTypeRouter(
    {
        "http": URLRouter([path("mcp", mcp_endpoint), re_path(r"", django_asgi_app)]),
        "lifespan": mcp_endpoint,
    }
)
