"""The ablation (rule 4 of the speed-up rules): each remaining speed-up switched off, one at a time, end to end.

For each server of the default deployment (``gunicorn testproject.wsgi``: one ``gevent`` worker with Django's
connection pool, as docs/deployment.md advises; ``uvicorn testproject.asgi:application`` with Django's connection
pool, as Django advises under ASGI), one server with every speed-up on and one per speed-up with only that one
switched off (``MCP_BENCH_ABLATE=<name>``, ``benchmarks/ablation.py``: the switches live in the benchmarks
only). All of them serve the same authenticated ``resources/list`` page as item 5, measured in the same run with
interleaved rounds (``benchmarks/serving.py``); each server logs the switch it applied, and all must serve the
same page.

Each row: the speed-up, its server, requests per second with it off / with every speed-up on, p99 with it off /
with every speed-up on. A speed-up earns its place when switching it off costs at least 10% of the requests per
second (all-on / off >= 1.10) or raises p99 so that all-on cuts it by at least 10% (all-on / off <= 0.90) under
either server; otherwise the verdict is "remove". A speed-up that is on the path of one server only (the ASGI
endpoint's handler) is measured on that server.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.ablation import MARK, SPEED_UPS
from benchmarks.common import load_fixture, mcp_body, mcp_headers, python_path, setup_django, write_result
from benchmarks.serving import (
    Contender,
    asgi_database,
    describe,
    free_port,
    gunicorn_argv,
    gunicorn_env,
    measure,
    paired_ratios,
    summarize,
    uvicorn_argv,
)

GAIN = 0.10  # the bar of rule 4: +10% requests per second, or -10% p99
SERVERS = {
    "gunicorn": lambda port: (gunicorn_argv("testproject.wsgi:application", port), gunicorn_env()),
    "uvicorn": lambda port: (uvicorn_argv("testproject.asgi:application", port), asgi_database()),
}


def verdict_of(rps_ratio: float, p99_ratio: float) -> bool:
    """Whether the speed-up earns its place on one server: ``rps_ratio`` = off / all-on, ``p99_ratio`` likewise."""
    rps_gain = 1 / rps_ratio - 1  # what switching it on adds to the requests per second
    p99_cut = 1 - 1 / p99_ratio  # what switching it on takes off p99
    return rps_gain >= GAIN or p99_cut >= GAIN


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=float, default=1.5)
    parser.add_argument("--duration", type=float, default=6.0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--speed-ups", default=",".join(SPEED_UPS), help="comma-separated: " + ",".join(SPEED_UPS))
    parser.add_argument("--servers", default=",".join(SERVERS), help="comma-separated: " + ",".join(SERVERS))
    args = parser.parse_args()
    speed_ups = [name.strip() for name in args.speed_ups.split(",") if name.strip()]
    kinds = [name.strip() for name in args.servers.split(",") if name.strip()]
    unknown = (set(speed_ups) - set(SPEED_UPS)) | (set(kinds) - set(SERVERS))
    if unknown:
        parser.error(f"unknown: {', '.join(sorted(unknown))}")

    setup_django()
    from benchmarks.pages import http_page

    fixture = load_fixture()
    page = http_page(fixture)
    base_env = {
        **os.environ,
        "PYTHONPATH": python_path(),
        "DJANGO_SETTINGS_MODULE": "benchmarks.settings",
        "MCP_LOG_LEVEL": "WARNING",
    }
    base_env.pop("MCP_BENCH_ABLATE", None)
    base_env.pop("MCP_BENCH_TOKEN_CACHE_TTL", None)  # the default deployment: every token validated
    contenders: list[Contender] = []
    for kind in kinds:
        for switched in ["", *speed_ups]:
            if switched and kind not in SPEED_UPS[switched].servers:
                continue
            port = free_port()
            argv, env = SERVERS[kind](port)
            if switched:
                env = {**env, "MCP_BENCH_ABLATE": switched}
            contenders.append(
                Contender(
                    name=f"{kind}-{switched or 'all-on'}",
                    argv=argv,
                    env={**base_env, **env},
                    port=port,
                    body=mcp_body(page["cursor"]),
                    headers=mcp_headers(page["user"]["token"]),
                    expect=page["expected"],
                    log_mark=f"{MARK} {switched}" if switched else "",
                )
            )

    def same_page(answers: dict[str, dict[str, Any]]) -> None:
        pages = {name: [r["uri"] for r in answer["result"]["resources"]] for name, answer in answers.items()}
        if len({tuple(uris) for uris in pages.values()}) != 1:
            raise SystemExit("the ablation's servers disagree on the page")

    print(
        f"ablation: {len(speed_ups)} speed-ups off one at a time under {', '.join(kinds)}, page {page['label']}, "
        f"{args.concurrency} connections, {args.rounds} rounds x {args.duration:g} s (+{args.warmup:g} s warm-up)",
        flush=True,
    )
    samples = measure(contenders, args, check=same_page)
    summary = {name: summarize(runs) for name, runs in samples.items()}
    for name, s in summary.items():
        print(f"  {describe(name, s)}")
    rows: list[dict[str, Any]] = []
    for name in speed_ups:
        per_server: dict[str, Any] = {}
        for kind in kinds:
            if f"{kind}-{name}" not in summary:
                continue
            on, off = summary[f"{kind}-all-on"], summary[f"{kind}-{name}"]
            rps_ratio = off["rps"] / on["rps"]
            p99_ratio = off["p99_ms"] / on["p99_ms"]
            per_server[kind] = {
                "rps_ratio": rps_ratio,
                "p99_ratio": p99_ratio,
                "rps_all_on": on["rps"],
                "rps_off": off["rps"],
                "p99_all_on_ms": on["p99_ms"],
                "p99_off_ms": off["p99_ms"],
                "paired_rps_ratios": paired_ratios(samples[f"{kind}-{name}"], samples[f"{kind}-all-on"], "rps"),
                "earns": verdict_of(rps_ratio, p99_ratio),
            }
        earns = any(entry["earns"] for entry in per_server.values())
        rows.append(
            {
                "speed_up": name,
                "what": SPEED_UPS[name].what,
                "off": SPEED_UPS[name].off,
                "servers": per_server,
                "verdict": "earns its place" if earns else "remove",
            }
        )
    print(f"\n{'speed-up':<20} {'server':<9} {'rps off/on':>10} {'p99 off/on':>10}  verdict")
    for row in rows:
        for kind, entry in row["servers"].items():
            print(
                f"{row['speed_up']:<20} {kind:<9} {entry['rps_ratio']:>9.2f}x {entry['p99_ratio']:>9.2f}x  "
                f"{'earns its place' if entry['earns'] else 'remove'} (here)"
            )
        print(f"{'':<20} => {row['verdict']}")
    write_result(
        "ablation",
        {
            "page": page["label"],
            "rounds": args.rounds,
            "duration_s": args.duration,
            "concurrency": args.concurrency,
            "gain_bar": GAIN,
            "servers": summary,
            "rows": rows,
        },
    )


if __name__ == "__main__":
    main()
