"""ASGI entry point, as django-mcp-resources' docs/deployment.md says: ``uvicorn teams_site.asgi:application``.

Channels' routers send the MCP path to ``MCPEndpoint`` (streams on the event loop, every other request through
Django's handler and so through the middleware) and everything else to Django.
"""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "teams_site.settings")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402 (after the app registry is loaded)
from django.urls import path, re_path  # noqa: E402
from mcp_resources import MCPEndpoint  # noqa: E402

mcp_endpoint = MCPEndpoint.as_asgi()

application = ProtocolTypeRouter(
    {
        "http": URLRouter([path("mcp", mcp_endpoint), re_path(r"", django_asgi_app)]),
        "lifespan": mcp_endpoint,
    }
)
