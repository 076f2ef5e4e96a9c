"""HTTP transport: the Django view for the MCP endpoint, request headers, Origin and legacy sessions."""

from __future__ import annotations

from mcp_resources.transport.views import MCPView

__all__ = ["MCPView"]
