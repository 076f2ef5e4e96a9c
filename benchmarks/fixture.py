"""Create, seed and drop the benchmark database.

``fixture.py setup --sizes 1000,100000,1000000`` (re)creates the database (PostgreSQL ``mcp_bench`` or the SQLite
file, per ``MCP_BENCH_DB``), migrates it, adds one user per size owning that many documents (seeded in SQL with
``generate_series`` / a recursive CTE), mints a django-oauth-toolkit token per user and writes
``results/fixture.json``. ``fixture.py drop`` removes the database.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import FIXTURE_FILE, IN_PROCESS_HOST, setup_django, write_result

PG_ADMIN_DSN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres connect_timeout=5"
BASE_TIME = "2024-01-01 00:00:00"


def db_kind() -> str:
    return os.environ.get("MCP_BENCH_DB", "postgres")


def pg_name() -> str:
    return os.environ.get("MCP_BENCH_PGDATABASE", "mcp_bench")


def sqlite_path() -> Path:
    from benchmarks.common import RESULTS_DIR

    return Path(os.environ.get("MCP_BENCH_SQLITE_PATH", str(RESULTS_DIR / "bench.sqlite3")))


def drop_database() -> None:
    if db_kind() == "postgres":
        import psycopg

        with psycopg.connect(PG_ADMIN_DSN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{pg_name()}" WITH (FORCE)')
    else:
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(str(sqlite_path()) + suffix).unlink(missing_ok=True)


def create_database() -> None:
    drop_database()
    if db_kind() == "postgres":
        import psycopg

        with psycopg.connect(PG_ADMIN_DSN, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{pg_name()}"')
    else:
        sqlite_path().parent.mkdir(parents=True, exist_ok=True)


def seed_documents(user_id: int, count: int) -> None:
    """``count`` live documents for ``user_id``, one second apart, in one INSERT ... SELECT."""
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "INSERT INTO library_document (owner_id, title, body, created, deleted_at) "
                "SELECT %s, 'Document ' || i, 'Body of document ' || i, "
                "timestamptz '2024-01-01 00:00:00+00' + i * interval '1 second', NULL "
                "FROM generate_series(1, %s) AS i",
                [user_id, count],
            )
        else:
            cursor.execute(
                "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < %s) "
                "INSERT INTO library_document (owner_id, title, body, created, deleted_at) "
                "SELECT %s, 'Document ' || i, 'Body of document ' || i, "
                "datetime(%s, '+' || i || ' seconds'), NULL FROM s",
                [count, user_id, BASE_TIME],
            )


def mint_token(user: Any, resources: list[str], scope: str = "documents:read") -> str:
    """A django-oauth-toolkit access token for ``user``, bound to ``resources`` (as ``mcp_token`` mints them), stored
    as django-oauth-toolkit stores tokens (``set_token_value``: its checksum, and the token only when not redacted)."""
    import secrets
    from datetime import timedelta

    from django.utils import timezone
    from oauth2_provider.models import get_access_token_model, get_application_model, set_token_value

    application_model = get_application_model()
    application, _ = application_model.objects.get_or_create(
        name="benchmarks",
        defaults={
            "client_type": application_model.CLIENT_PUBLIC,
            "authorization_grant_type": application_model.GRANT_AUTHORIZATION_CODE,
            "redirect_uris": "http://127.0.0.1/callback",
        },
    )
    token = secrets.token_urlsafe(32)
    access_token = get_access_token_model()(
        user=user,
        application=application,
        scope=scope,
        expires=timezone.now() + timedelta(days=1),
        resource=resources,
    )
    set_token_value(access_token, token)
    access_token.save()
    return token


def setup(sizes: list[int]) -> dict[str, Any]:
    t0 = time.perf_counter()
    create_database()
    setup_django()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection

    from mcp_resources.conf import mcp_settings
    from testproject.library.models import Document

    call_command("migrate", verbosity=0, interactive=False)
    migrated = time.perf_counter()
    users = []
    user_model = get_user_model()
    for size in sizes:
        user = user_model.objects.create_user(username=f"bench_{size}", password=None)
        s0 = time.perf_counter()
        seed_documents(user.pk, size)
        first_id = Document.objects.filter(owner_id=user.pk).order_by("id").values_list("id", flat=True).first()
        token = mint_token(user, [f"http://{IN_PROCESS_HOST}/mcp", f"http://{IN_PROCESS_HOST}/bench/drf/documents"])
        users.append(
            {
                "username": user.username,
                "user_id": user.pk,
                "size": size,
                "first_id": first_id,
                "token": token,
                "seed_seconds": round(time.perf_counter() - s0, 2),
            }
        )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    info = {
        "db": db_kind(),
        "vendor": connection.vendor,
        "database": pg_name() if db_kind() == "postgres" else str(sqlite_path()),
        "page_size": mcp_settings.page_size,
        "users": users,
        "migrate_seconds": round(migrated - t0, 2),
        "setup_seconds": round(time.perf_counter() - t0, 2),
    }
    FIXTURE_FILE.parent.mkdir(parents=True, exist_ok=True)
    write_result("fixture", info)
    return info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p_setup = sub.add_parser("setup")
    p_setup.add_argument("--sizes", default="1000,100000,1000000")
    sub.add_parser("drop")
    args = parser.parse_args()
    if args.command == "drop":
        drop_database()
        print(f"dropped the benchmark database ({db_kind()})")
        return
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    info = setup(sizes)
    rows = ", ".join(f"{u['username']}: {u['size']:,} in {u['seed_seconds']} s" for u in info["users"])
    print(f"fixture on {info['vendor']} ({info['database']}): migrate {info['migrate_seconds']} s; {rows}")
    print(f"page size {info['page_size']}; total set-up {info['setup_seconds']} s")


if __name__ == "__main__":
    main()
