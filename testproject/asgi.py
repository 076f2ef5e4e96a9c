"""ASGI entry point: ``uvicorn testproject.asgi:application``.

The MCP endpoint is served by :class:`mcp_resources.asgi.MCPApplication` (one thread hop per request); every
other path (admin, OAuth) goes through Django's own ASGI handler.
"""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "testproject.settings")

django_application = get_asgi_application()

from mcp_resources.asgi import MCPApplication  # noqa: E402 - needs the app registry loaded above

application = MCPApplication(django_application, path="/mcp")
