"""ASGI entry point: ``uvicorn testproject.asgi:application``.

Channels' routers send the MCP path to :class:`mcp_resources.transport.asgi.MCPEndpoint`, which serves the
subscription streams on the event loop and runs every other MCP request through Django's handler (the middleware
stack included) in one worker thread. Every other path (admin, OAuth) goes straight to Django's ASGI handler.
"""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "testproject.settings")

django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402 - after the app registry is loaded
from django.urls import path, re_path  # noqa: E402

from mcp_resources.transport.asgi import MCPEndpoint  # noqa: E402

mcp_endpoint = MCPEndpoint.as_asgi()

application = ProtocolTypeRouter(
    {
        # django-stubs type path() for views only: Channels routes ASGI applications with it.
        "http": URLRouter([path("mcp", mcp_endpoint), re_path(r"", django_asgi_app)]),  # type: ignore[arg-type]
        "lifespan": mcp_endpoint,
    }
)
