"""The demo's settings for tests/test_gevent_streams.py: a keep-alive every second (``STREAM_KEEPALIVE_SECONDS``,
default 15), so that a client that went away is noticed within a second; a write that waits a second ends its
stream (``STREAM_SEND_TIMEOUT_SECONDS``, default 10); two streams per caller
(``STREAMS_PER_CALLER``, default 10); and, with Django's pool on PostgreSQL, a pool of two connections that gives up
after five seconds, so that streams holding connections would show."""

from __future__ import annotations

from testproject.settings import *  # noqa: F403
from testproject.settings import DATABASES
from testproject.settings import MCP_RESOURCES as _DEMO_MCP_RESOURCES

MCP_RESOURCES = {
    **_DEMO_MCP_RESOURCES,
    "STREAM_KEEPALIVE_SECONDS": 1.0,
    "STREAMS_PER_CALLER": 2,
    "STREAM_SEND_TIMEOUT_SECONDS": 1.0,
}

if DATABASES["default"].get("OPTIONS", {}).get("pool") is True:
    DATABASES["default"]["OPTIONS"]["pool"] = {"min_size": 1, "max_size": 2, "timeout": 5}
