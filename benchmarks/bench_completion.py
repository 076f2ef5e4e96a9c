"""Item 8: a ``completion/complete`` request against a ``resources/list`` page of the same size, through the core.

The page is the demo's ``documents`` template at 50% depth of every inventory (100 resources, a sealed cursor),
``MCPServer.call("resources/list", {"cursor": ...}, ctx)``. The completion is ``MCPServer.call("completion/complete")``
for the ``{title}`` variable of a template over the same documents (``learn://documents/{title}/{id}``, the same
declared scope: the caller's live documents), with the prefix ``"Document 5"``: more than 100 of the caller's titles
start with it at every size, so the answer holds 100 values and ``hasMore`` (one query, of 101 values). Both run as
the same token-authenticated caller, interleaved. A third line runs the completion through the queryset on every
request (the compiled query switched off, as the ablation's ``compiled-listing`` row does for listings).

The completion reads an index range of ``(owner_id, title COLLATE "C")`` (PostgreSQL; ``(owner_id, title)`` on
SQLite), which this item creates before its rounds and drops after them; its plan is recorded in the result. The
page reads the ``(owner, created, id)`` keyset index. Target: completion / page <= 1.3 at every size.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import fmt_time, interleaved, load_fixture, median, setup_django, verdict, write_result

TARGET = 1.3
PREFIX = "Document 5"
INDEX = "bench_document_owner_title_c"


@contextlib.contextmanager
def queryset_completion() -> Iterator[None]:
    """The completion through the queryset on every request: no template counts as declared."""
    from mcp_resources.listing import completion

    original = completion.declared_completion
    completion.declared_completion = lambda template: None  # type: ignore[assignment]
    try:
        yield
    finally:
        completion.declared_completion = original


def create_index() -> None:
    from django.db import connection

    expression = '(title COLLATE "C")' if connection.vendor == "postgresql" else "title"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE INDEX IF NOT EXISTS {INDEX} ON library_document (owner_id, {expression})")
        cursor.execute("ANALYZE library_document")


def drop_index() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX IF EXISTS {INDEX}")


def completion_server() -> Any:
    """A server over one template: the documents by title and id, scoped as the demo's documents template."""
    from mcp_resources import ModelResourceTemplate, ResourceRegistry
    from mcp_resources.server import MCPServer
    from testproject.library.models import Document

    class DocumentTitles(ModelResourceTemplate):
        model = Document
        name = "document-titles"
        uri_template = "learn://documents/{title}/{id}"
        required_scopes = ("documents:read",)
        queryset = Document.objects.filter(deleted_at__isnull=True)
        owner_field = "owner"
        name_field = "title"

    registry = ResourceRegistry("bench-completion")
    registry.register(DocumentTitles)
    return MCPServer(registry)


def completion_plan(server: Any, ctx: Any, params: dict[str, Any]) -> str:
    """EXPLAIN of the values query the completion sends (PostgreSQL), for the report."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    if connection.vendor != "postgresql":
        return ""
    with CaptureQueriesContext(connection) as queries:
        server.call("completion/complete", params, ctx)
    sql = next(q["sql"] for q in queries.captured_queries if "LIMIT 101" in q["sql"])
    sql = sql.split("; ", 1)[1] if sql.startswith("SET LOCAL") else sql
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql)
        return "\n".join(row[0] for row in cursor.fetchall())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--batch-seconds", type=float, default=0.1)
    args = parser.parse_args()

    setup_django()
    from benchmarks.pages import check_page, context_for, core_objects, cursor_at

    fixture = load_fixture()
    page_size = fixture["page_size"]
    create_index()
    try:
        page_server, template = core_objects()
        server = completion_server()
        params = {
            "ref": {"type": "ref/resource", "uri": "learn://documents/{title}/{id}"},
            "argument": {"name": "title", "value": PREFIX},
        }
        contenders: dict[str, Any] = {}
        points: list[dict[str, Any]] = []
        plans: dict[str, str] = {}
        for user in fixture["users"]:
            ctx = context_for(user)
            where = cursor_at(page_server, template, ctx, user, 0.5, page_size)
            page_params = {"cursor": where["cursor"]}

            def page(page_params: dict[str, Any] = page_params, ctx: Any = ctx) -> dict[str, Any]:
                return page_server.call("resources/list", page_params, ctx)

            def complete(ctx: Any = ctx) -> dict[str, Any]:
                return server.call("completion/complete", params, ctx)

            def complete_orm(ctx: Any = ctx) -> dict[str, Any]:
                with queryset_completion():
                    return server.call("completion/complete", params, ctx)

            check_page(page(), where["first_uri"], page_size)
            answer = complete()["completion"]
            if len(answer["values"]) != 100 or not answer["hasMore"]:
                raise SystemExit(f"the completion holds {len(answer['values'])} values, expected 100 and more")
            if not all(value.startswith(PREFIX) for value in answer["values"]):
                raise SystemExit("a completion value does not start with the prefix")
            key = f"{user['size']:,}"
            contenders[f"page {key}"] = page
            contenders[f"complete {key}"] = complete
            contenders[f"orm {key}"] = complete_orm
            plans[key] = completion_plan(server, ctx, params)
            if complete_orm()["completion"] != answer:
                raise SystemExit("the compiled and the queryset completion differ")
            points.append({"size": user["size"], "total": answer.get("total"), "key": key})

        print(
            f"item 8: completion vs page, {len(points)} inventories, {args.rounds} interleaved rounds, "
            f"page size {page_size}, {fixture['vendor']}"
        )
        samples = interleaved(contenders, rounds=args.rounds, batch_seconds=args.batch_seconds)
    finally:
        drop_index()

    print(
        f"{'rows':>11} {'page @ 50%':>13} {'completion':>13} {'completion/page':>16} {'queryset path':>14} "
        f"{'queryset/page':>14}"
    )
    for point in points:
        key = point.pop("key")
        point["page_s"] = median(samples[f"page {key}"])
        point["complete_s"] = median(samples[f"complete {key}"])
        point["orm_s"] = median(samples[f"orm {key}"])
        point["complete_over_page"] = point["complete_s"] / point["page_s"]
        point["orm_over_page"] = point["orm_s"] / point["page_s"]
        print(
            f"{point['size']:>11,} {fmt_time(point['page_s']):>13} {fmt_time(point['complete_s']):>13} "
            f"{point['complete_over_page']:>15.2f}x {fmt_time(point['orm_s']):>14} {point['orm_over_page']:>13.2f}x"
        )
    worst = max(p["complete_over_page"] for p in points)
    print(f"completion / page, worst size: {worst:.2f} (target <= {TARGET}: {verdict(worst <= TARGET)})")
    for key, plan in plans.items():
        if plan:
            print(f"completion plan at {key} rows:\n{plan}")
    write_result(
        "completion",
        {
            "page_size": page_size,
            "vendor": fixture["vendor"],
            "rounds": args.rounds,
            "prefix": PREFIX,
            "points": points,
            "complete_over_page_worst": worst,
            "target": TARGET,
            "plans": plans,
        },
    )


if __name__ == "__main__":
    main()
