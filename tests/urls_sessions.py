"""Test-only URLconf for tests/test_sessions.py: the demo's URLs plus endpoints over registries of their own.

- ``/mcp``: the demo's endpoint (protected templates: ``initialize`` asks for a token);
- ``/public/mcp``: a registry where everything is public, so anonymous sessions are opened;
- ``/guarded/mcp``: a registry whose only protected thing is one static resource registered in code;
- ``/capped/mcp``, ``/recycled/mcp``, ``/ring/mcp``: the public registry with small session bounds.
"""

from __future__ import annotations

from django.urls import path

from mcp_resources import MCPServer, MCPView, ResourceRegistry
from mcp_resources.transport.sessions import SessionStore
from testproject.urls import urlpatterns as demo_urlpatterns

public_registry = ResourceRegistry("tests-sessions-public")
public_registry.register_resource("sessions://public", "public", lambda: "for everyone")

guarded_registry = ResourceRegistry("tests-sessions-guarded")
guarded_registry.register_resource("sessions://public", "public", lambda: "for everyone")
guarded_registry.register_resource(
    "sessions://guarded", "guarded", lambda: "for callers with a token", access="protected"
)

public_server = MCPServer(public_registry)

capped_store = SessionStore(max_sessions_per_caller=3, replace_after_seconds=3600)
recycled_store = SessionStore(max_sessions_per_caller=3, replace_after_seconds=0)
ring_store = SessionStore(anonymous_sessions=3)

urlpatterns = [
    path("public/mcp", MCPView.as_view(server=public_server)),
    path("guarded/mcp", MCPView.as_view(server=MCPServer(guarded_registry))),
    path("capped/mcp", MCPView.as_view(server=public_server, session_store=capped_store)),
    path("recycled/mcp", MCPView.as_view(server=public_server, session_store=recycled_store)),
    path("ring/mcp", MCPView.as_view(server=public_server, session_store=ring_store)),
    *demo_urlpatterns,
]
