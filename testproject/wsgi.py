"""WSGI entry point: ``gunicorn testproject.wsgi``.

The MCP endpoint is served by :class:`mcp_resources.wsgi.MCPWSGIApplication` (the view without the middleware
stack, as under ASGI); every other path (admin, OAuth) goes through Django's own WSGI handler.
"""

from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "testproject.settings")

django_application = get_wsgi_application()

from mcp_resources.wsgi import MCPWSGIApplication  # noqa: E402 - needs the app registry loaded above

application = MCPWSGIApplication(django_application, path="/mcp")
