"""Item 3: the framework's cost over the raw SQL query for the same page.

The SQL and parameters are captured from the core while it serves the page (``connection.execute_wrapper``), then
run directly with the driver on a separate connection (psycopg with server-side binding, prepared after a few
executions; or sqlite3) and fetched: the physical floor. A listing has one path now (the template's
``get_queryset()`` through the ORM, then ``keyset_queryset``, read as ``values_list`` rows when the template's
value plan applies), so the lines between the floor and the core attribute the cost step by step, interleaved:

- ``unprepared``: the same SQL on that connection, never prepared (PostgreSQL only);
- ``django sql``: the same SQL on Django's own connection (its cursor, client-side binding, psycopg's timestamp
  loader, as the listing reads it);
- ``orm``: the ORM building, compiling and running the listing's query from the template's ``get_queryset()``
  (``keyset_queryset`` + ``values_list`` of the value plan's columns);
- ``source page``: the listing source alone (``listing.sources.model_page``: the ORM query above plus the
  statement timeout, the cancellation hook and the resource dicts);
- ``core``: the whole ``MCPServer.call("resources/list")`` (cursor open and seal, binding, authorization of the
  sources, the static phase's query, traversal and byte accounting, on top of the source page).

Two pages: half-way through the smallest and through the middle inventory; the headline is the larger (less
favourable) multiple. Target: core <= 3x raw.
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


def raw_runner(
    vendor: str, sql: str, params: list[Any], prepare: bool = True
) -> tuple[Callable[[], Any], Callable[[], None]]:
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
        if not prepare:
            conn.prepare_threshold = None

        def run_pg() -> list[Any]:
            return conn.execute(sql, params).fetchall()

        return run_pg, conn.close
    import sqlite3

    lite = sqlite3.connect(connection.settings_dict["NAME"])
    lite_sql = sql.replace("%s", "?")

    def run_sqlite() -> list[Any]:
        return lite.execute(lite_sql, params).fetchall()

    return run_sqlite, lite.close


ATTRIBUTION = (
    ("unprepared", "unprepared"),
    ("django sql", "django_sql"),
    ("orm", "orm"),
    ("source page", "source_page"),
)


def attribution(
    server: Any,
    template: Any,
    ctx: Any,
    cursor: str,
    sql: str,
    sql_params: list[Any],
    page_size: int,
    name: str,
) -> dict[str, Callable[[], Any]]:
    """The ``django sql``, ``orm`` and ``source page`` contenders of one page, each checked to read the page."""
    import time

    from django.db import connection

    from mcp_resources.listing.keyset import decode_position, keyset_queryset
    from mcp_resources.listing.plan import list_plan
    from mcp_resources.listing.sources import model_page
    from mcp_resources.queries import native_timestamps

    position = server.codec.open(cursor)["pos"][1]
    ordering = list(template.ordering)
    after = decode_position(template.model, ordering, position)
    plan = list_plan(template)
    if plan is None:
        raise ValueError("the documents template has no value plan")
    request = ctx.request

    def django_sql() -> Any:
        with native_timestamps(connection.alias), connection.cursor() as cursor:
            cursor.execute(sql, sql_params)
            return cursor.fetchall()

    def orm() -> Any:
        query = keyset_queryset(template.get_queryset(request), ordering, after, page_size)
        with native_timestamps(query.db):
            return list(query.values_list(*plan.columns))

    def source_page() -> Any:
        deadline = time.monotonic() + 10
        return model_page(template, request, after=position, limit=page_size, prefix="", deadline=deadline)

    if len(django_sql()) != page_size + 1 or len(orm()) != page_size + 1:
        raise ValueError("the attribution queries return another page")
    entries, has_more = source_page()
    if len(entries) != page_size or not has_more:
        raise ValueError("the source page is another page")
    return {f"django sql {name}": django_sql, f"orm {name}": orm, f"source page {name}": source_page}


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
        if fixture["vendor"] == "postgresql":
            run_unprepared, close = raw_runner(fixture["vendor"], sql, sql_params, prepare=False)
            closers.append(close)
            contenders[f"unprepared {name}"] = run_unprepared
        try:
            contenders.update(attribution(server, template, ctx, where["cursor"], sql, sql_params, page_size, name))
        except Exception as exc:  # internals moved: these lines are only an attribution aid
            print(f"  skipping the attribution lines for {name}: {type(exc).__name__}: {exc}")

    print(f"item 3: framework cost over raw SQL, {args.rounds} interleaved rounds, {fixture['vendor']}")
    samples = interleaved(contenders, rounds=args.rounds, batch_seconds=args.batch_seconds)
    for close in closers:
        close()

    for page in pages:
        name = page["name"]
        page["raw_s"] = median(samples[f"raw {name}"])
        page["core_s"] = median(samples[f"core {name}"])
        page["core_over_raw"] = page["core_s"] / page["raw_s"]
        parts = []
        for label, key in ATTRIBUTION:
            if f"{label} {name}" in samples:
                page[f"{key}_s"] = median(samples[f"{label} {name}"])
                page[f"{key}_over_raw"] = page[f"{key}_s"] / page["raw_s"]
                parts.append(f"{label} {fmt_time(page[f'{key}_s'])} ({page[f'{key}_over_raw']:.2f}x)")
        del page["user"]
        print(
            f"  {page['label']}: raw {fmt_time(page['raw_s'])}, core {fmt_time(page['core_s'])} "
            f"= {page['core_over_raw']:.2f}x raw; " + ", ".join(parts)
        )
    worst = max(page["core_over_raw"] for page in pages)
    print(f"core / raw SQL (worst page): {worst:.2f}x (target <= {TARGET:g}x: {verdict(worst <= TARGET)})")
    write_result("raw", {"pages": pages, "core_over_raw": worst, "target": TARGET, "rounds": args.rounds})


if __name__ == "__main__":
    main()
