"""Where a served request's CPU goes (diagnostic, not a benchmark): py-spy samples of the HTTP servers under load.

Starts our servers of item 5 (``ours-gunicorn``, ``ours-uvicorn``; ``--servers`` also takes ``ours-uvicorn-asgi`` and
``ours-uvicorn-nomw``; the SDK's server is not profiled here), loads each one with ``http_client.py`` (the item's page,
8 connections) and records it with ``py-spy record --gil`` (only the thread holding the interpreter lock: Python's CPU,
not waits on the database or sockets), with its worker processes. The samples are summed by the package of the innermost
frame (own time) and by the stages of a request they pass through (inclusive time), into ``results/profile-servers.txt``
and ``.json``; the raw folded stacks stay in ``results/profile-<server>.folded`` (for a flame graph). Needs py-spy
(``pip install py-spy``; ``--py-spy`` names the binary) and the benchmark database (``run.py --only http --keep-db``
leaves one).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import BENCH_DIR, RESULTS_DIR, load_fixture, mcp_body, mcp_headers, python_path, setup_django
from benchmarks.serving import (
    PYTHON,
    Contender,
    Servers,
    asgi_database,
    check_answer,
    free_port,
    gunicorn_argv,
    gunicorn_env,
    stop_on_sigterm,
    uvicorn_argv,
    wait_up,
)

# Inclusive stages: a sample counts for every stage whose marker is a frame of its stack (file fragment, function).
STAGES: list[tuple[str, str, str]] = [
    ("server: HTTP parsing and the event loop or worker", "", ""),  # what remains outside Django and the app
    ("Django's handler (request, middleware chain, response)", "django/core/handlers/", ""),
    ("middleware: the demo's stack, own time", "/middleware", ""),
    ("MCP view (MCPView.dispatch)", "mcp_resources/transport/views.py", "dispatch"),
    ("authentication: django-oauth-toolkit's validate_bearer_token", "oauth2_provider/oauth2_validators.py", ""),
    ("resources/list in the core (MCPServer.list_resources)", "mcp_resources/server/core.py", "list_resources"),
    ("ORM: building and compiling queries", "django/db/models/sql/", ""),
    ("driver: psycopg (sending, reading, loading rows)", "psycopg/", ""),
    ("JSON encoding of the response", "mcp_resources/protocol/jsonrpc.py", "dumps"),
    ("asgiref's thread hop, inclusive of what runs in it (SyncToAsync.thread_handler)", "asgiref/", "thread_handler"),
]


def frames(stack: str) -> list[tuple[str, str]]:
    """``[(function, file), ...]`` from py-spy's folded line (outermost first)."""
    out = []
    for frame in stack.split(";"):
        function, _, rest = frame.partition(" (")
        out.append((function.strip(), rest.rsplit(":", 1)[0]))
    return out


GROUPS: list[tuple[str, tuple[str, ...]]] = [
    (
        "HTTP server and event loop (gunicorn, uvicorn, h11, asyncio, selectors)",
        (
            "gunicorn/",
            "uvicorn/",
            "h11/",
            "httptools/",
            "asyncio/",
            "selectors.py",
            "socket.py",
            "click/",
        ),
    ),
    ("thread hand-offs (threading, concurrent.futures, queue)", ("threading.py", "concurrent/", "queue.py")),
    ("asgiref (sync/async bridges, Local)", ("asgiref/",)),
    ("Channels routing", ("channels/",)),
    ("Django ORM (django/db)", ("django/db/",)),
    ("Django, the rest (handlers, middleware, request, response, signals)", ("django/",)),
    ("psycopg", ("psycopg/",)),
    ("django-oauth-toolkit and oauthlib", ("oauth2_provider/", "oauthlib/")),
    ("mcp_resources", ("mcp_resources/",)),
    ("JSON, base64, crypto (orjson, json, binascii, cryptography)", ("json/", "orjson", "cryptography/")),
]


def group_of(path: str) -> str:
    """The group of the innermost frame's file (py-spy names files relative to the import path)."""
    for label, prefixes in GROUPS:
        if path.startswith(prefixes) or any(f"/{prefix}" in path for prefix in prefixes):
            return label
    return "Python, the rest (copy, inspect, functools, urllib...)"


