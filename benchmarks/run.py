"""Run every benchmark once and report the ratios (``make benchmarks``).

Creates and seeds the benchmark database (PostgreSQL ``mcp_bench`` on 127.0.0.1:5432; ``--db sqlite`` or an
unreachable PostgreSQL uses a SQLite file), runs each item's script in its own process (each prints its medians
and ratios), merges their results into ``benchmarks/results/latest.json``, draws
``benchmarks/results/benchmarks.png`` (when matplotlib is installed) and rewrites the results section of
``docs/performance.md`` (between ``<!-- results:start -->`` and ``<!-- results:end -->``, added at the end of the
file when missing); then drops the database (``--keep-db`` keeps it). ``--quick`` uses 1e3/1e4/1e5 documents and
fewer, shorter rounds (a few minutes in all); ``--only`` selects items (with ``--no-doc`` to keep the page's
results section, which holds the items of one run). Items 6 (listeners) and delivery need Redis on
127.0.0.1:6379 and no benchmark database. Only ratios measured within one run are results: absolute times drift
by about 30% between runs here.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import BENCH_DIR, RESULTS_DIR, ROOT, python_path

PYTHON = sys.executable
DOC = ROOT / "docs" / "performance.md"
PLOT = RESULTS_DIR / "benchmarks.png"
START, END = "<!-- results:start -->", "<!-- results:end -->"

HTTP_FULL = ["--rounds", "7", "--duration", "6", "--warmup", "1.5"]
HTTP_QUICK = ["--rounds", "3", "--duration", "2.5", "--warmup", "0.5"]
ITEMS: dict[str, dict[str, Any]] = {
    "latency": {
        "script": "bench_latency.py",
        # The what-if line (a doubled leading conjunct) served the first rounds' findings: off in the report.
        # 15 rounds of 0.1 s batches: the max/min of nine medians is the ratio most exposed to this machine's noise.
        "full": ["--rounds", "15", "--batch-seconds", "0.1", "--no-what-if"],
        "quick": ["--rounds", "5", "--batch-seconds", "0.03", "--no-what-if"],
        "timeout": 1800,
    },
    "drf": {
        "script": "bench_drf.py",
        "full": ["--rounds", "9"],
        "quick": ["--rounds", "5", "--batch-seconds", "0.1"],
        "timeout": 900,
    },
    "raw": {
        "script": "bench_raw.py",
        "full": ["--rounds", "9"],
        "quick": ["--rounds", "5", "--batch-seconds", "0.05"],
        "timeout": 900,
    },
    "codec": {"script": "bench_codec.py", "full": ["--rounds", "15"], "quick": ["--rounds", "9"], "timeout": 600},
    "http": {"script": "bench_http.py", "full": HTTP_FULL, "quick": HTTP_QUICK, "timeout": 1800},
    "ablation": {"script": "bench_ablation.py", "full": HTTP_FULL, "quick": HTTP_QUICK, "timeout": 2400},
    "members": {
        "script": "bench_members.py",
        "full": ["--size", "10000", "--rounds", "9"],
        "quick": ["--size", "2000", "--rounds", "5", "--batch-seconds", "0.03"],
        "timeout": 1800,
    },
    "completion": {
        "script": "bench_completion.py",
        "full": ["--rounds", "9"],
        "quick": ["--rounds", "5", "--batch-seconds", "0.05"],
        "timeout": 900,
    },
    "repository": {
        "script": "bench_repository.py",
        "full": ["--size", "10000", "--rounds", "9"],
        "quick": ["--size", "2000", "--rounds", "5", "--batch-seconds", "0.03"],
        "timeout": 900,
    },
    "telemetry": {
        "script": "bench_telemetry.py",
        "full": ["--rounds", "3000"],
        "quick": ["--rounds", "1000"],
        "timeout": 900,
    },
    "listeners": {
        "script": "bench_listeners.py",
        "full": ["--full"],
        "quick": [],
        "timeout": 1800,
        "fixture": False,
    },
    "delivery": {
        "script": "bench_delivery.py",
        # 15 s a point: the sweeps of both sizes fit the time-out (the 2-minute targets run on their own,
        # docs/performance.md)
        "full": ["--duration", "15"],
        "quick": ["--quick"],
        "timeout": 3600,
        "fixture": False,
    },
}


def postgres_reachable() -> bool:
    try:
        import psycopg

        psycopg.connect("host=127.0.0.1 port=5432 user=postgres dbname=postgres connect_timeout=3").close()
    except Exception as exc:
        print(f"PostgreSQL is not reachable on 127.0.0.1:5432 ({type(exc).__name__}: {exc})")
        return False
    return True


def git_state() -> str:
    """The commit measured, and whether the package's working tree differed from it."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "mcp_resources"], cwd=ROOT, capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{head} (with uncommitted changes in mcp_resources/)" if dirty else head


