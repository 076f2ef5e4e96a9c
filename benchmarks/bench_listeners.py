"""Item 6: ``subscriptions/listen`` streams on one uvicorn worker against a bare reader of the same log.

Two servers, one uvicorn process each (no reload, one worker), both on the Redis log
(``MCP_REDIS_URL=redis://127.0.0.1:6379/<--redis-db>``, the stream ``mcp_resources:events``; the benchmark owns
that database and flushes it before every server it starts):

- ours: the standard deployment, ``testproject.asgi:application`` (Channels' ``ProtocolTypeRouter`` and
  ``URLRouter``, the MCP path to ``MCPEndpoint``, which serves streams on the event loop), with
  ``benchmarks.settings_listeners``, the conformance profile (unauthenticated) with ``STREAMS_PER_CALLER`` raised,
  on a fresh temporary SQLite database (migrated); each listener POSTs ``subscriptions/listen`` for
  ``test://watched-resource``;
- bare: ``benchmarks.bare_reader:application``, one ``XREAD BLOCK`` task on the same Redis stream writing each
  ``updated`` event as an SSE event to the requests that asked for its URI (the baseline of ``bench_delivery.py``;
  until issue 28 this was a bare Channels ``AsyncHttpConsumer`` on the Redis channel layer).

For each N (1,000; 5,000 too with ``--full``), ``--rounds`` times (default 3, the first server alternating) and
for each server, in a fresh server process: warm up (a few
listeners and one broadcast, so the worker thread pool has reached its size), read ``Threads`` and ``VmRSS``
from ``/proc/<pid>/status``, open N listeners (raw asyncio streams on loopback, a bounded number of handshakes at
once, each waiting for its acknowledgement), read them again, then publish ``--broadcasts`` messages from this
process with the public ``notify_resource_updated(uri)`` (one ``XADD`` on the log), one at a time, each once every
listener got the previous one (or after ``--broadcast-timeout``).
Latency is publish (just before ``group_send``) to receipt (the read that carries the event), both on this
process's ``perf_counter``; the load generator shares the machine's cores with the servers and with Redis,
equally for both servers. Everything stops by itself: per-step time-outs and an overall ``--deadline``.

A lost delivery counts as infinitely late. Per server and N the medians over the rounds are reported (thread counts:
the extremes), and the ratios of those medians. Targets (one run): server threads with N listeners no more than
before them, at most 32 KB of server RSS per listener, p99 at most 1.5x the bare consumer's.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import json
import math
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import PROTOCOL_VERSION, RESULTS_DIR, ROOT, write_result

SETTINGS = "benchmarks.settings_listeners"
WATCHED = "test://watched-resource"
APPS = {"ours": "testproject.asgi:application", "bare": "benchmarks.bare_reader:application"}
ACK_MARK = b"notifications/subscriptions/acknowledged"
UPDATE_MARK = b"notifications/resources/updated"
THREADS_TARGET = 1.0
KB_TARGET = 32.0
P99_TARGET = 1.5


def listen_request(port: int, request_id: int) -> bytes:
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "subscriptions/listen",
            "params": {
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
                    "io.modelcontextprotocol/clientCapabilities": {},
                },
                "notifications": {"resourceSubscriptions": [WATCHED]},
            },
        },
        separators=(",", ":"),
    ).encode()
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {PROTOCOL_VERSION}\r\n"
        f"Mcp-Method: subscriptions/listen\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


# The server process --------------------------------------------------------------------------------------


def proc_status(pid: int) -> dict[str, int]:
    """``Threads`` and ``VmRSS`` (kB) of a process."""
    values: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, rest = line.partition(":")
            if key in ("Threads", "VmRSS"):
                values[key] = int(rest.split()[0])
    return values


def proc_cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_env(workdir: Path, redis_url: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("MCP_TEST_DB", "PGDATABASE", "MCP_DEMO_DB", "DJANGO_SETTINGS_MODULE", "DJANGO_DEBUG")
    }
    env.update(
        DJANGO_SETTINGS_MODULE=SETTINGS,
        MCP_DEMO_DB=str(workdir / "listeners.sqlite3"),
        MCP_REDIS_URL=redis_url,
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    )
    return env


def flush_redis(redis_url: str) -> None:
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        client.flushdb()
    finally:
        client.close()


def gunicorn_worker(pid: int) -> int:
    """The pid of gunicorn ``pid``'s (only) worker, the process that serves."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError, IndexError):
            return int(Path(f"/proc/{pid}/task/{pid}/children").read_text().split()[0])
        time.sleep(0.1)
    raise RuntimeError("gunicorn started no worker")


