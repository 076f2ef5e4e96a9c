"""Item 5: HTTP throughput of one ``resources/list`` page against the official MCP Python SDK.

Three servers, one process each, on loopback, all serving the same page (half-way through the smallest
inventory) from the same database with the same SQL:

- ``sdk``: the SDK's low-level ``Server`` (``json_response=True``, stateless) under uvicorn (``sdk_server.py``);
- ``ours-wsgi``: the demo project (``testproject.wsgi``) under gunicorn, one worker process of the ``gthread``
  class (2 threads, as docs/quickstart.md advises; HTTP keep-alive like uvicorn's), persistent DB connections.
  Gunicorn's ``sync`` worker closes every connection and is meant to sit behind a buffering proxy; measured
  directly it charges each request a new TCP connection that the SDK under uvicorn does not pay;
- ``ours-asgi``: the demo project as the demo runs it (``uvicorn testproject.asgi:application``: the MCP path is
  served by ``mcp_resources.asgi.MCPApplication``, one thread hop per request to its pool of ``ASGI_THREADS``,
  default 2), with persistent DB connections (``CONN_MAX_AGE=None``, one per worker thread of that pool: the MCP
  path never runs Django's async handler, so Django's advice of ``0`` for async views does not apply, and
  persistent connections are the production norm).

Each round also records the CPU that PostgreSQL's processes used per request (the database shares the machine's
two cores with the servers and the load generator).

When granian is installed (the ``dev`` extra installs it), the same two applications also run under granian, a
WSGI/ASGI server written in Rust: ``ours-granian-wsgi`` (one worker, 2 blocking threads) is a second WSGI verdict,
next to gunicorn's; ``ours-granian-asgi`` (one worker) is reported only, the ASGI verdict being the demo's uvicorn.

Ours receives a 2026-07-28 ``resources/list`` with a sealed cursor and a django-oauth-toolkit bearer token (its
listing requires an authenticated caller); the SDK receives the same request with its own plain cursor. Load is
a closed loop of ``--concurrency`` connections from ``http_client.py`` (a separate process on the same machine),
the same for every server; rounds are interleaved with the order rotated, and the medians of the rounds are
compared. Targets: ours >= 1.0x the SDK under WSGI and >= 0.8x under ASGI, with the default settings (every bearer
token validated against the database, ``TOKEN_CACHE_TTL = 0``). The same two servers run again with
``TOKEN_CACHE_TTL = 30`` (``ours-wsgi+tc``, ``ours-asgi+tc``) and are reported next to them, not as the verdict.
On PostgreSQL they also run with ``PREPARED_STATEMENTS = False`` (``ours-wsgi+up``, ``ours-asgi+up``): the token
lookup and the page query unprepared, as before that setting existed; reported, not the verdict. And with more
threads (``ours-wsgi+mt``: gunicorn with 4 threads; ``ours-asgi+mt``: ``ASGI_THREADS = 6``, the size of the event
loop's default executor on two cores, which ran the view before that setting existed); reported, not the verdict.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import (
    BENCH_DIR,
    RESULTS_DIR,
    ROOT,
    load_fixture,
    mcp_body,
    mcp_headers,
    median,
    setup_django,
    verdict,
    write_result,
)

TARGETS = {"ours-wsgi": 1.0, "ours-asgi": 0.8}
THREADS = 2  # gunicorn's threads per worker process, as docs/quickstart.md advises (and granian's blocking threads)
MORE_THREADS = {"wsgi": 4, "asgi": 6}  # the "+mt" servers
CACHE_TTL = 30  # seconds, for the "+tc" servers: the revocation bound docs/oauth.md suggests
PYTHON = sys.executable
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _processes() -> list[tuple[int, str, int, float]]:
    """``(pid, name, parent pid, user + system CPU seconds)`` of every process, from /proc."""
    ticks = os.sysconf("SC_CLK_TCK")
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        found.append((int(entry.name), name, int(fields[1]), (int(fields[11]) + int(fields[12])) / ticks))
    return found


def cpu_seconds(pid: int) -> float:
    """User + system CPU of ``pid`` and all its descendants."""
    processes = _processes()
    times = {process: cpu for process, _, _, cpu in processes}
    total, frontier = 0.0, [pid]
    while frontier:
        current = frontier.pop()
        total += times.get(current, 0.0)
        frontier.extend(child for child, _, parent, _ in processes if parent == current)
    return total


def database_cpu_seconds() -> float:
    """User + system CPU of every PostgreSQL process on the machine (0 when none runs here)."""
    return sum(cpu for _, name, _, cpu in _processes() if name in ("postgres", "postmaster"))


class Servers:
    """Start the servers in their own process groups; always stop them (SIGTERM, then SIGKILL)."""

    def __init__(self) -> None:
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.logs: dict[str, Path] = {}

    def start(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        log = RESULTS_DIR / f"server-{name}.log"
        self.logs[name] = log
        with log.open("wb") as out:
            self.procs[name] = subprocess.Popen(
                argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def log_tail(self, name: str) -> str:
        try:
            return self.logs[name].read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)


def post(url: str, body: bytes, headers: dict[str, str], timeout: float = 10) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def wait_ready(servers: Servers, name: str, url: str, body: bytes, headers: dict[str, str], expect: str) -> dict:
    deadline = time.monotonic() + 60
    last = ""
    while time.monotonic() < deadline:
        if servers.procs[name].poll() is not None:
            raise SystemExit(f"{name} exited early:\n{servers.log_tail(name)}")
        try:
            status, data = post(url, body, headers)
        except OSError as exc:
            last = str(exc)
            time.sleep(0.2)
            continue
        if status == 200 and expect in data.decode():
            return json.loads(data)
        raise SystemExit(f"{name} answered {status}: {data[:500]!r}\n{servers.log_tail(name)}")
    raise SystemExit(f"{name} did not come up within 60 s ({last}):\n{servers.log_tail(name)}")


def param_spec(params: list[Any], created_db: Any, last_id: int) -> list[list[Any]]:
    """Which captured parameters carry the position (created, id); the others are constants."""
    spec: list[list[Any]] = []
    for value in params:
        if type(value) is type(created_db) and value == created_db:
            spec.append(["created", None])
        elif type(value) is int and value == last_id:
            spec.append(["id", None])
        else:
            spec.append(["const", value])
    kinds = {kind for kind, _ in spec}
    if not {"created", "id"} <= kinds:
        raise SystemExit(f"could not find the position in the captured parameters {params!r}")
    return spec


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=float, default=1.5)
    parser.add_argument("--duration", type=float, default=6.0)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()

    setup_django()
    from django.conf import settings as django_settings
    from django.contrib.auth import get_user_model
    from django.db import connection

    from benchmarks.fixture import mint_token
    from benchmarks.pages import capture_page_sql, context_for, core_objects, cursor_at, reference_pages
    from mcp_resources.conf import mcp_settings
    from testproject.library.models import Document

    fixture = load_fixture()
    page_size = fixture["page_size"]
    vendor = fixture["vendor"]
    page = reference_pages(fixture)[0]
    user = dict(page["user"])
    server, template = core_objects()
    ports = {"sdk": free_port(), "ours-wsgi": free_port(), "ours-asgi": free_port()}
    granian = (BIN / "granian").exists() and not os.environ.get("MCP_BENCH_NO_GRANIAN")
    if granian:
        ports.update({"ours-granian-wsgi": free_port(), "ours-granian-asgi": free_port()})
    # The same two servers with the token cache on (reported next to the default, which validates every token).
    cache_variants = not os.environ.get("MCP_BENCH_TOKEN_CACHE_TTL")
    variants: dict[str, dict[str, str]] = {}
    if cache_variants:
        variants["+tc"] = {"MCP_BENCH_TOKEN_CACHE_TTL": str(CACHE_TTL)}
    if vendor == "postgresql" and os.environ.get("MCP_BENCH_PREPARED") != "0":
        # And with the app's fixed queries unprepared (PREPARED_STATEMENTS off), to show what preparing them gives.
        variants["+up"] = {"MCP_BENCH_PREPARED": "0"}
    # And with more threads: gunicorn's 4 and the default executor's 6 (on two cores), the configuration before.
    variants["+mt"] = {
        "GUNICORN_CMD_ARGS": f"--threads {MORE_THREADS['wsgi']}",
        "MCP_BENCH_ASGI_THREADS": str(MORE_THREADS["asgi"]),
    }
    for suffix in variants:
        ports.update({f"{name}{suffix}": free_port() for name in ("ours-wsgi", "ours-asgi")})
    # Bound to the configured canonical resource URI and, should none be configured, to each server's own URL.
    canonical = [uri for uri in [(django_settings.MCP_RESOURCES or {}).get("RESOURCE_URI")] if uri]
    user["token"] = mint_token(
        get_user_model().objects.get(pk=user["user_id"]),
        canonical + [f"http://127.0.0.1:{p}/mcp" for p in ports.values()],
    )
    ctx = context_for(user, host=f"127.0.0.1:{ports['ours-wsgi']}")
    where = cursor_at(server, template, ctx, user, 0.5, page_size)
    expected = where["first_uri"]
    sql, sql_params = capture_page_sql(server, ctx, {"cursor": where["cursor"]})
    before = Document.objects.get(pk=user["first_id"] + where["skip"] - 1)
    created_db = Document._meta.get_field("created").get_db_prep_value(before.created, connection)
    created_text = before.created.isoformat() if vendor == "postgresql" else str(created_db)
    settings = connection.settings_dict
    config = {
        "sql": sql,
        "params": param_spec(sql_params, created_db, before.pk),
        "page_size": page_size,
        "vendor": vendor,
        "dsn": f"host={settings.get('HOST')} port={settings.get('PORT')} user={settings.get('USER')} "
        f"dbname={settings.get('NAME')}",
        "sqlite_path": str(settings["NAME"]),
        "probe_created": created_text,
        "probe_id": before.pk,
    }
    config_file = RESULTS_DIR / "sdk_config.json"
    config_file.write_text(json.dumps(config, default=str))
    connection.close()

    bodies = {
        "sdk": mcp_body(f"{created_text}|{before.pk}"),
        "ours-wsgi": mcp_body(where["cursor"]),
        "ours-asgi": mcp_body(where["cursor"]),
    }
    headers = {
        "sdk": mcp_headers(None),
        "ours-wsgi": mcp_headers(user["token"]),
        "ours-asgi": mcp_headers(user["token"]),
    }
    base_env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "benchmarks.settings",
        "MCP_LOG_LEVEL": "WARNING",
    }
    argv = {
        "sdk": [PYTHON, str(BENCH_DIR / "sdk_server.py"), str(config_file), str(ports["sdk"])],
        "ours-wsgi": [
            str(BIN / "gunicorn"),
            "testproject.wsgi:application",
            "--workers",
            "1",
            "--worker-class",
            "gthread",
            "--keep-alive",
            "30",
            "--bind",
            f"127.0.0.1:{ports['ours-wsgi']}",
            "--log-level",
            "warning",
            "--timeout",
            "60",
        ],
        "ours-asgi": [
            str(BIN / "uvicorn"),
            "testproject.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(ports["ours-asgi"]),
            "--log-level",
            "warning",
            "--no-access-log",
        ],
    }
    for interface in ("wsgi", "asgi") if granian else ():
        name = f"ours-granian-{interface}"
        argv[name] = [
            str(BIN / "granian"),
            "--interface",
            interface,
            f"testproject.{interface}:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(ports[name]),
            "--workers",
            "1",
            "--http",
            "1",
            "--no-ws",
            "--log-level",
            "warning",
        ]
        if interface == "wsgi":
            argv[name] += ["--blocking-threads", str(THREADS)]  # as gunicorn's threads
    for name in [n for n in ports if n.startswith("ours-granian")]:
        bodies[name], headers[name] = bodies["ours-wsgi"], headers["ours-wsgi"]
    variant_of = {f"{base}{suffix}": (base, suffix) for suffix in variants for base in ("ours-wsgi", "ours-asgi")}
    for name, (base, _) in variant_of.items():
        bodies[name], headers[name] = bodies[base], headers[base]
        argv[name] = [str(ports[name]) if a == str(ports[base]) else a for a in argv[base]]
        argv[name] = [f"127.0.0.1:{ports[name]}" if a == f"127.0.0.1:{ports[base]}" else a for a in argv[name]]
    envs = {
        "sdk": base_env,
        # gunicorn's threads through its environment, so that a variant (as every variant) is only environment.
        "ours-wsgi": {**base_env, "MCP_BENCH_CONN_MAX_AGE": "none", "GUNICORN_CMD_ARGS": f"--threads {THREADS}"},
        "ours-asgi": {**base_env, "MCP_BENCH_CONN_MAX_AGE": "none"},
    }
    for name in [n for n in ports if n.startswith("ours-granian")]:
        envs[name] = envs["ours-wsgi"]
    for name, (base, suffix) in variant_of.items():
        envs[name] = {**envs[base], **variants[suffix]}
    names = list(ports)
    servers = Servers()
    samples: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    try:
        for name in names:
            servers.start(name, argv[name], envs[name])
        checks = {}
        for name in names:
            url = f"http://127.0.0.1:{ports[name]}/mcp"
            answer = wait_ready(servers, name, url, bodies[name], headers[name], expected)
            resources = answer["result"]["resources"]
            if len(resources) != page_size or resources[0]["uri"] != expected or "nextCursor" not in answer["result"]:
                raise SystemExit(f"{name} served a different page: {json.dumps(answer)[:400]}")
            checks[name] = {"first": resources[0]["uri"], "last": resources[-1]["uri"], "count": len(resources)}
        if len({(c["first"], c["last"], c["count"]) for c in checks.values()}) != 1:
            raise SystemExit(f"the servers disagree on the page: {checks}")
        print(
            f"item 5: HTTP throughput, one page ({page['label']}, {page_size} resources), {vendor}, "
            f"{args.concurrency} connections, {args.rounds} rounds x {args.duration:g} s (+{args.warmup:g} s warm-up)"
        )
        for r in range(args.rounds):
            order = names[r % len(names) :] + names[: r % len(names)]
            for name in order:
                body_file = RESULTS_DIR / f"body-{name}.json"
                body_file.write_bytes(bodies[name])
                cpu0 = cpu_seconds(servers.procs[name].pid)
                db0 = database_cpu_seconds()
                completed = subprocess.run(
                    [
                        PYTHON,
                        str(BENCH_DIR / "http_client.py"),
                        "--url",
                        f"http://127.0.0.1:{ports[name]}/mcp",
                        "--body-file",
                        str(body_file),
                        "--headers",
                        json.dumps(headers[name]),
                        "--concurrency",
                        str(args.concurrency),
                        "--warmup",
                        str(args.warmup),
                        "--duration",
                        str(args.duration),
                        "--expect",
                        expected,
                    ],
                    capture_output=True,
                    text=True,
                    timeout=args.warmup + args.duration + 60,
                    check=False,
                )
                cpu = cpu_seconds(servers.procs[name].pid) - cpu0
                db_cpu = database_cpu_seconds() - db0
                if completed.returncode != 0:
                    raise SystemExit(f"the client failed against {name}: {completed.stderr[-2000:]}")
                run = json.loads(completed.stdout)
                run["server_cpu_ms_per_request"] = (
                    cpu * 1e3 / max(1, run["requests"]) * (args.duration / (args.duration + args.warmup))
                    if run["requests"]
                    else None
                )
                run["database_cpu_ms_per_request"] = (
                    db_cpu * 1e3 / max(1, run["requests"]) * (args.duration / (args.duration + args.warmup))
                    if run["requests"]
                    else None
                )
                samples[name].append(run)
                errors = f", {run['errors']} errors ({run['first_error']})" if run["errors"] else ""
                print(
                    f"  round {r + 1} {name:>12}: {run['rps']:7.0f} req/s, p50 {run['p50_ms']:.2f} ms, "
                    f"p99 {run['p99_ms']:.2f} ms{errors}"
                )
                if run["requests"] == 0:
                    raise SystemExit(f"{name} completed no request: {run['first_error']}")
    finally:
        servers.stop()
        for name in names:
            (RESULTS_DIR / f"body-{name}.json").unlink(missing_ok=True)

    summary: dict[str, Any] = {}
    for name in names:
        runs = samples[name]
        summary[name] = {
            "rps": median([run["rps"] for run in runs]),
            "p50_ms": median([run["p50_ms"] for run in runs]),
            "p99_ms": median([run["p99_ms"] for run in runs]),
            "server_cpu_ms_per_request": median([run["server_cpu_ms_per_request"] for run in runs]),
            "database_cpu_ms_per_request": median([run["database_cpu_ms_per_request"] for run in runs]),
            "errors": sum(run["errors"] for run in runs),
            "rounds_rps": [run["rps"] for run in runs],
        }
    ratios = {name: summary[name]["rps"] / summary["sdk"]["rps"] for name in names if name != "sdk"}
    for name in names:
        s = summary[name]
        print(
            f"  {name:>12}: median {s['rps']:.0f} req/s, p50 {s['p50_ms']:.2f} ms, p99 {s['p99_ms']:.2f} ms, "
            f"server CPU {s['server_cpu_ms_per_request']:.2f} ms/request, "
            f"PostgreSQL CPU {s['database_cpu_ms_per_request']:.2f} ms/request"
        )
    for name, target in {**TARGETS, "ours-granian-wsgi": TARGETS["ours-wsgi"]}.items():
        if name not in ratios:
            continue
        print(
            f"{name} / SDK throughput: {ratios[name]:.2f}x (target >= {target:g}x: {verdict(ratios[name] >= target)})"
        )
    write_result(
        "http",
        {
            "page": page["label"],
            "page_size": page_size,
            "vendor": vendor,
            "concurrency": args.concurrency,
            "rounds": args.rounds,
            "duration_s": args.duration,
            "servers": summary,
            "ratios": ratios,
            "targets": TARGETS,
            "token_cache_ttl_of_variants": CACHE_TTL if cache_variants else None,
            "unprepared_variants": "+up" in variants,
            "threads": {"wsgi": THREADS, "asgi": mcp_settings.asgi_threads},
            "more_threads_variants": MORE_THREADS,
            "sql": sql,
        },
    )


if __name__ == "__main__":
    main()
