"""Django settings for ``bench_listeners.py``: the conformance profile (unauthenticated), with the log on Redis.

One change to it: ``STREAMS_PER_CALLER`` is raised: every unauthenticated listener is the same caller
(``anonymous``), and the default limit (10 streams per caller and process) would refuse the 11th stream.
``DELIVERY_URL`` comes from ``MCP_REDIS_URL`` as in the demo's settings, so the publisher (the benchmark) and the
server share the log.
"""

from __future__ import annotations

from testproject.settings_conformance import *  # noqa: F403
from testproject.settings_conformance import MCP_RESOURCES as _CONFORMANCE

MCP_RESOURCES = {**_CONFORMANCE, "STREAMS_PER_CALLER": 1_000_000}