def server_argv(app: str, port: int, *, gevent: bool = False, lifespan: bool = False) -> list[str]:
    """The command of a server of ``app`` (an ASGI application's path) on ``port``: uvicorn, or with ``gevent`` one
    gunicorn gevent worker of ``testproject.wsgi`` (``app`` then unused)."""
    if gevent:
        argv = [sys.executable, "-m", "gunicorn", "testproject.wsgi:application", "--worker-class", "gevent"]
        argv += ["--bind", f"127.0.0.1:{port}", "--workers", "1", "--worker-connections", "20000"]
        return [*argv, "--log-level", "warning", "--backlog", "4096", "--graceful-timeout", "5"]
    argv = [sys.executable, "-m", "uvicorn", app, "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--log-level", "warning", "--backlog", "4096", "--timeout-graceful-shutdown", "5"]
    return [*argv, "--lifespan", "on" if lifespan else "off"]


@contextlib.contextmanager
def uvicorn_server(
    kind: str, n: int, env: dict[str, str], gevent: bool = False
) -> Iterator[tuple[subprocess.Popen[bytes], int, int]]:
    """``kind``'s server on a free port, and the pid of the process that serves: uvicorn, or for ours with
    ``gevent`` one gunicorn gevent worker (``testproject.wsgi``)."""
    port = free_port()
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    gevent = gevent and kind == "ours"
    log = RESULTS_DIR / f"listeners-{kind}{'-gevent' if gevent else ''}-{n}.log"
    argv = server_argv(APPS[kind], port, gevent=gevent)
    with log.open("wb") as log_file:
        process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 60
            while True:
                if process.poll() is not None:
                    raise RuntimeError(f"{kind} server exited with {process.returncode}:\n{log.read_text()}")
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{kind} server did not start:\n{log.read_text()}") from None
                    time.sleep(0.1)
            yield process, port, gunicorn_worker(process.pid) if gevent else process.pid
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=15)
            errors = [line for line in log.read_text(errors="replace").splitlines() if "Traceback" in line]
            if errors:
                print(f"  note: the {kind} server logged {len(errors)} traceback(s), see {log}")


# The load generator ---------------------------------------------------------------------------------------


@dataclass
class Cohort:
    """Listeners opened together; ``changed`` is set whenever one of them receives an update or is closed."""

    listeners: list[Listener] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    refused: int = 0

    def all_have(self, count: int) -> bool:
        """Every listener still open has received ``count`` updates."""
        return all(listener.ended or len(listener.received) >= count for listener in self.listeners)

    async def wait_for(self, count: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not self.all_have(count):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), min(remaining, 0.1))
        return True

    @property
    def ended_early(self) -> int:
        return sum(1 for listener in self.listeners if listener.ended)

    async def close(self) -> None:
        for listener in self.listeners:
            listener.close()
        await asyncio.gather(*(listener.task for listener in self.listeners if listener.task), return_exceptions=True)


