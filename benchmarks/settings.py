"""Django settings for the benchmarks: the demo project's settings on the benchmark database.

Driven by environment variables that ``benchmarks/run.py`` sets for every script and server it starts:

- ``MCP_BENCH_DB``: ``postgres`` (database ``mcp_bench`` on 127.0.0.1:5432, user postgres) or ``sqlite``;
- ``MCP_BENCH_SQLITE_PATH``: the SQLite file (default ``benchmarks/results/bench.sqlite3``);
- ``MCP_BENCH_PAGE_SIZE``: ``MCP_RESOURCES["PAGE_SIZE"]`` (default 100, the maximum);
- ``MCP_BENCH_CURSOR_KEY``: a shared ``CURSOR_KEYS`` secret, so cursors sealed by the benchmark are valid in the
  servers it starts (the same setting several workers need in production);
- ``MCP_BENCH_TOKEN_CACHE_TTL``: ``MCP_RESOURCES["TOKEN_CACHE_TTL"]`` when set (default: the demo's, off);
- ``MCP_BENCH_CONN_MAX_AGE``: ``none`` (persistent connections, the production norm, used by every item) or
  seconds;
- ``MCP_BENCH_PG_BINDING``: ``server`` for server-side parameter binding with psycopg's default
  ``prepare_threshold`` (5), so that repeated statements are prepared, as the SDK peer's psycopg connection does;
  anything else keeps Django's default (client-side binding);
- ``MCP_BENCH_ASGI_THREADS``: ``MCP_RESOURCES["ASGI_THREADS"]`` when set (default: the app's, 2);
- ``MCP_BENCH_PREPARED``: ``0`` sets ``MCP_RESOURCES["PREPARED_STATEMENTS"]`` to False (the app's fixed queries
  then run unprepared, as before that setting existed).
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
            "OPTIONS": (
                {"server_side_binding": True, "prepare_threshold": 5}
                if os.environ.get("MCP_BENCH_PG_BINDING") == "server"
                else {}
            ),
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
}
if os.environ.get("MCP_BENCH_PREPARED") == "0":
    MCP_RESOURCES["PREPARED_STATEMENTS"] = False
if os.environ.get("MCP_BENCH_ASGI_THREADS"):
    MCP_RESOURCES["ASGI_THREADS"] = int(os.environ["MCP_BENCH_ASGI_THREADS"])
if os.environ.get("MCP_BENCH_TOKEN_CACHE_TTL"):
    # Off (the default) unless asked for: ``run.py --token-cache-ttl`` measures the effect of the token cache.
    MCP_RESOURCES["TOKEN_CACHE_TTL"] = float(os.environ["MCP_BENCH_TOKEN_CACHE_TTL"])

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"mcp_resources": {"handlers": ["console"], "level": "WARNING"}},
}
