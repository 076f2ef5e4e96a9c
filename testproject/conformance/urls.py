"""The conformance profile's URLs: the demo's, with ``/mcp`` served by the profile's server.

Requests to the MCP path run through Django's handler (``MCPEndpoint`` hands them over with the middleware), so
the server that answers them is the URLconf's view's.
"""

from __future__ import annotations

from django.urls import include, path

from mcp_resources.transport.views import MCPView
from testproject import urls as demo
from testproject.conformance.server import conformance_server

endpoint = ([path("", MCPView.as_view(server=conformance_server), name="endpoint")], "mcp_resources")

urlpatterns = [pattern for pattern in demo.urlpatterns if str(getattr(pattern, "pattern", "")) != "mcp"]
urlpatterns.append(path("mcp", include(endpoint)))
