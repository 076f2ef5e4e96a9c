"""Django settings for ``bench_delivery.py``: the demo's settings (authenticated callers, access checks, the log
and cache on the Redis of ``MCP_REDIS_URL``, the SQLite file of ``MCP_DEMO_DB``) with ``STREAMS_PER_CALLER`` raised.

Every listener of a document holds its owner's token, so a few users hold hundreds or thousands of streams each;
the default limit (10 streams per caller and process) would refuse the 11th. The ``benchmarks`` app applies
``MCP_BENCH_ABLATE`` (``--ablate``). Nothing else differs from ``testproject.settings``. The publisher and revoker
processes of the benchmark run on them too.
"""

from __future__ import annotations

from testproject.settings import *  # noqa: F403
from testproject.settings import MCP_RESOURCES as _DEMO_MCP_RESOURCES

MCP_RESOURCES = {**_DEMO_MCP_RESOURCES, "STREAMS_PER_CALLER": 1_000_000}
INSTALLED_APPS = [*INSTALLED_APPS, "benchmarks.apps.BenchmarksConfig"]  # noqa: F405  (MCP_BENCH_ABLATE, --ablate)
