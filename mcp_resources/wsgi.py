"""A WSGI front for the MCP endpoint: the view without the middleware stack, as under ASGI.

:class:`~mcp_resources.asgi.MCPApplication` serves the MCP path under ASGI without Django's handler and
middleware; ``MCPWSGIApplication`` does the same under a WSGI server (gunicorn, uWSGI, mod_wsgi): a request to
``path`` goes straight to :class:`~mcp_resources.transport.MCPView`, with Django's request signals around it
(so stale database connections are closed as usual); every other path goes to the wrapped Django application.

Middleware does not run for the MCP path: the view validates ``Host`` and ``Origin`` itself, needs no CSRF,
session or message middleware, and authenticates every request from its ``Authorization`` header. Serve the
endpoint through Django's own handler (mount ``mcp_resources.urls`` and use ``get_wsgi_application()`` alone) when a
middleware of yours must see MCP requests.

    # wsgi.py
    from django.core.wsgi import get_wsgi_application
    from mcp_resources.wsgi import MCPWSGIApplication

    application = MCPWSGIApplication(get_wsgi_application(), path="/mcp")
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from django.core import signals
from django.core.handlers.wsgi import WSGIRequest, get_path_info, get_script_name
from django.urls import set_script_prefix

from mcp_resources.server import MCPServer

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class MCPWSGIApplication:
    """Serve ``path`` with the MCP view directly; delegate everything else to ``fallback``."""

    def __init__(self, fallback: WSGIApp, path: str = "/mcp", server: MCPServer | None = None):
        from mcp_resources.transport import MCPView

        self.fallback = fallback
        self.path = path
        self.view = MCPView.as_view(server=server)

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if get_path_info(environ) != self.path:
            return self.fallback(environ, start_response)
        set_script_prefix(get_script_name(environ))
        signals.request_started.send(sender=type(self), environ=environ)
        request = WSGIRequest(environ)
        response = self.view(request)
        # Closing the response (the server does, after sending it) sends request_finished, as Django's handler.
        response._resource_closers.append(request.close)  # type: ignore[attr-defined]
        start_response(f"{response.status_code} {response.reason_phrase}", list(response.items()))
        return response
