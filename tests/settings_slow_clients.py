"""The demo's settings with the stream bounds made small, for tests/test_slow_clients.py (live servers).

A write to a stream may wait one second for the server to take it (``STREAM_SEND_TIMEOUT_SECONDS``, default 10),
and an idle stream sends a keep-alive every second (``STREAM_KEEPALIVE_SECONDS``, default 15).
"""

from __future__ import annotations

from testproject.settings import *  # noqa: F403
from testproject.settings import MCP_RESOURCES as _DEMO_MCP_RESOURCES

MCP_RESOURCES = {**_DEMO_MCP_RESOURCES, "STREAM_SEND_TIMEOUT_SECONDS": 1.0, "STREAM_KEEPALIVE_SECONDS": 1.0}
