"""HTTP: the Django view for the MCP endpoint, its ASGI front for streams, headers, Origin, sessions and streams."""

from __future__ import annotations

from mcp_resources.transport.asgi import MCPEndpoint
from mcp_resources.transport.views import MCPView

__all__ = ["MCPEndpoint", "MCPView"]
