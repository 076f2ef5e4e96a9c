"""Django settings for the benchmarks: the demo project's settings on the benchmark database.

Driven by environment variables that ``benchmarks/run.py`` sets for every script and server it starts:

- ``MCP_BENCH_DB``: ``postgres`` (database ``mcp_bench`` on 127.0.0.1:5432, user postgres) or ``sqlite``;
- ``MCP_BENCH_SQLITE_PATH``: the SQLite file (default ``benchmarks/results/bench.sqlite3``);
- ``MCP_BENCH_PAGE_SIZE``: ``MCP_RESOURCES["PAGE_SIZE"]`` (default 100, the maximum);
- ``MCP_BENCH_CURSOR_KEY``: a shared ``CURSOR_KEYS`` secret, so cursors sealed by the benchmark are valid in the
  servers it starts (the same setting several workers need in production);
- ``MCP_BENCH_TOKEN_CACHE_TTL``: ``MCP_RESOURCES["TOKEN_CACHE_TTL_SECONDS"]`` when set (default: the demo's, off);
- ``MCP_BENCH_CONN_MAX_AGE``: ``none`` (persistent connections, the production norm, used by every item) or
  seconds;
- ``MCP_BENCH_PG_BINDING``: ``server`` for server-side parameter binding with psycopg's default
  ``prepare_threshold`` (5), so that repeated statements are prepared; anything else keeps Django's default
  (client-side binding);
- ``MCP_BENCH_DB_POOL``: ``1`` for Django's connection pool (``OPTIONS["pool"]``, needs ``psycopg_pool`` and
  ``MCP_BENCH_CONN_MAX_AGE=0``);
- ``MCP_BENCH_ABLATE``: speed-ups to switch off in this process (``benchmarks/ablation.py``, applied by the
  ``benchmarks`` app once the app registry is ready).

Cursors live for 6 hours instead of 15 minutes: a benchmark seals its cursors once, before rounds that can take
longer than that.
"""

from __future__ import annotations

import os
from pathlib import Path

from testproject.settings import *  # noqa: F403
from testproject.settings import MCP_RESOURCES as _DEMO_MCP_RESOURCES

BENCH_DIR = Path(__file__).resolve().parent

DEBUG = False
ROOT_URLCONF = "benchmarks.urls"

_age = os.environ.get("MCP_BENCH_CONN_MAX_AGE", "none").lower()
_conn_max_age: int | None = None if _age == "none" else int(_age)

if os.environ.get("MCP_BENCH_DB", "postgres") == "postgres":
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": os.environ.get("MCP_BENCH_PGDATABASE", "mcp_bench"),
            "USER": "postgres",
            "HOST": "127.0.0.1",
            "PORT": "5432",
            "CONN_MAX_AGE": _conn_max_age,
            "OPTIONS": {
                **(
                    {"server_side_binding": True, "prepare_threshold": 5}
                    if os.environ.get("MCP_BENCH_PG_BINDING") == "server"
                    else {}
                ),
                # Django's own pool (psycopg_pool), the way Django's docs advise for ASGI instead of persistent
                # connections; it needs CONN_MAX_AGE 0.
                **({"pool": True} if os.environ.get("MCP_BENCH_DB_POOL") == "1" else {}),
            },
        }
    }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.environ.get("MCP_BENCH_SQLITE_PATH", str(BENCH_DIR / "results" / "bench.sqlite3")),
            "CONN_MAX_AGE": _conn_max_age,
        }
    }

MCP_RESOURCES = {
    **_DEMO_MCP_RESOURCES,
    "PAGE_SIZE": int(os.environ.get("MCP_BENCH_PAGE_SIZE", "100")),
    "CURSOR_KEYS": [k for k in [os.environ.get("MCP_BENCH_CURSOR_KEY", "")] if k],
    "CURSOR_TTL_SECONDS": 6 * 3600,
}
if os.environ.get("MCP_BENCH_TOKEN_CACHE_TTL"):
    # Off (the default) unless asked for: the "+tc" servers and ``run.py --token-cache-ttl`` measure the cache.
    MCP_RESOURCES["TOKEN_CACHE_TTL_SECONDS"] = float(os.environ["MCP_BENCH_TOKEN_CACHE_TTL"])

# Last, so that its ready() runs once every other app is ready: it applies MCP_BENCH_ABLATE.
INSTALLED_APPS = [*INSTALLED_APPS, "benchmarks.apps.BenchmarksConfig"]  # noqa: F405

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"mcp_resources": {"handlers": ["console"], "level": "WARNING"}},
}
