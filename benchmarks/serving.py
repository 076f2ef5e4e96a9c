"""HTTP servers under load, shared by item 5 (``bench_http.py``) and the ablation (``bench_ablation.py``).

Each contender is one server process (its own process group, its log in ``results/server-<name>.log``) serving one
request: a body, headers, and a string every answer must contain. :func:`measure` starts them all, checks that
each answers that request with a 200 holding the expected page, then runs rounds: in each round every contender
gets ``duration`` seconds (after ``warmup``) of a closed loop of ``concurrency`` keep-alive connections from
``http_client.py`` (a process of its own), the order rotated every round. Each round also records the CPU the
server's processes used per request and the CPU of PostgreSQL's processes (the database shares the machine's
cores). Contenders are compared by the medians of their rounds.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.common import BENCH_DIR, RESULTS_DIR, ROOT

PYTHON = sys.executable
BIN = Path(sys.executable).parent
GUNICORN_WORKER = "gevent"  # gunicorn's worker class, as docs/deployment.md advises
GUNICORN_THREADS = 2  # the threads of a gthread worker process (the variant measured next to it)
# Database connections as Django's docs advise for each kind of server. Under WSGI with threads, persistent
# connections (the production norm: one per worker thread). Under gunicorn's gevent worker (a greenlet per client
# connection) and under ASGI, not persistent ones: "When using ASGI, persistent
# connections should be disabled" (under Django's ASGI handler each request runs in a thread of its own context,
# and a persistent connection per context piles up until the garbage collector frees it: PostgreSQL's 100
# connections run out), but Django's pool (``OPTIONS["pool"]``, needs psycopg_pool), the alternative its docs name.
WSGI_DATABASE = {"MCP_BENCH_CONN_MAX_AGE": "none"}
ASGI_DATABASE = {"MCP_BENCH_CONN_MAX_AGE": "0"}
DATABASE_POOL = {"MCP_BENCH_CONN_MAX_AGE": "0", "MCP_BENCH_DB_POOL": "1"}


def asgi_database() -> dict[str, str]:
    """The database configuration of the uvicorn servers: Django's pool where psycopg_pool is installed, else a
    connection per request."""
    return DATABASE_POOL if pool_available() else ASGI_DATABASE


@dataclass
class Contender:
    """One server and the request it is measured with."""

    name: str
    argv: list[str]
    env: dict[str, str]
    port: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    expect: str = ""
    cwd: Path = ROOT
    path: str = "/mcp"
    log_mark: str = ""  # a line the server must have logged once it answers (e.g. an ablation switch)
    # Headers the server must refuse with a 401 (e.g. an unknown bearer token): shows that it validates tokens.
    refused_headers: dict[str, str] | None = None
    # Called once the server answers (with the contender): may set ``body`` (e.g. a cursor the server sealed).
    prepare: Callable[[Contender], None] | None = None
    description: str = ""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.path}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def gunicorn_argv(app: str, port: int, worker: str = GUNICORN_WORKER) -> list[str]:
    """One gunicorn worker process of the class ``worker`` with HTTP keep-alive: ``gevent`` (the deployment
    docs/deployment.md advises) or ``gthread``, whose threads come from ``GUNICORN_CMD_ARGS`` (:func:`gunicorn_env`),
    so that a variant is only environment."""
    return [
        str(BIN / "gunicorn"),
        app,
        "--workers",
        "1",
        "--worker-class",
        worker,
        "--keep-alive",
        "30",
        "--bind",
        f"127.0.0.1:{port}",
        "--log-level",
        "warning",
        "--timeout",
        "60",
    ]


def gunicorn_env(worker: str = GUNICORN_WORKER, threads: int = GUNICORN_THREADS) -> dict[str, str]:
    """The environment of :func:`gunicorn_argv`'s server: under ``gevent``, Django's pool (a greenlet per client
    connection would otherwise keep a persistent connection of its own until the garbage collector frees it);
    under ``gthread``, ``threads`` threads and persistent connections (one per thread)."""
    if worker == "gevent":
        return dict(DATABASE_POOL if pool_available() else WSGI_DATABASE)
    return {"GUNICORN_CMD_ARGS": f"--threads {threads}", **WSGI_DATABASE}


def pool_available() -> bool:
    """Whether Django's connection pool can be used here (psycopg_pool installed)."""
    import importlib.util

    return importlib.util.find_spec("psycopg_pool") is not None