class Listener:
    """One open listen stream; ``received`` holds the receipt time of each update event, in order."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, cohort: Cohort) -> None:
        self.reader = reader
        self.writer = writer
        self.cohort = cohort
        self.received: list[float] = []
        self.task: asyncio.Task[None] | None = None
        self.ended = False  # the server closed the stream (or the connection broke) before we did

    async def pump(self, pending: bytes) -> None:
        keep = len(UPDATE_MARK) - 1
        tail = b""
        data = pending
        try:
            while True:
                if data:
                    now = time.perf_counter()
                    buffer = tail + data
                    count = buffer.count(UPDATE_MARK)
                    if count:
                        self.received.extend([now] * count)
                        self.cohort.changed.set()
                    tail = buffer[-keep:]
                data = await self.reader.read(65536)
                if not data:
                    break
        except asyncio.CancelledError:
            return
        except ConnectionError:
            pass
        self.ended = True
        self.cohort.changed.set()

    def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
        self.writer.close()


async def open_listener(port: int, request_id: int, cohort: Cohort, timeout: float) -> Listener | None:
    """Connect, POST ``subscriptions/listen`` and wait for the acknowledgement; ``None`` when refused."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout)
    try:
        writer.write(listen_request(port, request_id))
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
        if b" 200 " not in head.split(b"\r\n", 1)[0]:
            writer.close()
            return None
        buffer = b""
        deadline = time.monotonic() + timeout
        while ACK_MARK not in buffer:
            chunk = await asyncio.wait_for(reader.read(65536), max(0.01, deadline - time.monotonic()))
            if not chunk:
                writer.close()
                return None
            buffer += chunk
    except BaseException:
        writer.close()
        raise
    listener = Listener(reader, writer, cohort)
    after_ack = buffer[buffer.index(ACK_MARK) + len(ACK_MARK) :]
    listener.task = asyncio.ensure_future(listener.pump(after_ack))
    return listener


async def open_cohort(port: int, count: int, concurrency: int, timeout: float, first_id: int = 1) -> Cohort:
    cohort = Cohort()
    gate = asyncio.Semaphore(concurrency)

    async def one(request_id: int) -> None:
        async with gate:
            try:
                listener = await open_listener(port, request_id, cohort, timeout)
            except (OSError, TimeoutError, asyncio.IncompleteReadError):
                listener = None
            if listener is None:
                cohort.refused += 1
            else:
                cohort.listeners.append(listener)

    await asyncio.gather(*(one(first_id + i) for i in range(count)))
    return cohort


