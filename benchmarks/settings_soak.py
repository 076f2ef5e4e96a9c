"""Django settings for ``soak.py``: the benchmark settings (the demo on the benchmark database) with more streams
per caller.

``STREAMS_PER_CALLER`` (default 10 per caller and process) is raised to ``MCP_SOAK_STREAMS_PER_CALLER`` (default
1,000): the soak's listeners belong to a few users, each holding a few hundred streams. Everything else is
``benchmarks.settings``: ``MCP_BENCH_PGDATABASE``, Django's pool (``MCP_BENCH_DB_POOL``), a shared
``CURSOR_KEYS`` secret, and the Redis log and cache of ``MCP_REDIS_URL``.
"""

from __future__ import annotations

import os

from benchmarks.settings import *  # noqa: F403
from benchmarks.settings import MCP_RESOURCES as _BENCH_MCP_RESOURCES

MCP_RESOURCES = {
    **_BENCH_MCP_RESOURCES,
    "STREAMS_PER_CALLER": int(os.environ.get("MCP_SOAK_STREAMS_PER_CALLER", "1000")),
}
