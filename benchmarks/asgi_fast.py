"""The demo's ASGI deployment for benchmark servers, with the endpoint's opt-ins set from the environment.

``uvicorn benchmarks.asgi_fast:application`` routes exactly as ``testproject.asgi`` does (Channels'
``ProtocolTypeRouter``/``URLRouter``, the MCP path to :class:`~mcp_resources.transport.asgi.MCPEndpoint`, every
other path to Django's ASGI handler).

- ``MCP_BENCH_ASGI_HANDLER=asgi`` builds the endpoint with the project's Django ASGI application,
  ``MCPEndpoint.as_asgi(django_asgi_app)``: MCP requests go through Django's ASGI handler (middleware in async
  mode) instead of its WSGI handler in one worker thread (the default).
- ``MCP_BENCH_ASGI_MIDDLEWARE=0`` builds the endpoint with ``middleware=False``: the documented opt-in that serves
  MCP requests in one thread hop without Django's handler and without the project's middleware. It takes no Django
  application, so it does not combine with ``MCP_BENCH_ASGI_HANDLER=asgi`` (``ImproperlyConfigured`` at start-up).
"""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchmarks.settings")

django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402 - after the app registry is loaded
from django.urls import path, re_path  # noqa: E402

from mcp_resources.transport.asgi import MCPEndpoint  # noqa: E402

MIDDLEWARE = os.environ.get("MCP_BENCH_ASGI_MIDDLEWARE", "1") != "0"
THROUGH_ASGI = os.environ.get("MCP_BENCH_ASGI_HANDLER") == "asgi"

mcp_endpoint = MCPEndpoint.as_asgi(django_asgi_app if THROUGH_ASGI else None, middleware=MIDDLEWARE)

application = ProtocolTypeRouter(
    {
        "http": URLRouter([path("mcp", mcp_endpoint), re_path(r"", django_asgi_app)]),  # type: ignore[arg-type]
        "lifespan": mcp_endpoint,
    }
)