class ThreadSampler:
    """The largest ``Threads`` value of a process, sampled every 50 ms while running."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.max = 0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            self.max = max(self.max, proc_status(self.pid)["Threads"])
            await asyncio.sleep(0.05)

    def start(self) -> None:
        self.max = proc_status(self.pid)["Threads"]
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> int:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.max = max(self.max, proc_status(self.pid)["Threads"])
        return self.max


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


# One measurement -----------------------------------------------------------------------------------------


async def measure(kind: str, pid: int, port: int, n: int, args: argparse.Namespace) -> dict[str, Any]:
    from mcp_resources.subscriptions import notify_resource_updated

    def broadcast() -> Awaitable[None]:
        return asyncio.to_thread(notify_resource_updated, WATCHED)

    idle = proc_status(pid)

    # Warm-up: handshakes and one broadcast with a few listeners, so thread pools and allocators have grown.
    warm = await open_cohort(port, args.warmup_listeners, args.concurrency, args.connect_timeout, first_id=10**6)
    if warm.refused or not warm.listeners:
        raise RuntimeError(f"{kind}: warm-up listeners refused ({warm.refused} of {args.warmup_listeners})")
    await broadcast()
    await warm.wait_for(1, args.broadcast_timeout)
    await warm.close()
    await asyncio.sleep(args.settle)
    before = proc_status(pid)

    sampler = ThreadSampler(pid)
    sampler.start()
    t0 = time.perf_counter()
    cohort = await open_cohort(port, n, args.concurrency, args.connect_timeout)
    connect_s = time.perf_counter() - t0
    connected = len(cohort.listeners)
    await asyncio.sleep(args.settle)
    after = proc_status(pid)

    published: list[float] = []
    complete: list[bool] = []
    cpu0 = proc_cpu_seconds(pid)
    for k in range(args.broadcasts):
        published.append(time.perf_counter())
        await broadcast()
        complete.append(await cohort.wait_for(k + 1, args.broadcast_timeout))
        await asyncio.sleep(args.gap)
    cpu_s = proc_cpu_seconds(pid) - cpu0
    threads_max = await sampler.stop()
    end = proc_status(pid)

    ended_early = cohort.ended_early
    # Each receipt belongs to the latest broadcast published before it (broadcasts go one at a time), so a lost
    # broadcast does not shift the others; a listener counts at most one receipt per broadcast.
    per_broadcast: list[list[float]] = [[] for _ in published]
    for listener in cohort.listeners:
        seen: set[int] = set()
        for t in listener.received:
            k = bisect.bisect_right(published, t) - 1
            if k >= 0 and k not in seen:
                seen.add(k)
                per_broadcast[k].append(t - published[k])
    latencies = [latency for received in per_broadcast for latency in received]
    fanout = [max(received) for received in per_broadcast if received]
    lost_broadcasts = [k for k, received in enumerate(per_broadcast) if len(received) < connected]
    await cohort.close()

    expected = connected * args.broadcasts
    result = {
        "server": kind,
        "listeners": n,
        "connected": connected,
        "refused": cohort.refused,
        "ended_by_server": ended_early,
        "connect_s": connect_s,
        "threads_idle": idle["Threads"],
        "threads_before": before["Threads"],
        "threads_after": after["Threads"],
        "threads_max": threads_max,
        "rss_idle_kb": idle["VmRSS"],
        "rss_before_kb": before["VmRSS"],
        "rss_after_kb": after["VmRSS"],
        "rss_end_kb": end["VmRSS"],
        "kb_per_listener": (after["VmRSS"] - before["VmRSS"]) / max(1, connected),
        "kb_per_listener_end": (end["VmRSS"] - before["VmRSS"]) / max(1, connected),
        "broadcasts": args.broadcasts,
        "delivered": len(latencies),
        "expected": expected,
        "complete_broadcasts": sum(complete),
        "incomplete_broadcasts": lost_broadcasts,
        "p50_ms": statistics.median(latencies) * 1e3 if latencies else None,
        # A delivery that never came counts as infinitely late.
        "p99_ms": percentile(latencies + [math.inf] * (expected - len(latencies)), 0.99) * 1e3 if latencies else None,
        "max_ms": max(latencies) * 1e3 if latencies else None,
        "fanout_p50_ms": statistics.median(fanout) * 1e3 if fanout else None,
        "fanout_max_ms": max(fanout) * 1e3 if fanout else None,
        "fanout_ms": [round(f * 1e3, 1) for f in fanout],
        "server_cpu_us_per_delivery": cpu_s / max(1, len(latencies)) * 1e6,
    }
    print(
        f"  {kind:>4} N={n:,}: {connected:,} connected in {connect_s:.1f} s ({cohort.refused} refused); "
        f"threads idle {idle['Threads']}, before {before['Threads']}, with N {after['Threads']}, "
        f"max {threads_max}; RSS {before['VmRSS'] / 1024:.1f} -> {after['VmRSS'] / 1024:.1f} MiB "
        f"({result['kb_per_listener']:.1f} KB/listener, {result['kb_per_listener_end']:.1f} after the broadcasts); "
        f"{ended_early} streams ended by the server, {len(latencies):,}/{expected:,} delivered, "
        f"p50 {fmt_ms(result['p50_ms'])}, "
        f"p99 {fmt_ms(result['p99_ms'])}, max {fmt_ms(result['max_ms'])}, "
        f"server CPU {result['server_cpu_us_per_delivery']:.0f} µs/delivery",
        flush=True,
    )
    return result


def fmt_ms(value: float | None) -> str:
    if value is None:
        return "n/a"
    return "never (deliveries lost)" if math.isinf(value) else f"{value:.1f} ms"


def ratio(ours: float | None, bare: float | None) -> float | None:
    """ours / bare; infinite when only ours lost deliveries, ``None`` when undefined."""
    if not ours or not bare or (math.isinf(ours) and math.isinf(bare)):
        return None
    return ours / bare


async def run_all(args: argparse.Namespace, sizes: list[int], redis_url: str, workdir: Path) -> list[dict[str, Any]]:
    env = server_env(workdir, redis_url)
    runs: list[dict[str, Any]] = []
    kinds = [kind.strip() for kind in args.servers.split(",") if kind.strip()]
    turn = 0
    for n in sizes:
        for round_index in range(args.rounds):
            for kind in kinds[turn % len(kinds) :] + kinds[: turn % len(kinds)]:  # the first server alternates
                flush_redis(redis_url)
                with uvicorn_server(kind, n, env, args.server == "gevent") as (_, port, pid):
                    run = await measure(kind, pid, port, n, args)
                runs.append({**run, "round": round_index})
            turn += 1
    flush_redis(redis_url)
    return runs


def prepare(workdir: Path, redis_url: str) -> None:
    """Migrate the temporary database of ours (the conformance profile has no demo data to load)."""
    env = server_env(workdir, redis_url)
    completed = subprocess.run(
        [sys.executable, str(ROOT / "testproject" / "manage.py"), "migrate", "--verbosity", "0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if completed.returncode != 0:
        raise SystemExit(f"migrate failed:\n{completed.stdout}\n{completed.stderr}")


def raise_fd_limit(needed: int) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def aggregate(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One line per server and N over the rounds: medians of the measures, extremes of the thread counts."""
    lines = []
    for kind, n in sorted({(r["server"], r["listeners"]) for r in runs}, key=lambda key: (key[1], key[0])):
        rounds = [r for r in runs if r["server"] == kind and r["listeners"] == n]

        def med(key: str, rounds: list[dict[str, Any]] = rounds) -> float | None:
            values = [r[key] for r in rounds if r[key] is not None]
            return statistics.median(values) if values else None

        lines.append(
            {
                "server": kind,
                "listeners": n,
                "rounds": len(rounds),
                "connected": min(r["connected"] for r in rounds),
                "refused": sum(r["refused"] for r in rounds),
                "ended_by_server": sum(r["ended_by_server"] for r in rounds),
                "delivered": sum(r["delivered"] for r in rounds),
                "expected": sum(r["expected"] for r in rounds),
                "connect_s": med("connect_s"),
                "threads_before": min(r["threads_before"] for r in rounds),
                "threads_max": max(r["threads_max"] for r in rounds),
                "rss_before_kb": med("rss_before_kb"),
                "rss_after_kb": med("rss_after_kb"),
                "kb_per_listener": med("kb_per_listener"),
                "kb_per_listener_end": med("kb_per_listener_end"),
                "p50_ms": med("p50_ms"),
                "p99_ms": med("p99_ms"),
                "p99_ms_rounds": [r["p99_ms"] for r in rounds],
                "max_ms": max((r["max_ms"] for r in rounds if r["max_ms"] is not None), default=None),
                "server_cpu_us_per_delivery": med("server_cpu_us_per_delivery"),
            }
        )
    return lines


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    lines = aggregate(runs)
    by = {(line["server"], line["listeners"]): line for line in lines}
    points = []
    for n in sorted({line["listeners"] for line in lines}):
        ours, bare = by.get(("ours", n)), by.get(("bare", n))
        if not ours or not bare:
            continue
        points.append(
            {
                "listeners": n,
                "threads_ratio": ours["threads_max"] / ours["threads_before"],
                "threads_before": ours["threads_before"],
                "threads_max": ours["threads_max"],
                "kb_per_listener": ours["kb_per_listener"],
                "bare_kb_per_listener": bare["kb_per_listener"],
                "p50_ratio": ratio(ours["p50_ms"], bare["p50_ms"]),
                "p99_ratio": ratio(ours["p99_ms"], bare["p99_ms"]),
                "p99_ratio_rounds": [
                    ratio(o, b) for o, b in zip(ours["p99_ms_rounds"], bare["p99_ms_rounds"], strict=False)
                ],
                "ours_p99_ms": ours["p99_ms"],
                "bare_p99_ms": bare["p99_ms"],
            }
        )
    ours_threads = {line["threads_max"] for line in lines if line["server"] == "ours"}
    return {"servers": lines, "points": points, "threads_same_for_every_n": len(ours_threads) == 1}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--listeners", default="1000", help="comma-separated listener counts (default 1000)")
    parser.add_argument("--full", action="store_true", help="also 5,000 listeners")
    parser.add_argument("--broadcasts", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3, help="fresh servers per N and server; medians are reported")
    parser.add_argument("--gap", type=float, default=0.5, help="seconds between two broadcasts")
    parser.add_argument("--concurrency", type=int, default=64, help="handshakes under way at once")
    parser.add_argument("--warmup-listeners", type=int, default=50)
    parser.add_argument("--settle", type=float, default=2.0, help="seconds before reading memory")
    parser.add_argument("--connect-timeout", type=float, default=30.0)
    parser.add_argument("--broadcast-timeout", type=float, default=60.0)
    parser.add_argument("--deadline", type=float, default=1500.0, help="seconds for the whole run")
    parser.add_argument("--redis-db", type=int, default=13, help="the Redis database to use (flushed)")
    parser.add_argument("--servers", default="ours,bare", help="which servers to measure (default: ours,bare)")
    parser.add_argument(
        "--server",
        choices=["uvicorn", "gevent"],
        default="uvicorn",
        help="how ours is served: uvicorn (default), or one gunicorn gevent worker (the bare reader stays on uvicorn)",
    )
    args = parser.parse_args()

    sizes = [int(s) for s in args.listeners.split(",") if s.strip()]
    if args.full and 5000 not in sizes:
        sizes.append(5000)
    redis_url = f"redis://127.0.0.1:6379/{args.redis_db}"
    limit = raise_fd_limit(max(sizes) + args.warmup_listeners + 1024)
    if limit < max(sizes) + 256:
        raise SystemExit(f"RLIMIT_NOFILE is {limit}: too low for {max(sizes):,} listeners")
    try:
        flush_redis(redis_url)
    except Exception as exc:
        raise SystemExit(f"Redis is not reachable at {redis_url} ({type(exc).__name__}: {exc})") from exc

    os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
    os.environ["MCP_REDIS_URL"] = redis_url
    with tempfile.TemporaryDirectory(prefix="mcp-listeners-") as tmp:
        workdir = Path(tmp)
        os.environ["MCP_DEMO_DB"] = str(workdir / "listeners.sqlite3")
        import django

        django.setup()
        prepare(workdir, redis_url)
        print(
            f"item 6: listeners on one {args.server} worker, ours vs a bare reader of the Redis log, N = "
            f"{', '.join(f'{n:,}' for n in sizes)}, {args.broadcasts} broadcasts, Redis db {args.redis_db}",
            flush=True,
        )
        runs = asyncio.run(asyncio.wait_for(run_all(args, sizes, redis_url, workdir), args.deadline))

    summary = summarize(runs)
    from benchmarks.run import git_state

    for p in summary["points"]:
        n = p["listeners"]
        print(
            f"N={n:,}: threads with N / before {p['threads_max']}/{p['threads_before']} = {p['threads_ratio']:.2f}x "
            f"(target <= {THREADS_TARGET:g}x: {'met' if p['threads_ratio'] <= THREADS_TARGET else 'MISSED'}); "
            f"{p['kb_per_listener']:.1f} KB/listener (bare {p['bare_kb_per_listener']:.1f}; target <= "
            f"{KB_TARGET:g} KB: {'met' if p['kb_per_listener'] <= KB_TARGET else 'MISSED'}); p99 ours/bare "
            f"{fmt_ms(p['ours_p99_ms'])}/{fmt_ms(p['bare_p99_ms'])} = "
            + (
                "n/a"
                if p["p99_ratio"] is None
                else f"{p['p99_ratio']:.2f}x (target <= {P99_TARGET:g}x: "
                f"{'met' if p['p99_ratio'] <= P99_TARGET else 'MISSED'})"
            )
            + " (per round: "
            + ", ".join("n/a" if r is None else f"{r:.2f}x" for r in p["p99_ratio_rounds"])
            + ")"
        )
    print(f"ours: same thread count at every N: {summary['threads_same_for_every_n']}")
    write_result(
        "listeners",
        {
            "runs": runs,
            **summary,
            "targets": {"threads_ratio": THREADS_TARGET, "kb_per_listener": KB_TARGET, "p99_ratio": P99_TARGET},
            "broadcasts": args.broadcasts,
            "fd_limit": limit,
            "commit": git_state(),
        },
    )
    for r in runs:
        if r["delivered"] < r["expected"] or r["refused"] or r["ended_by_server"]:
            print(
                f"!!! {r['server']} N={r['listeners']:,}: {r['refused']} refused, {r['ended_by_server']} streams "
                f"ended by the server, {r['delivered']:,}/{r['expected']:,} delivered"
            )


if __name__ == "__main__":
    main()
