"""Authenticated request cost with and without the token cache (``TOKEN_CACHE_TTL_SECONDS``), measured in one run.

In process: ``RequestFactory`` requests handed straight to ``MCPView``, on a fresh database (a temporary SQLite
file, or ``--db postgres``: a scratch database ``mcp_bench_auth`` on 127.0.0.1:5432 dropped afterwards) with one
user, one document and one django-oauth-toolkit token bound to the endpoint. Contenders, timed interleaved
(round-robin batches, order rotated) and reported as medians:

- ``anonymous``: the same request without a token (the floor: no authentication; ``server/discover`` only);
- ``uncached``: with the token, validated by django-oauth-toolkit's ``validate_bearer_token`` on every request
  (``TOKEN_CACHE_TTL_SECONDS`` = 0, the default);
- ``cached``: with the token, served from the per-process cache (``TOKEN_CACHE_TTL_SECONDS`` = 300).

for ``server/discover`` (authentication dominates) and ``resources/read`` of the user's document. The ratio
``uncached / cached`` is the result; ``auth cost`` is each contender minus ``anonymous``.

    python benchmarks/bench_auth.py [--db sqlite|postgres] [--rounds 15] [--batch-seconds 0.1]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.common import fmt_time, interleaved, median, write_result  # noqa: E402

PG_ADMIN_DSN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres connect_timeout=5"
PG_NAME = "mcp_bench_auth"
VERSION = "2026-07-28"
RESOURCE = "http://127.0.0.1:8000/mcp"


def pg_admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN_DSN, autocommit=True) as conn:
        conn.execute(sql)


def setup(db: str, workdir: Path) -> None:
    """Point the demo settings at a fresh database, start Django and migrate."""
    os.environ["DJANGO_SETTINGS_MODULE"] = "testproject.settings"
    os.environ["MCP_RESOURCE_URI"] = RESOURCE
    if db == "postgres":
        pg_admin(f'DROP DATABASE IF EXISTS "{PG_NAME}" WITH (FORCE)')
        pg_admin(f'CREATE DATABASE "{PG_NAME}"')
        os.environ.update(MCP_TEST_DB="postgres", PGDATABASE=PG_NAME)
    else:
        os.environ.pop("MCP_TEST_DB", None)
        os.environ["MCP_DEMO_DB"] = str(workdir / "bench_auth.sqlite3")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--batch-seconds", type=float, default=0.1)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        setup(args.db, Path(tmp))
        try:
            result = run(args)
        finally:
            from django.db import connections

            connections.close_all()
            if args.db == "postgres":
                pg_admin(f'DROP DATABASE IF EXISTS "{PG_NAME}" WITH (FORCE)')
    path = write_result("auth", result)
    print(f"\nwritten to {path.relative_to(ROOT)}")


def run(args: argparse.Namespace) -> dict[str, Any]:
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.test import RequestFactory

    from mcp_resources.auth.tokencache import token_cache
    from mcp_resources.auth.tokens import issue_access_token
    from mcp_resources.transport import MCPView
    from testproject.library.models import Document

    user = get_user_model().objects.create_user("alice", password="alice")
    document = Document.objects.create(owner=user, title="Benchmark", body="benchmark body")
    token = issue_access_token(user, "documents:read", [RESOURCE], 24 * 3600, "bench_auth")
    view = MCPView.as_view()
    factory = RequestFactory()
    config = settings.MCP_RESOURCES  # mutated in place: no setting_changed signal, so the cache survives

    def request(method: str, params: dict[str, Any], bearer: str | None) -> Any:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": method,
            "params": {
                **params,
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": VERSION,
                    "io.modelcontextprotocol/clientCapabilities": {},
                },
            },
        }
        headers = {"HTTP_MCP_PROTOCOL_VERSION": VERSION, "HTTP_MCP_METHOD": method, "HTTP_HOST": "127.0.0.1:8000"}
        if "uri" in params:
            headers["HTTP_MCP_NAME"] = params["uri"]
        if bearer:
            headers["HTTP_AUTHORIZATION"] = f"Bearer {bearer}"
        encoded = json.dumps(body)

        def send(ttl: float) -> None:
            config["TOKEN_CACHE_TTL_SECONDS"] = ttl
            response = view(factory.post("/mcp", encoded, content_type="application/json", **headers))
            assert response.status_code == 200, response.content

        return send

    operations = {
        "server/discover": ("server/discover", {}),
        "resources/read": ("resources/read", {"uri": f"learn://documents/{document.pk}"}),
    }
    report: dict[str, Any] = {"db": args.db, "rounds": args.rounds, "operations": {}}
    print(f"database: {args.db}; {args.rounds} rounds, batches of about {args.batch_seconds}s; medians per request")
    for label, (method, params) in operations.items():
        anonymous = request(method, params, None)
        authenticated = request(method, params, token)
        token_cache.clear()
        contenders = {
            "uncached": lambda authenticated=authenticated: authenticated(0),
            "cached": lambda authenticated=authenticated: authenticated(300),
        }
        if method == "server/discover":  # a protected read without a token is a 401, not a floor
            contenders["anonymous"] = lambda anonymous=anonymous: anonymous(0)
        samples = interleaved(contenders, rounds=args.rounds, batch_seconds=args.batch_seconds)
        medians = {name: median(values) for name, values in samples.items()}
        ratio = medians["uncached"] / medians["cached"]
        entry: dict[str, Any] = {"median_seconds": medians, "uncached_over_cached": ratio}
        print(f"\n{label}")
        for name, value in medians.items():
            print(f"  {name:<10} {fmt_time(value)}")
        print(f"  uncached / cached = {ratio:.2f}x")
        if "anonymous" in medians:
            uncached_cost = medians["uncached"] - medians["anonymous"]
            cached_cost = medians["cached"] - medians["anonymous"]
            entry["auth_cost_seconds"] = {"uncached": uncached_cost, "cached": cached_cost}
            print(f"  auth cost: uncached {fmt_time(uncached_cost)}, cached {fmt_time(max(cached_cost, 0.0))}")
            if cached_cost > 0:
                entry["auth_cost_ratio"] = uncached_cost / cached_cost
                print(f"  auth cost ratio (uncached / cached) = {uncached_cost / cached_cost:.1f}x")
        report["operations"][label] = entry
    config["TOKEN_CACHE_TTL_SECONDS"] = 0
    return report


if __name__ == "__main__":
    main()
