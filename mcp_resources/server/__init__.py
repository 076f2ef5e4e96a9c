"""The protocol core shared by the HTTP view, the management commands and the test client."""

from __future__ import annotations

from mcp_resources.server.context import CallContext, SessionSubscriptions
from mcp_resources.server.core import MCPServer, Method, default_server

__all__ = ["CallContext", "MCPServer", "Method", "SessionSubscriptions", "default_server"]