def run_step(name: str, argv: list[str], env: dict[str, str], timeout: float) -> bool:
    """Run one step; past ``timeout`` it gets SIGTERM (the HTTP items then stop their servers), then SIGKILL."""
    print(f"\n=== {name}: {' '.join(argv[1:])}", flush=True)
    t0 = time.monotonic()
    process = subprocess.Popen(argv, cwd=ROOT, env=env)
    try:
        returncode = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        print(f"!!! {name} timed out after {timeout:.0f} s")
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        return False
    except BaseException:
        process.terminate()
        process.wait(timeout=60)
        raise
    if returncode != 0:
        print(f"!!! {name} failed (exit {returncode})")
        return False
    print(f"--- {name} took {time.monotonic() - t0:.0f} s", flush=True)
    return True


def summarize(results: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per target: item, what is compared, the measured ratio, the target and whether it is met."""
    rows: list[dict[str, Any]] = []

    def add(item: str, measure: str, value: float | None, target: float, at_most: bool, unit: str = "x") -> None:
        ok = None if value is None else (value <= target if at_most else value >= target)
        rows.append(
            {
                "item": item,
                "measure": measure,
                "value": value,
                "target": target,
                "at_most": at_most,
                "ok": ok,
                "unit": unit,
            }
        )

    latency, drf, raw, codec, http = (results.get(k) for k in ("latency", "drf", "raw", "codec", "http"))
    if latency:
        add(
            "1",
            "keyset page latency max/min, all sizes x depths (core)",
            latency["keyset_max_over_min"],
            latency["keyset_max_over_min_target"],
            True,
        )
        add(
            "1",
            "OFFSET / keyset latency, largest inventory at 99%",
            latency["offset_over_keyset_deepest"],
            latency["offset_over_keyset_target"],
            False,
        )
    if drf:
        add("2", "listing throughput / DRF ListAPIView + CursorPagination", drf["ours_over_drf"], drf["target"], False)
    if raw:
        add("3", "core page time / raw SQL for the same page", raw["core_over_raw"], raw["target"], True)
    if codec:
        add("4", "cursor codec seal+open / raw AES-GCM encrypt+decrypt", codec["codec_over_raw"], codec["target"], True)
    if http:
        for label, server in (
            ("gunicorn, gevent worker (Django's WSGI handler, middleware on)", "ours-gunicorn"),
            ("uvicorn (Channels, MCPEndpoint, Django's handler in one thread hop, middleware on)", "ours-uvicorn"),
            ("gunicorn without orjson (what keeps it a dependency)", "ours-gunicorn-nofast"),
            ("uvicorn without orjson (what keeps it a dependency)", "ours-uvicorn-nofast"),
        ):
            if server in http["ratios"]:
                add(
                    "5",
                    f"HTTP req/s under {label} / MCP SDK low-level, both validating the token",
                    http["ratios"][server],
                    http["targets"].get(server, http["targets"][server.removesuffix("-nofast")]),
                    False,
                )
    members = results.get("members")
    if members:
        for shape, label in (("few", "a few of 500 projects"), ("half", "half of the projects")):
            add(
                "7",
                f"page through a membership path / through a direct owner, caller in {label}, worst depth",
                members["worst"][shape],
                members["targets"][shape],
                True,
            )
    completion = results.get("completion")
    if completion:
        add(
            "8",
            "completion/complete (100 values) / resources/list page of 100 at 50%, worst inventory (core)",
            completion["complete_over_page_worst"],
            completion["target"],
            True,
        )
    repository = results.get("repository")
    if repository:
        add(
            "9",
            "repository page (an external pager's own token in our cursor) / model page of the same size, worst depth",
            repository["worst"],
            repository["target"],
            True,
        )
    telemetry = results.get("telemetry")
    if telemetry:
        for mode, label in (("noop", "OpenTelemetry API, no SDK (no-op)"), ("sdk", "the SDK, in-memory exporter")):
            add(
                "10",
                f"request p50 with telemetry ({label}) / without telemetry (in process)",
                telemetry["ratios"][mode],
                telemetry["targets"][mode],
                True,
            )
    listeners = results.get("listeners")
    if listeners:
        targets = listeners["targets"]
        for p in listeners["points"]:
            n = f"{p['listeners']:,}"
            add(
                "6",
                f"server threads with {n} listeners / before them",
                p["threads_ratio"],
                targets["threads_ratio"],
                True,
            )
            add(
                "6",
                f"server RSS per listener at {n} listeners",
                p["kb_per_listener"],
                targets["kb_per_listener"],
                True,
                " KB",
            )
            add(
                "6",
                f"publish-to-receive p99 at {n} listeners / bare Redis reader",
                p["p99_ratio"],
                targets["p99_ratio"],
                True,
            )
    delivery = results.get("delivery")
    if delivery:
        targets = delivery["targets"]
        for p in delivery["points"]:
            documents = delivery.get("config", {}).get("documents", 20)
            per_s = "update/s" if p["rate"] == 1 else "updates/s"
            at = f"{p['listeners']:,} listeners on {documents} documents, {p['rate']:g} {per_s}"
            add(
                "delivery",
                f"notifications delivered at {at} / bare Redis reader",
                p["delivered_ratio"],
                targets["delivered_ratio"],
                False,
            )
            add(
                "delivery",
                f"publish-to-receive p99 at {at} / bare Redis reader",
                p["p99_ratio"],
                targets["p99_ratio"],
                True,
            )
    return rows


def fmt_ratio(value: float | None, unit: str = "x") -> str:
    if value is None:
        return "n/a"
    if value == float("inf"):
        return "infinite (deliveries lost)"
    if unit != "x":
        return f"{value:.1f}{unit}"
    return f"{value:.2f}x" if value < 100 else f"{value:.0f}x"


def fmt_target(row: dict[str, Any]) -> str:
    return f"{'<=' if row['at_most'] else '>='} {row['target']:g}{row.get('unit', 'x')}"


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header), *("| " + " | ".join(r) + " |" for r in rows)]


def http_section(http: dict[str, Any]) -> list[str]:
    """Item 5: every server side by side, the default deployments first, the opt-ins labelled."""
    how = {
        "sdk": "MCP SDK low-level `Server`, `json_response`, stateless, uvicorn; its `TokenVerifier` reads the token's "
        "row (checksum, application, user, expiry) on every request",
        "ours-gunicorn": "default: `gunicorn testproject.wsgi -k gevent`, 1 worker, Django's handler, middleware on, "
        "Django's connection pool",
        "ours-gunicorn-gthread": "gunicorn's `gthread` worker, 1 worker x 2 threads, persistent connections "
        "(reported, not the verdict)",
        "ours-uvicorn": "default: `uvicorn testproject.asgi:application`, Channels' routers, `MCPEndpoint`, "
        "Django's handler in one worker thread, middleware on, Django's connection pool",
    }
    how.update({name: f"opt-in: {label}" for name, label in http.get("opt_ins", {}).items()})
    rows = []
    for name, s in http["servers"].items():
        ratio = http["ratios"].get(name)
        rows.append(
            [
                f"`{name}`",
                how.get(name, ""),
                f"{s['rps']:.0f}",
                "1.00x" if name == "sdk" else fmt_ratio(ratio),
                f"{s['p50_ms']:.1f}",
                f"{s['p99_ms']:.1f}",
                f"{s['server_cpu_ms_per_request']:.2f}",
                "n/a" if s.get("database_cpu_ms_per_request") is None else f"{s['database_cpu_ms_per_request']:.2f}",
                str(s["errors"]),
            ]
        )
    return [
        "",
        f"Item 5, the fair HTTP comparison: one `resources/list` page ({http['page']}), the same bearer token "
        f"validated against django-oauth-toolkit's tables on every request by every server, {http['concurrency']} "
        f"connections, medians of {http['rounds']} interleaved rounds of {http['duration_s']:g} s:",
        "",
        *table(
            [
                "server",
                "how it is served",
                "req/s",
                "vs SDK",
                "p50 ms",
                "p99 ms",
                "server CPU ms/req",
                "PostgreSQL CPU ms/req",
                "errors",
            ],
            rows,
        ),
    ]


def ablation_section(ablation: dict[str, Any]) -> list[str]:
    kinds = list(dict.fromkeys(kind for row in ablation["rows"] for kind in row["servers"]))
    header = ["speed-up", "what it does", "switched off: what runs instead"]
    for kind in kinds:
        header += [f"{kind}: req/s off/on", f"{kind}: p99 off/on"]
    header.append("verdict")
    rows = []
    for row in ablation["rows"]:
        cells = [f"`{row['speed_up']}`", row["what"], row["off"]]
        for kind in kinds:
            entry = row["servers"].get(kind)
            cells += [fmt_ratio(entry["rps_ratio"]), fmt_ratio(entry["p99_ratio"])] if entry else ["n/a", "n/a"]
        cells.append(row["verdict"])
        rows.append(cells)
    all_on = ", ".join(
        f"{kind} {ablation['servers'][f'{kind}-all-on']['rps']:.0f} req/s "
        f"(rounds {', '.join(f'{r:.0f}' for r in ablation['servers'][f'{kind}-all-on']['rounds_rps'])})"
        for kind in kinds
    )
    return [
        "",
        f"Ablation (rule 4): each remaining speed-up switched off alone, end to end, the same page as item 5, "
        f"{ablation['concurrency']} connections, medians of {ablation['rounds']} interleaved rounds of "
        f"{ablation['duration_s']:g} s. A speed-up earns its place when switching it off costs at least "
        f"{ablation['gain_bar']:.0%} of the requests per second (off/on <= {1 / (1 + ablation['gain_bar']):.2f}) or "
        f"all-on cuts p99 by at least {ablation['gain_bar']:.0%} (p99 off/on >= {1 / (1 - ablation['gain_bar']):.2f}) "
        f"under either server. Every speed-up on: {all_on}.",
        "",
        *table(header, rows),
    ]


def markdown_results(latest: dict[str, Any]) -> str:
    meta = latest["meta"]
    results = latest["results"]
    fixture = (
        "no benchmark database"
        if meta["vendor"] == "no database"
        else f"{meta['vendor']}, page size {meta['page_size']}, "
        f"inventories of {', '.join(f'{s:,}' for s in meta['sizes'])} documents"
    )
    lines = [
        f"Latest run: {meta['finished']} UTC, {meta['mode']} mode, "
        f"{fixture}, Python {meta['python']}, {meta['cpus']} CPUs, "
        f"load average at start {meta['loadavg_start']}, at end {meta['loadavg_end']}"
        + (f", token cache TTL {meta['token_cache_ttl']:g} s." if meta.get("token_cache_ttl") else ".")
        + f" Items run: {', '.join(results) or 'none'}.",
        "",
        *table(
            ["item", "ratio", "measured", "target", "verdict"],
            [
                [
                    row["item"],
                    row["measure"],
                    fmt_ratio(row["value"], row.get("unit", "x")),
                    fmt_target(row),
                    "n/a" if row["ok"] is None else ("met" if row["ok"] else "**missed**"),
                ]
                for row in latest["summary"]
            ],
        ),
    ]
    latency = results.get("latency")
    if latency:
        lines += ["", "Item 1, medians (ms) through the core, and OFFSET on the same queryset:", ""]
        lines += table(
            ["documents", "depth", "rows skipped", "keyset (core)", "OFFSET", "OFFSET/keyset"],
            [
                [
                    f"{p['size']:,}",
                    f"{p['depth']:.0%}",
                    f"{p['skip']:,}",
                    f"{p['keyset_s'] * 1e3:.2f}",
                    f"{p['offset_s'] * 1e3:.2f}",
                    f"{p['offset_over_keyset']:.1f}x",
                ]
                for p in latency["points"]
            ],
        )
    members = results.get("members")
    if members:
        lines += [
            "",
            f"Item 7, medians (ms) through the core, {members['size']:,} records visible on each side:",
            "",
        ]
        lines += table(
            ["shape", "path", "depth", "membership page", "direct page", "ratio"],
            [
                [
                    p["shape"],
                    {"members": "`project__members`", "teams": "`project__team__memberships__user`"}[p["path"]],
                    f"{p['depth']:.0%}",
                    f"{p['page_s'] * 1e3:.2f}",
                    f"{p['direct_s'] * 1e3:.2f}",
                    f"{p['ratio']:.2f}x",
                ]
                for p in members["points"]
            ],
        )
    repository = results.get("repository")
    if repository:
        lines += [
            "",
            f"Item 9, medians (ms) through the core, {repository['size']:,} records, the same rows on both sides:",
            "",
        ]
        lines += table(
            ["depth", "repository page", "model page", "ratio"],
            [
                [
                    f"{p['depth']:.0%}",
                    f"{p['repository_s'] * 1e3:.2f}",
                    f"{p['model_s'] * 1e3:.2f}",
                    f"{p['ratio']:.2f}x",
                ]
                for p in repository["points"]
            ],
        )
    if results.get("http"):
        lines += http_section(results["http"])
    if results.get("ablation"):
        lines += ablation_section(results["ablation"])
    other = []
    drf, raw, codec, listeners = (results.get(k) for k in ("drf", "raw", "codec", "listeners"))
    if drf:
        for p in drf["pages"]:
            cached = (
                f"; with `TOKEN_CACHE_TTL_SECONDS` 30: {p['ours_tc_pages_per_s']:.0f} pages/s "
                f"({p['ours_tc_over_drf']:.2f}x)"
                if "ours_tc_over_drf" in p
                else ""
            )
            other.append(
                f"- Item 2, {p['label']}: ours {p['ours_pages_per_s']:.0f} pages/s, DRF "
                f"{p['drf_pages_per_s']:.0f} pages/s ({p['ours_over_drf']:.2f}x){cached}."
            )
    if raw:
        for p in raw["pages"]:
            parts = "".join(
                f", {label} {p[key + '_s'] * 1e3:.3f} ms ({p[key + '_over_raw']:.2f}x)"
                for label, key in (
                    ("the same SQL unprepared", "unprepared"),
                    ("on Django's connection", "django_sql"),
                    ("the ORM query from get_queryset()", "orm"),
                    ("the listing source's page", "source_page"),
                )
                if key + "_s" in p
            )
            other.append(
                f"- Item 3, {p['label']}: raw SQL (prepared) {p['raw_s'] * 1e3:.3f} ms{parts}, the core "
                f"{p['core_s'] * 1e3:.2f} ms ({p['core_over_raw']:.2f}x)."
            )
    if codec:
        other.append(
            f"- Item 4: raw AES-GCM {codec['raw_s'] * 1e6:.2f} µs, codec {codec['codec_s'] * 1e6:.2f} µs, "
            f"make_cursor+read_cursor {codec['cursor_helpers_s'] * 1e6:.2f} µs "
            f"({codec['payload_bytes']} payload bytes, {codec['token_chars']}-character token)."
        )
    telemetry = results.get("telemetry")
    if telemetry:
        other.append(
            "- Item 10: request p50 "
            + ", ".join(f"{mode} {value:.3f} ms" for mode, value in telemetry["p50_ms"].items())
            + f" ({telemetry['rounds']} rounds x {telemetry['batch']} requests a mode)."
        )
    completion = results.get("completion")
    if completion:
        for p in completion["points"]:
            other.append(
                f"- Item 8, {p['size']:,} documents: page {p['page_s'] * 1e3:.3f} ms, completion of "
                f"{completion['prefix']!r} {p['complete_s'] * 1e3:.3f} ms ({p['complete_over_page']:.2f}x), "
                f"total {p['total'] if p['total'] is not None else 'left out (more than 100)'}."
            )
    if listeners:
        for r in listeners["servers"]:
            other.append(
                f"- Item 6, {r['server']}, {r['listeners']:,} listeners, medians of {r['rounds']} rounds: "
                f"connected in {r['connect_s']:.1f} s, threads {r['threads_before']} before and at most "
                f"{r['threads_max']} with them, RSS {r['rss_before_kb'] / 1024:.0f} -> {r['rss_after_kb'] / 1024:.0f} "
                f"MiB ({r['kb_per_listener']:.1f} KB each), {r['delivered']:,}/{r['expected']:,} delivered, "
                f"p50 {r['p50_ms']:.0f} ms, p99 {r['p99_ms']:.0f} ms, server CPU "
                f"{r['server_cpu_us_per_delivery']:.0f} µs/delivery, {r['ended_by_server']} streams ended early."
            )
    delivery = results.get("delivery")
    if delivery:
        for r in delivery["servers"]:
            below = (
                f"first below at {r['first_rate_below']:g}/s ({r['share_at_first_below']:.1%} delivered)"
                if r["first_rate_below"] is not None
                else f"none below up to {max(r['rates']):g}/s"
            )
            highest = "none" if r["highest_full_rate"] is None else f"{r['highest_full_rate']:g}/s"
            other.append(
                f"- Delivery, {r['server']}, {r['listeners']:,} listeners: highest update rate with 100% delivered "
                f"{highest}, {below}."
            )
    if other:
        lines += ["", "Medians behind the other ratios (absolute values are only comparable within this run):", ""]
        lines += other
    if meta.get("failed"):
        lines += ["", f"Steps that failed in this run: {', '.join(meta['failed'])}."]
    return "\n".join(lines)


def update_doc(latest: dict[str, Any]) -> None:
    """Rewrite the results section of docs/performance.md (the markers are added at the end when missing)."""
    text = DOC.read_text() if DOC.exists() else "# Performance\n"
    if START not in text or END not in text:
        text = f"{text.rstrip()}\n\n{START}\n{END}\n"
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    DOC.write_text(f"{head}{START}\n{markdown_results(latest)}\n{END}{tail}")
    print(f"wrote the results section of {DOC.relative_to(ROOT)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--db", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--quick", action="store_true", help="1e3/1e4/1e5 documents and fewer rounds")
    parser.add_argument("--page-size", type=int, default=100)
    parser.add_argument("--only", default="", help="comma-separated items: " + ",".join(ITEMS))
    parser.add_argument("--keep-db", action="store_true", help="do not drop the benchmark database at the end")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also write cProfile hot spots of the page (profile_page.py) and, when py-spy is installed, py-spy "
        "samples of the HTTP servers (profile_servers.py) to results/",
    )
    parser.add_argument("--no-doc", action="store_true", help="do not rewrite docs/performance.md's results section")
    parser.add_argument(
        "--token-cache-ttl",
        type=float,
        default=0,
        help="set MCP_RESOURCES['TOKEN_CACHE_TTL_SECONDS'] for every item; default 0: the demo's setting, off",
    )
    args = parser.parse_args()

    db = args.db
    if db == "postgres" and not postgres_reachable():
        print("falling back to SQLite (--db sqlite)")
        db = "sqlite"
    mode = "quick" if args.quick else "full"
    sizes = [1_000, 10_000, 100_000] if args.quick else [1_000, 100_000, 1_000_000]
    chosen = [name.strip() for name in args.only.split(",") if name.strip()] or list(ITEMS)
    unknown = set(chosen) - set(ITEMS)
    if unknown:
        parser.error(f"unknown items: {', '.join(sorted(unknown))}")
    env = {
        **os.environ,
        "PYTHONPATH": python_path(),
        "DJANGO_SETTINGS_MODULE": "benchmarks.settings",
        "MCP_BENCH_DB": db,
        "MCP_BENCH_PAGE_SIZE": str(args.page_size),
        "MCP_BENCH_CURSOR_KEY": secrets.token_urlsafe(32),
    }
    if args.token_cache_ttl > 0:
        env["MCP_BENCH_TOKEN_CACHE_TTL"] = str(args.token_cache_ttl)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    for name in [*ITEMS, "fixture"]:
        (RESULTS_DIR / f"{name}.json").unlink(missing_ok=True)
    started = time.monotonic()
    loadavg_start = " ".join(f"{x:.2f}" for x in os.getloadavg())
    commit = git_state()
    failed: list[str] = []
    results: dict[str, Any] = {}
    needs_fixture = any(ITEMS[name].get("fixture", True) for name in chosen)
    try:
        fixture_argv = [PYTHON, str(BENCH_DIR / "fixture.py"), "setup", "--sizes", ",".join(map(str, sizes))]
        if needs_fixture and not run_step("fixture", fixture_argv, env, 1800):
            raise SystemExit("could not build the benchmark database")
        for name in chosen:
            item = ITEMS[name]
            argv = [PYTHON, str(BENCH_DIR / item["script"]), *item[mode]]
            if run_step(name, argv, env, item["timeout"]):
                results[name] = json.loads((RESULTS_DIR / f"{name}.json").read_text())
            else:
                failed.append(name)
        if args.profile:
            if not run_step("profile", [PYTHON, str(BENCH_DIR / "profile_page.py")], env, 600):
                failed.append("profile")
            if not shutil.which(env.get("PY_SPY", "py-spy")):
                print("py-spy is not installed (pip install py-spy; or PY_SPY=path): no profile of the servers")
            elif not run_step(
                "profile servers",
                [PYTHON, str(BENCH_DIR / "profile_servers.py"), "--py-spy", shutil.which(env.get("PY_SPY", "py-spy"))],
                env,
                600,
            ):
                failed.append("profile servers")
    finally:
        if not needs_fixture:
            pass
        elif args.keep_db:
            print("\nkeeping the benchmark database (--keep-db)")
        else:
            run_step("drop database", [PYTHON, str(BENCH_DIR / "fixture.py"), "drop"], env, 300)

    if needs_fixture:
        fixture = json.loads((RESULTS_DIR / "fixture.json").read_text())
    else:
        fixture = {"vendor": "no database", "page_size": args.page_size, "users": []}
    for user in fixture.get("users", []):
        user.pop("token", None)
    latest: dict[str, Any] = {
        "meta": {
            "finished": datetime.now(UTC).strftime("%Y-%m-%d %H:%M"),
            "mode": mode,
            "db": db,
            "vendor": fixture["vendor"],
            "page_size": fixture["page_size"],
            "sizes": sizes,
            "token_cache_ttl": args.token_cache_ttl,
            "commit": commit,
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "loadavg_start": loadavg_start,
            "loadavg_end": " ".join(f"{x:.2f}" for x in os.getloadavg()),
            "seconds": round(time.monotonic() - started),
            "failed": failed,
        },
        "fixture": fixture,
        "results": results,
        "summary": summarize(results),
    }
    from benchmarks.plot import draw

    latest["plot"] = draw(latest, PLOT)
    (RESULTS_DIR / "latest.json").write_text(json.dumps(latest, indent=2, default=str) + "\n")

    print(f"\n=== summary ({mode}, {fixture['vendor']}, one run, {latest['meta']['seconds']} s)")
    for row in latest["summary"]:
        verdict = "n/a" if row["ok"] is None else ("met" if row["ok"] else "MISSED")
        measured = fmt_ratio(row["value"], row.get("unit", "x"))
        print(f"  item {row['item']}: {row['measure']}: {measured} (target {fmt_target(row)}) {verdict}")
    ablation = results.get("ablation")
    for row in ablation["rows"] if ablation else []:
        servers = ", ".join(
            f"{kind} req/s {entry['rps_ratio']:.2f}x, p99 {entry['p99_ratio']:.2f}x"
            for kind, entry in row["servers"].items()
        )
        print(f"  ablation: {row['speed_up']} off / all on: {servers}: {row['verdict']}")
    if failed:
        print(f"  failed steps: {', '.join(failed)}")
    print(f"results: {(RESULTS_DIR / 'latest.json').relative_to(ROOT)}")
    if not args.no_doc:
        update_doc(latest)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
