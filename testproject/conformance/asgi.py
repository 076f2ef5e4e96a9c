"""ASGI entry point of the conformance profile: ``uvicorn testproject.conformance.asgi:application``.

``testproject.asgi`` with the profile's settings (``testproject.settings_conformance``, whose URLconf serves
``/mcp`` with :class:`~testproject.conformance.server.ConformanceServer`: the URLconf's view prepares the streams
too, so the endpoint is given no server); ``make conformance`` serves it.
"""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "testproject.settings_conformance")

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