def summarize_folded(path: Path) -> dict[str, Any]:
    own: Counter[str] = Counter()
    stages: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        stack_frames = frames(stack)
        own[group_of(stack_frames[-1][1])] += count
        inside_django = False
        for label, file_part, function in STAGES[1:]:
            if any(file_part in f and (not function or function in fn) for fn, f in stack_frames):
                stages[label] += count
                inside_django = inside_django or label.startswith(("Django's", "MCP view"))
        if not inside_django:
            stages[STAGES[0][0]] += count
    # "middleware, own time": only the samples whose innermost frame is in a middleware module.
    stages[STAGES[2][0]] = sum(
        int(line.rpartition(" ")[2])
        for line in path.read_text().splitlines()
        if line.rpartition(" ")[2].isdigit() and "/middleware" in frames(line.rpartition(" ")[0])[-1][1]
    )
    return {
        "samples": total,
        "own_by_group": {k: v / total for k, v in own.most_common()} if total else {},
        "stages": {label: stages[label] / total for label, _, _ in STAGES} if total else {},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--servers", default="ours-gunicorn,ours-uvicorn")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    parser.add_argument("--py-spy", default=os.environ.get("PY_SPY") or shutil.which("py-spy") or "py-spy")
    args = parser.parse_args()
    if not shutil.which(args.py_spy) and not Path(args.py_spy).exists():
        raise SystemExit("py-spy is not installed (pip install py-spy), or name it with --py-spy")
    stop_on_sigterm()
    setup_django()
    from benchmarks.pages import http_page

    page = http_page(load_fixture())
    env = {**os.environ, "PYTHONPATH": python_path(), "DJANGO_SETTINGS_MODULE": "benchmarks.settings"}
    env.pop("MCP_BENCH_TOKEN_CACHE_TTL", None)
    asgi_db = asgi_database()
    kinds: dict[str, tuple[str, dict[str, str]]] = {
        "ours-gunicorn": ("testproject.wsgi:application", gunicorn_env()),
        "ours-uvicorn": ("testproject.asgi:application", asgi_db),
        "ours-uvicorn-asgi": ("benchmarks.asgi_fast:application", {"MCP_BENCH_ASGI_HANDLER": "asgi", **asgi_db}),
        "ours-uvicorn-nomw": ("benchmarks.asgi_fast:application", {"MCP_BENCH_ASGI_MIDDLEWARE": "0", **asgi_db}),
    }
    names = [n.strip() for n in args.servers.split(",") if n.strip()]
    unknown = [n for n in names if n not in kinds]
    if unknown:
        raise SystemExit(f"unknown server(s) {', '.join(unknown)}: choose from {', '.join(kinds)}")
    report: dict[str, Any] = {"page": page["label"], "seconds": args.seconds, "servers": {}}
    text = [f"# py-spy --gil of each server under load ({page['label']}, 8 connections, {args.seconds:g} s)"]
    for name in names:
        port = free_port()
        app, extra = kinds[name]
        argv = gunicorn_argv(app, port) if "gunicorn" in name else uvicorn_argv(app, port)
        contender = Contender(
            name=f"profile-{name}",
            argv=argv,
            env={**env, **extra},
            port=port,
            body=mcp_body(page["cursor"]),
            headers=mcp_headers(page["user"]["token"]),
            expect=page["expected"],
        )
        servers = Servers()
        folded = RESULTS_DIR / f"profile-{name}.folded"
        body_file = RESULTS_DIR / f"body-profile-{name}.json"
        try:
            servers.start(contender)
            wait_up(servers, contender)
            check_answer(servers, contender)
            body_file.write_bytes(contender.body)
            load = subprocess.Popen(
                [
                    PYTHON,
                    str(BENCH_DIR / "http_client.py"),
                    "--url",
                    contender.url,
                    "--body-file",
                    str(body_file),
                    "--headers",
                    json.dumps(contender.headers),
                    "--warmup",
                    "2",
                    "--duration",
                    str(args.seconds + 2),
                    "--expect",
                    contender.expect,
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            time.sleep(2)
            subprocess.run(
                [
                    args.py_spy,
                    "record",
                    "--pid",
                    str(servers.procs[contender.name].pid),
                    "--subprocesses",
                    "--gil",
                    "--rate",
                    str(args.rate),
                    "--duration",
                    str(int(args.seconds)),
                    "--format",
                    "raw",
                    "--output",
                    str(folded),
                ],
                check=True,
                capture_output=True,
            )
            load_result = json.loads(load.communicate(timeout=60)[0])
        finally:
            servers.stop()
            body_file.unlink(missing_ok=True)
        summary = summarize_folded(folded)
        summary["rps_while_sampled"] = load_result["rps"]
        report["servers"][name] = summary
        text += [
            "",
            f"## {name}: {summary['samples']} samples, {load_result['rps']:.0f} req/s while sampled",
            "",
            "own time (innermost frame) by group:",
            *(f"  {share:5.0%}  {group}" for group, share in summary["own_by_group"].items()),
            "",
            "inclusive time by stage:",
            *(f"  {share:5.0%}  {label}" for label, share in summary["stages"].items()),
        ]
    (RESULTS_DIR / "profile-servers.json").write_text(json.dumps(report, indent=2) + "\n")
    (RESULTS_DIR / "profile-servers.txt").write_text("\n".join(text) + "\n")
    print("\n".join(text))


if __name__ == "__main__":
    main()
