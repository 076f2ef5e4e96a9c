"""The protocol versions this server speaks, and the names of the ``_meta`` keys that carry them.

Two eras share one endpoint: **2026-07-28** (stateless: ``server/discover``, per-request ``_meta`` and headers,
cache hints) and the session-based **2025-11-25** and **2025-06-18** (``initialize``, ``Mcp-Session-Id``, the GET
stream). Code names an era by its version, never "modern" or "legacy".
"""

from __future__ import annotations

V2026_07_28 = "2026-07-28"
V2025_11_25 = "2025-11-25"
V2025_06_18 = "2025-06-18"

LATEST_VERSION = V2026_07_28
SESSION_VERSIONS = (V2025_11_25, V2025_06_18)
"""The versions that open a session with ``initialize`` (newest first)."""
SUPPORTED_VERSIONS = (V2026_07_28, *SESSION_VERSIONS)

PROTOCOL_VERSION_META = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_META = "io.modelcontextprotocol/clientCapabilities"
SERVER_INFO_META = "io.modelcontextprotocol/serverInfo"
SUBSCRIPTION_ID_META = "io.modelcontextprotocol/subscriptionId"
PREFIX_EXTENSION = "io.github.django-mcp-resources/prefix"


def negotiate_session_version(requested: object) -> str:
    """The version answered to ``initialize``: the client's if it opens a session we speak, else our newest one."""
    if isinstance(requested, str) and requested in SESSION_VERSIONS:
        return requested
    return SESSION_VERSIONS[0]