def uvicorn_argv(app: str, port: int) -> list[str]:
    return [
        str(BIN / "uvicorn"),
        app,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
        "--no-access-log",
    ]


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

    def start(self, contender: Contender) -> None:
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        log = RESULTS_DIR / f"server-{contender.name}.log"
        self.logs[contender.name] = log
        with log.open("wb") as out:
            self.procs[contender.name] = subprocess.Popen(
                contender.argv,
                cwd=contender.cwd,
                env=contender.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def log_text(self, name: str) -> str:
        try:
            return self.logs[name].read_text(errors="replace")
        except (OSError, KeyError):
            return ""

    def log_tail(self, name: str) -> str:
        return self.log_text(name)[-2000:]

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


def stop_on_sigterm() -> None:
    """Turn SIGTERM (``run.py`` on a time-out) into ``SystemExit``, so that ``finally`` blocks stop the servers."""

    def terminate(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, terminate)


def post(url: str, body: bytes, headers: dict[str, str], timeout: float = 10) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def wait_up(servers: Servers, contender: Contender, timeout: float = 90) -> None:
    """Until the server accepts connections (it answered something), or fail with its log."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if servers.procs[contender.name].poll() is not None:
            raise SystemExit(f"{contender.name} exited early:\n{servers.log_tail(contender.name)}")
        try:
            with socket.create_connection(("127.0.0.1", contender.port), timeout=1):
                return
        except OSError as exc:
            last = str(exc)
            time.sleep(0.2)
    raise SystemExit(
        f"{contender.name} did not come up within {timeout:.0f} s ({last}):\n{servers.log_tail(contender.name)}"
    )


def check_answer(servers: Servers, contender: Contender) -> dict[str, Any]:
    """POST the contender's request once: it must be a 200 holding ``expect``; return the decoded answer."""
    status, data = post(contender.url, contender.body, contender.headers)
    if status != 200 or contender.expect.encode() not in data:
        raise SystemExit(f"{contender.name} answered {status}: {data[:500]!r}\n{servers.log_tail(contender.name)}")
    if contender.refused_headers is not None:
        status, refused = post(contender.url, contender.body, contender.refused_headers)
        if status != 401:
            raise SystemExit(f"{contender.name} answered {status}, not 401, to a refused request: {refused[:300]!r}")
    if contender.log_mark and contender.log_mark not in servers.log_text(contender.name):
        raise SystemExit(f"{contender.name} did not log {contender.log_mark!r}:\n{servers.log_tail(contender.name)}")
    return json.loads(data)


def load(contender: Contender, *, warmup: float, duration: float, concurrency: int) -> dict[str, Any]:
    """One round against one server: ``http_client.py`` in its own process."""
    body_file = RESULTS_DIR / f"body-{contender.name}.json"
    body_file.write_bytes(contender.body)
    try:
        completed = subprocess.run(
            [
                PYTHON,
                str(BENCH_DIR / "http_client.py"),
                "--url",
                contender.url,
                "--body-file",
                str(body_file),
                "--headers",
                json.dumps(contender.headers),
                "--concurrency",
                str(concurrency),
                "--warmup",
                str(warmup),
                "--duration",
                str(duration),
                "--expect",
                contender.expect,
            ],
            capture_output=True,
            text=True,
            timeout=warmup + duration + 60,
            check=False,
        )
    finally:
        body_file.unlink(missing_ok=True)
    if completed.returncode != 0:
        raise SystemExit(f"the client failed against {contender.name}: {completed.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(completed.stdout)
    return result


def measure(
    contenders: list[Contender],
    args: Any,
    check: Callable[[dict[str, dict[str, Any]]], None] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Start every contender, check its answer, run the interleaved rounds; always stop the servers.

    ``args`` carries ``rounds``, ``warmup``, ``duration`` and ``concurrency`` (the scripts' common options).
    ``check`` receives every contender's first answer (by name) before the rounds, e.g. to check that all serve
    the same page. Returns every contender's rounds (``http_client.py``'s result plus CPU per request).
    """
    rounds, warmup, duration, concurrency = args.rounds, args.warmup, args.duration, args.concurrency
    stop_on_sigterm()
    servers = Servers()
    samples: dict[str, list[dict[str, Any]]] = {c.name: [] for c in contenders}
    try:
        for contender in contenders:
            servers.start(contender)
        answers = {}
        for contender in contenders:
            wait_up(servers, contender)
            if contender.prepare is not None:
                contender.prepare(contender)
            answers[contender.name] = check_answer(servers, contender)
        if check is not None:
            check(answers)
        for r in range(rounds):
            shift = r % len(contenders)
            for contender in contenders[shift:] + contenders[:shift]:
                pid = servers.procs[contender.name].pid
                cpu0, db0 = cpu_seconds(pid), database_cpu_seconds()
                run = load(contender, warmup=warmup, duration=duration, concurrency=concurrency)
                cpu, db_cpu = cpu_seconds(pid) - cpu0, database_cpu_seconds() - db0
                # CPU is measured over warm-up and window alike: scaled to the window, as the requests counted.
                share = duration / (duration + warmup)
                requests = run["requests"]
                run["server_cpu_ms_per_request"] = cpu * 1e3 * share / requests if requests else None
                run["database_cpu_ms_per_request"] = db_cpu * 1e3 * share / requests if requests else None
                samples[contender.name].append(run)
                errors = f", {run['errors']} errors ({run['first_error']})" if run["errors"] else ""
                print(
                    f"  round {r + 1} {contender.name:>24}: {run['rps']:7.0f} req/s, p50 {run['p50_ms'] or 0:.2f} ms, "
                    f"p99 {run['p99_ms'] or 0:.2f} ms{errors}",
                    flush=True,
                )
                if not requests:
                    raise SystemExit(f"{contender.name} completed no request: {run['first_error']}")
    finally:
        servers.stop()
    return samples


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over the rounds of one contender."""

    def med(key: str) -> float | None:
        values = [run[key] for run in runs if run.get(key) is not None]
        return statistics.median(values) if values else None

    return {
        "rps": med("rps"),
        "p50_ms": med("p50_ms"),
        "p99_ms": med("p99_ms"),
        "server_cpu_ms_per_request": med("server_cpu_ms_per_request"),
        "database_cpu_ms_per_request": med("database_cpu_ms_per_request"),
        "errors": sum(run["errors"] for run in runs),
        "rounds_rps": [run["rps"] for run in runs],
        "rounds_p99_ms": [run["p99_ms"] for run in runs],
    }


def paired_ratios(a: list[dict[str, Any]], b: list[dict[str, Any]], key: str) -> list[float]:
    """``a / b`` of ``key`` round by round (the two ran next to each other in each round)."""
    return [x[key] / y[key] for x, y in zip(a, b, strict=False) if x.get(key) and y.get(key)]


def describe(name: str, s: dict[str, Any]) -> str:
    database = s.get("database_cpu_ms_per_request")
    return (
        f"{name}: {s['rps']:.0f} req/s, p50 {s['p50_ms']:.1f} ms, p99 {s['p99_ms']:.1f} ms, server CPU "
        f"{s['server_cpu_ms_per_request']:.2f} ms/request"
        + (f", PostgreSQL CPU {database:.2f} ms/request" if database is not None else "")
        + f", {s['errors']} errors"
    )
