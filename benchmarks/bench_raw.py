"""Item 3: the framework's cost over the raw SQL query for the same page.

The SQL and parameters are captured from the core while it serves the page (``connection.execute_wrapper``), then
run directly with the driver on a separate connection (psycopg with server-side binding, prepared after a few
executions; or sqlite3) and fetched: the physical floor. Interleaved with it: the ORM alone (the same keyset
query through ``mcp_resources.pagination.keyset_page``, model instances included) and the whole core page
(``MCPServer.call``). Two pages: half-way through the smallest and through the middle inventory; the headline is
the larger (less favourable) multiple. Target: core <= 3x raw.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import fmt_time, interleaved, load_fixture, median, setup_django, verdict, write_result

TARGET = 3.0


def raw_runner(vendor: str, sql: str, params: list[Any]) -> tuple[Callable[[], Any], Callable[[], None]]:
    """A zero-argument function running ``sql`` on its own driver connection, and a closer."""
    from django.db import connection

    if vendor == "postgresql":
        import psycopg

        settings = connection.settings_dict
        conn = psycopg.connect(
            host=settings["HOST"],
            port=settings["PORT"],
            user=settings["USER"],
            dbname=settings["NAME"],
            autocommit=True,
        )

        def run_pg() -> list[Any]:
            return conn.execute(sql, params).fetchall()

        return run_pg, conn.close
    import sqlite3

    lite = sqlite3.connect(connection.settings_dict["NAME"])
    lite_sql = sql.replace("%s", "?")

    def run_sqlite() -> list[Any]:
        return lite.execute(lite_sql, params).fetchall()

    return run_sqlite, lite.close


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--batch-seconds", type=float, default=0.1)
    args = parser.parse_args()

    setup_django()
    from benchmarks.pages import capture_page_sql, check_page, context_for, core_objects, cursor_at, reference_pages

    fixture = load_fixture()
    page_size = fixture["page_size"]
    server, template = core_objects()
    contenders: dict[str, Callable[[], Any]] = {}
    closers = []
    pages = reference_pages(fixture)
    for page in pages:
        user, name = page["user"], page["name"]
        ctx = context_for(user)
        where = cursor_at(server, template, ctx, user, 0.5, page_size)
        params = {"cursor": where["cursor"]}
        check_page(server.call("resources/list", params, ctx), where["first_uri"], page_size)
        sql, sql_params = capture_page_sql(server, ctx, params)
        page["sql"] = sql
        run_raw, close = raw_runner(fixture["vendor"], sql, sql_params)
        closers.append(close)
        if len(run_raw()) != page_size + 1:
            raise SystemExit("the raw query did not return page + 1 rows")
        contenders[f"raw {name}"] = run_raw

        def core(params: dict[str, Any] = params, ctx: Any = ctx) -> Any:
            return server.call("resources/list", params, ctx)

        contenders[f"core {name}"] = core
        try:
            from mcp_resources.pagination import decode_position, keyset_page

            position = server.codec.open(where["cursor"])["pos"][1]
            after = decode_position(template.model, list(template.ordering), position)
            scoped = template.get_queryset(ctx.request)

            def orm(scoped: Any = scoped, after: Any = after) -> Any:
                return keyset_page(scoped, list(template.ordering), after, page_size)

            if orm()[0][0].pk != user["first_id"] + where["skip"]:
                raise ValueError("the ORM page starts elsewhere")
            contenders[f"orm {name}"] = orm
        except Exception as exc:  # internals moved: the ORM line is only an attribution aid
            print(f"  skipping the ORM-only line for {name}: {type(exc).__name__}: {exc}")

    print(f"item 3: framework cost over raw SQL, {args.rounds} interleaved rounds, {fixture['vendor']}")
    samples = interleaved(contenders, rounds=args.rounds, batch_seconds=args.batch_seconds)
    for close in closers:
        close()

    for page in pages:
        name = page["name"]
        page["raw_s"] = median(samples[f"raw {name}"])
        page["core_s"] = median(samples[f"core {name}"])
        page["core_over_raw"] = page["core_s"] / page["raw_s"]
        if f"orm {name}" in samples:
            page["orm_s"] = median(samples[f"orm {name}"])
            page["orm_over_raw"] = page["orm_s"] / page["raw_s"]
        del page["user"]
        orm = f", ORM alone {fmt_time(page['orm_s'])} ({page['orm_over_raw']:.2f}x)" if "orm_s" in page else ""
        print(
            f"  {page['label']}: raw {fmt_time(page['raw_s'])}, core {fmt_time(page['core_s'])} "
            f"= {page['core_over_raw']:.2f}x raw{orm}"
        )
    worst = max(page["core_over_raw"] for page in pages)
    print(f"core / raw SQL (worst page): {worst:.2f}x (target <= {TARGET:g}x: {verdict(worst <= TARGET)})")
    write_result("raw", {"pages": pages, "core_over_raw": worst, "target": TARGET, "rounds": args.rounds})


if __name__ == "__main__":
    main()
