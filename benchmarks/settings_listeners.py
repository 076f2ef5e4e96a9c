"""Django settings for ``bench_listeners.py`` and ``bare_consumer.py``: the conformance profile (unauthenticated).

Two changes to it:

- ``STREAMS_PER_CALLER`` is raised: every unauthenticated listener is the same caller (``anonymous``), and the
  default limit (10 streams per caller and process) would refuse the 11th stream.
- The Redis channel layer (``MCP_REDIS_URL``) is configured with a ``socket_timeout`` above channels-redis's
  5-second blocking receive (``BZPOPMIN`` with ``brpop_timeout = 5``). redis-py 8 defaults ``socket_timeout`` to
  5 seconds, so an idle receive can time out on the client side first: channels-redis then raises
  ``redis.exceptions.TimeoutError`` into whichever stream was receiving, and that stream ends. The demo's settings
  do the same; it is repeated here so that the benchmark does not depend on them. So is ``max_connections``
  (``mcp_resources.W005``).
"""

from __future__ import annotations

import os

from testproject.settings_conformance import *  # noqa: F403
from testproject.settings_conformance import MCP_RESOURCES as _CONFORMANCE

MCP_RESOURCES = {**_CONFORMANCE, "STREAMS_PER_CALLER": 1_000_000}

if os.environ.get("MCP_REDIS_URL"):
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                # max_connections as in the demo: redis-py's default pool of 100 caps a burst of streams (W005).
                "hosts": [{"address": os.environ["MCP_REDIS_URL"], "socket_timeout": 30, "max_connections": 1000}],
                "capacity": 100,
            },
        }
    }
