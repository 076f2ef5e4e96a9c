"""Item 1: ``resources/list`` page latency through the server core at every size and depth, with OFFSET
pagination of the same queryset as the contrast.

The keyset page is ``MCPServer.call("resources/list", {"cursor": ...}, ctx)``: the whole core (binding, cursor
open and seal, authorization, traversal, the query and the resource dicts). The OFFSET page is the template's
scoped queryset ordered the same way, sliced ``[skip:skip + page + 1]``, turned into the same resource dicts.
A third, clearly labelled what-if line reruns the core with the keyset condition given a leading
``first_ordering_field >= value`` conjunct (see the report: the expanded OR is not an index range on PostgreSQL).
Targets (one run): keyset max/min over all sizes and depths <= 1.3; OFFSET clearly slower (>= 10x) at the
largest size and 99% depth.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import (
    DEPTHS,
    fmt_time,
    interleaved,
    load_fixture,
    median,
    setup_django,
    verdict,
    write_result,
)

LATENCY_TARGET = 1.3
OFFSET_TARGET = 10.0


@contextlib.contextmanager
def sargable_keyset() -> Iterator[None]:
    """What-if: add ``names[0] >= values[0]`` to the keyset condition so the index bounds the scan."""
    from django.db.models import Q

    from mcp_resources.listing import keyset as pagination

    original = pagination.keyset_filter

    def patched(names: Any, values: Any) -> Q:
        return Q(**{f"{names[0]}__gte": values[0]}) & original(names, values)

    pagination.keyset_filter = patched
    try:
        yield
    finally:
        pagination.keyset_filter = original


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--batch-seconds", type=float, default=0.05)
    parser.add_argument("--no-what-if", action="store_true", help="skip the what-if (sargable keyset) line")
    args = parser.parse_args()

    setup_django()
    from benchmarks.pages import check_page, context_for, core_objects, cursor_at

    fixture = load_fixture()
    page_size = fixture["page_size"]
    server, template = core_objects()
    ordering = list(template.ordering)

    contenders: dict[str, Callable[[], Any]] = {}
    points: list[dict[str, Any]] = []
    for user in fixture["users"]:
        ctx = context_for(user)
        scoped = template.get_queryset(ctx.request).order_by(*ordering)
        for depth in DEPTHS:
            where = cursor_at(server, template, ctx, user, depth, page_size)
            params = {} if where["cursor"] is None else {"cursor": where["cursor"]}
            skip = where["skip"]
            key = f"{user['size']}@{depth:g}"

            def keyset(params: dict[str, Any] = params, ctx: Any = ctx) -> dict[str, Any]:
                return server.call("resources/list", params, ctx)

            def offset(skip: int = skip, scoped: Any = scoped, ctx: Any = ctx) -> list[dict[str, Any]]:
                rows = list(scoped[skip : skip + page_size + 1])
                return [template.get_resource(ctx.request, obj) for obj in rows[:page_size]]

            def what_if(params: dict[str, Any] = params, ctx: Any = ctx) -> dict[str, Any]:
                with sargable_keyset():
                    return server.call("resources/list", params, ctx)

            check_page(keyset(), where["first_uri"], page_size)
            first_offset = offset()
            if where["first_uri"] and first_offset[0]["uri"] != where["first_uri"]:
                raise SystemExit(f"OFFSET page starts at {first_offset[0]['uri']}, expected {where['first_uri']}")
            contenders[f"keyset {key}"] = keyset
            contenders[f"offset {key}"] = offset
            if not args.no_what_if:
                check_page(what_if(), where["first_uri"], page_size)
                contenders[f"what-if {key}"] = what_if
            points.append({"size": user["size"], "depth": depth, "skip": skip, "cursor": where["how"], "key": key})

    print(
        f"item 1: page latency, {len(points)} points x {len(contenders) // len(points)} variants, "
        f"{args.rounds} interleaved rounds, page size {page_size}, {fixture['vendor']}"
    )
    samples = interleaved(contenders, rounds=args.rounds, batch_seconds=args.batch_seconds)

    for point in points:
        key = point["key"]
        point["keyset_s"] = median(samples[f"keyset {key}"])
        point["offset_s"] = median(samples[f"offset {key}"])
        point["offset_over_keyset"] = point["offset_s"] / point["keyset_s"]
        if not args.no_what_if:
            point["what_if_s"] = median(samples[f"what-if {key}"])
        del point["key"]

    keyset_times = [p["keyset_s"] for p in points]
    spread = max(keyset_times) / min(keyset_times)
    largest = max(p["size"] for p in points)
    deepest = max(p["depth"] for p in points)
    worst = next(p for p in points if p["size"] == largest and p["depth"] == deepest)
    offset_ratio = worst["offset_over_keyset"]

    print(
        f"{'rows':>9} {'depth':>6} {'skip':>9} {'keyset core':>13} {'OFFSET':>13} {'OFFSET/keyset':>14}"
        + ("" if args.no_what_if else f" {'what-if core':>13}")
    )
    for p in points:
        line = (
            f"{p['size']:>9,} {p['depth']:>6.0%} {p['skip']:>9,} {fmt_time(p['keyset_s']):>13} "
            f"{fmt_time(p['offset_s']):>13} {p['offset_over_keyset']:>13.1f}x"
        )
        if not args.no_what_if:
            line += f" {fmt_time(p['what_if_s']):>13}"
        print(line)
    print(
        f"keyset latency max/min over all sizes and depths: {spread:.2f} (target <= {LATENCY_TARGET}: "
        f"{verdict(spread <= LATENCY_TARGET)})"
    )
    print(
        f"OFFSET / keyset at {largest:,} x {deepest:.0%}: {offset_ratio:.1f}x (target >= {OFFSET_TARGET:g}x: "
        f"{verdict(offset_ratio >= OFFSET_TARGET)})"
    )
    result: dict[str, Any] = {
        "page_size": page_size,
        "vendor": fixture["vendor"],
        "rounds": args.rounds,
        "points": points,
        "keyset_max_over_min": spread,
        "keyset_max_over_min_target": LATENCY_TARGET,
        "offset_over_keyset_deepest": offset_ratio,
        "offset_over_keyset_target": OFFSET_TARGET,
    }
    if not args.no_what_if:
        what_if = [p["what_if_s"] for p in points]
        result["what_if_max_over_min"] = max(what_if) / min(what_if)
        result["what_if_offset_over_keyset_deepest"] = worst["offset_s"] / worst["what_if_s"]
        print(
            f"what-if (leading >= conjunct): max/min {result['what_if_max_over_min']:.2f}, "
            f"OFFSET / keyset at the deepest point {result['what_if_offset_over_keyset_deepest']:.1f}x "
            "(not the shipped code: for the report only)"
        )
    write_result("latency", result)


if __name__ == "__main__":
    main()
