"""The soak: a real uvicorn server of the demo under steady mixed load and 1,000 listeners for ten minutes.

``make soak`` (outside ``make test``; ``make soak SOAK_SECONDS=120`` for a short run). One uvicorn process serves
``testproject.asgi:application`` with ``benchmarks.settings_soak`` (the demo; PostgreSQL database
``MCP_BENCH_PGDATABASE``, default ``mcp_soak``, created afresh and dropped afterwards; Django's pool; the Redis
log and cache of ``MCP_REDIS_URL``, a Redis database claimed as the test suite claims them). Three kinds
of clients, each its own process, run at once for ``--seconds``:

- **load** (``--rate`` requests a second, open loop: request ``k`` is due at ``start + k / rate`` whatever happened
  to the earlier ones, so a slow server shows as latency, not as fewer requests): ``resources/read`` of one of the
  caller's documents (50%), ``resources/list`` (35%, half of them following the previous page's cursor) and
  ``resources/templates/list`` (15%), with the bearer tokens of ``--users`` users. Latency is measured from the
  moment a request was due; an error is any answer but a 200 holding a JSON-RPC result, or no answer.
- **listeners** (this process): ``--listeners`` ``subscriptions/listen`` streams, spread over ``--documents``
  documents of those users, each stream subscribed to one document and reading everything it is sent.
- **updater**: saves one of those documents every ``1 / --update-rate`` seconds through the ORM (``post_save``
  publishes the change through Redis), and records when.

Every ``--sample-seconds`` the server's RSS, threads and open file descriptors are read from ``/proc``. At the end
the updater stops, the listeners get ``--drain`` seconds to receive what is on its way, and the report gives:
requests, errors, p50/p99 latency, notifications expected (each update times the listeners of its document that
were open) against received, publish-to-receive p50/p99, listeners refused or ended by the server, the server's
RSS slope after ``--warmup`` seconds (MB/min, least squares), its threads and descriptors over time, and the
tracebacks in its log. Results go to ``benchmarks/results/soak.json``; docs/performance.md ("Soak") has the last
figures, by hand.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import math
import os
import random
import re
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_listeners import proc_status, raise_fd_limit
from benchmarks.common import PROTOCOL_VERSION, ROOT, python_path, write_result
from benchmarks.serving import Contender, Servers, asgi_database, free_port, stop_on_sigterm, uvicorn_argv, wait_up

SETTINGS = "benchmarks.settings_soak"
META = {"io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION, "io.modelcontextprotocol/clientCapabilities": {}}
UPDATED = b'"method":"notifications/resources/updated"'
URI_IN_EVENT = re.compile(rb'"uri":"(learn://documents/\d+)"')
REDIS_CLAIMS_DB = 15  # the test suite's claims (tests/live.py): databases 1-14 are taken one test session each


# Environment ---------------------------------------------------------------------------------------------------


def env_default(name: str, default: str) -> str:
    return os.environ.get(name) or default


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=float(env_default("SOAK_SECONDS", "600")))
    parser.add_argument("--rate", type=float, default=float(env_default("SOAK_RATE", "50")), help="requests/s")
    parser.add_argument("--listeners", type=int, default=int(env_default("SOAK_LISTENERS", "1000")))
    parser.add_argument("--update-rate", type=float, default=float(env_default("SOAK_UPDATE_RATE", "1")))
    parser.add_argument("--users", type=int, default=5)
    parser.add_argument("--documents", type=int, default=20, help="documents the listeners watch (spread evenly)")
    parser.add_argument("--documents-per-user", type=int, default=200, help="each user's inventory")
    parser.add_argument("--warmup", type=float, default=None, help="seconds left out of the RSS slope (default: 20%%)")
    parser.add_argument("--sample-seconds", type=float, default=10.0)
    parser.add_argument("--drain", type=float, default=15.0, help="seconds for notifications under way at the end")
    parser.add_argument("--workers", type=int, default=32, help="load threads (open loop: enough to keep up)")
    parser.add_argument("--concurrency", type=int, default=64, help="listen handshakes under way at once")
    parser.add_argument("--role", choices=["main", "load", "updater"], default="main", help=argparse.SUPPRESS)
    parser.add_argument("--config", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.warmup is None:
        args.warmup = min(120.0, args.seconds * 0.2)
    return args


@contextlib.contextmanager
def claimed_redis_database() -> Iterator[str]:
    """A Redis database no test session holds (the claim protocol of tests/live.py), empty before and after."""
    import redis

    claims = redis.Redis(host="127.0.0.1", port=6379, db=REDIS_CLAIMS_DB, socket_connect_timeout=3)
    holder = f"soak:{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
    for db in range(1, REDIS_CLAIMS_DB):
        key = f"mcp-tests:redis-db:{db}"
        if claims.set(key, holder, nx=True, ex=3 * 3600):
            break
    else:
        raise SystemExit("every Redis database 1-14 is held by a test session")
    client = redis.Redis(host="127.0.0.1", port=6379, db=db)
    try:
        client.flushdb()
        yield f"redis://127.0.0.1:6379/{db}"
    finally:
        client.flushdb()
        client.close()
        if claims.get(key) == holder.encode():
            claims.delete(key)
        claims.close()


def server_env(redis_url: str, port: int, extra: dict[str, str] | None = None) -> dict[str, str]:
    keep_out = ("MCP_TEST_DB", "PGDATABASE", "MCP_DEMO_DB", "DJANGO_SETTINGS_MODULE", "DJANGO_DEBUG", "MCP_REDIS_URL")
    env = {key: value for key, value in os.environ.items() if key not in keep_out}
    env.update(
        DJANGO_SETTINGS_MODULE=SETTINGS,
        PYTHONPATH=python_path(),
        MCP_BENCH_DB="postgres",
        MCP_BENCH_PGDATABASE=os.environ.get("MCP_BENCH_PGDATABASE", "mcp_soak"),
        MCP_REDIS_URL=redis_url,
        MCP_RESOURCE_URI=f"http://127.0.0.1:{port}/mcp",
        **asgi_database(),
        **(extra or {}),
    )
    env.setdefault("MCP_BENCH_CURSOR_KEY", secrets.token_urlsafe(32))
    return env


def prepare_database(env: dict[str, str], args: argparse.Namespace, resource: str) -> dict[str, Any]:
    """Create and migrate the database, add the users and their documents, mint their tokens (in a child process)."""
    os.environ["MCP_BENCH_PGDATABASE"] = env["MCP_BENCH_PGDATABASE"]
    from benchmarks import fixture

    fixture.create_database()
    manage = [sys.executable, str(ROOT / "testproject" / "manage.py")]
    subprocess.run([*manage, "migrate", "--verbosity", "0"], cwd=ROOT, env=env, check=True, timeout=600)
    code = (
        "import json\n"
        "from django.contrib.auth import get_user_model\n"
        "from mcp_resources.auth.tokens import issue_access_token\n"
        "from testproject.library.models import Document\n"
        f"users, per_user, resource, lifetime = {args.users}, {args.documents_per_user}, {resource!r}, "
        f"{int(args.seconds + 7200)}\n"
        "out = []\n"
        "for i in range(users):\n"
        "    user = get_user_model().objects.create_user(f'soak{i}', password=None)\n"
        "    docs = Document.objects.bulk_create(\n"
        "        [Document(owner=user, title=f'soak {i} doc {j}', body=f'body {j}') for j in range(per_user)])\n"
        "    token = issue_access_token(user, 'documents:read', [resource], lifetime, 'soak')\n"
        "    out.append({'user': user.username, 'token': token, 'documents': [d.pk for d in docs]})\n"
        "print('SOAK-USERS ' + json.dumps(out))\n"
    )
    done = subprocess.run(
        [*manage, "shell", "--no-imports", "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    line = next(line for line in done.stdout.splitlines() if line.startswith("SOAK-USERS "))
    return {"users": json.loads(line[len("SOAK-USERS ") :])}


# Wire ----------------------------------------------------------------------------------------------------------


def rpc_body(method: str, params: dict[str, Any], request_id: int = 1) -> bytes:
    message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {**params, "_meta": META}}
    return json.dumps(message, separators=(",", ":")).encode()


def rpc_headers(method: str, token: str, name: str | None = None) -> dict[str, str]:
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": PROTOCOL_VERSION,
        "Mcp-Method": method,
        "Authorization": f"Bearer {token}",
    }
    if name is not None:
        headers["Mcp-Name"] = name
    return headers


def listen_request(port: int, token: str, uri: str, request_id: int) -> bytes:
    body = rpc_body("subscriptions/listen", {"notifications": {"resourceSubscriptions": [uri]}}, request_id)
    headers = rpc_headers("subscriptions/listen", token)
    head = f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {len(body)}\r\n"
    head += "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    return head.encode() + b"\r\n" + body


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


# The load process ----------------------------------------------------------------------------------------------


def run_load(config: dict[str, Any]) -> None:
    """Open-loop mixed requests at ``rate`` for ``seconds``; prints one JSON object."""
    port, rate, seconds, workers = config["port"], config["rate"], config["seconds"], config["workers"]
    users = config["users"]
    start = time.time() + 1.0
    total = int(rate * seconds)
    lock = threading.Lock()
    results: dict[str, Any] = {"latency": [], "service": [], "errors": 0, "kinds": {}, "first_errors": []}
    per_minute: dict[int, list[int]] = {}

    def one(conn: http.client.HTTPConnection, rng: random.Random, cursors: dict[str, str]) -> tuple[str, bool, str]:
        user = rng.choice(users)
        roll = rng.random()
        if roll < 0.5:
            uri = f"learn://documents/{rng.choice(user['documents'])}"
            kind, body = "read", rpc_body("resources/read", {"uri": uri})
            headers = rpc_headers("resources/read", user["token"], uri)
        elif roll < 0.85:
            params = {}
            cursor = cursors.get(user["user"])
            if cursor and rng.random() < 0.5:
                params["cursor"] = cursor
            kind, body = "list", rpc_body("resources/list", params)
            headers = rpc_headers("resources/list", user["token"])
        else:
            kind, body = "templates", rpc_body("resources/templates/list", {})
            headers = rpc_headers("resources/templates/list", user["token"])
        conn.request("POST", "/mcp", body, headers)
        response = conn.getresponse()
        data = response.read()
        if response.will_close:
            conn.close()
        good = response.status == 200 and b'"result"' in data
        if good and kind == "list":
            match = re.search(rb'"nextCursor":"([^"]+)"', data)
            if match:
                cursors[user["user"]] = match.group(1).decode()
            else:
                cursors.pop(user["user"], None)
        return kind, good, "" if good else f"{kind}: HTTP {response.status} {data[:200]!r}"

    def worker(index: int) -> None:
        rng = random.Random(index)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        cursors: dict[str, str] = {}
        latency, service, errors, kinds, firsts = [], [], 0, {}, []
        minutes: dict[int, list[int]] = {}
        for k in range(index, total, workers):
            due = start + k / rate
            delay = due - time.time()
            if delay > 0:
                time.sleep(delay)
            sent = time.time()
            try:
                kind, good, error = one(conn, rng, cursors)
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                kind, good, error = "?", False, f"{type(exc).__name__}: {exc}"
            done = time.time()
            minute = int((due - start) // 60)
            counts = minutes.setdefault(minute, [0, 0])
            counts[0] += 1
            kinds[kind] = kinds.get(kind, 0) + 1
            if good:
                latency.append(done - due)
                service.append(done - sent)
            else:
                errors += 1
                counts[1] += 1
                if len(firsts) < 3:
                    firsts.append(error)
        conn.close()
        with lock:
            results["latency"] += latency
            results["service"] += service
            results["errors"] += errors
            for kind, count in kinds.items():
                results["kinds"][kind] = results["kinds"].get(kind, 0) + count
            results["first_errors"] += firsts[: max(0, 5 - len(results["first_errors"]))]
            for minute, (count, failed) in minutes.items():
                slot = per_minute.setdefault(minute, [0, 0])
                slot[0] += count
                slot[1] += failed

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    latency, service = results["latency"], results["service"]
    print(
        json.dumps(
            {
                "requests": total,
                "ok": len(latency),
                "errors": results["errors"],
                "kinds": results["kinds"],
                "first_errors": results["first_errors"],
                "rate_asked": rate,
                "seconds": seconds,
                "p50_ms": (percentile(latency, 0.5) or 0) * 1e3,
                "p99_ms": (percentile(latency, 0.99) or 0) * 1e3,
                "max_ms": max(latency, default=0) * 1e3,
                "service_p50_ms": (percentile(service, 0.5) or 0) * 1e3,
                "service_p99_ms": (percentile(service, 0.99) or 0) * 1e3,
                "per_minute": {str(m): {"requests": c, "errors": e} for m, (c, e) in sorted(per_minute.items())},
            }
        )
    )


# The updater process -------------------------------------------------------------------------------------------


def run_updater(config: dict[str, Any]) -> None:
    """Save one watched document every ``1 / update_rate`` seconds until SIGTERM; prints the updates as JSON."""
    import django

    django.setup()
    from testproject.library.models import Document

    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stopping.set())
    documents = config["documents"]
    interval = 1.0 / config["update_rate"]
    updates: list[tuple[float, int]] = []
    failures: list[str] = []
    start = time.time()
    k = 0
    while not stopping.is_set():
        due = start + k * interval
        delay = due - time.time()
        if delay > 0 and stopping.wait(delay):
            break
        pk = documents[k % len(documents)]
        published = time.time()
        try:
            document = Document.objects.get(pk=pk)
            document.body = f"update {k}"
            document.save(update_fields=["body"])
            updates.append((published, pk))
        except Exception as exc:
            if len(failures) < 5:
                failures.append(f"{type(exc).__name__}: {exc}")
        k += 1
    print(json.dumps({"updates": updates, "failures": failures}))


# Listeners (this process) --------------------------------------------------------------------------------------


@dataclass
class Listener:
    uri: str
    opened_at: float = 0.0
    ended_at: float | None = None  # the server ended the stream (or the connection broke)
    received: list[float] = field(default_factory=list)
    task: asyncio.Task[None] | None = None
    writer: asyncio.StreamWriter | None = None

    async def pump(self, reader: asyncio.StreamReader, pending: bytes) -> None:
        buffer = pending
        try:
            while True:
                while b"\r\n\r\n" in buffer:
                    frame, buffer = buffer.split(b"\r\n\r\n", 1)
                    if UPDATED in frame:
                        match = URI_IN_EVENT.search(frame)
                        if match and match.group(1).decode() == self.uri:
                            self.received.append(time.time())
                data = await reader.read(65536)
                if not data:
                    break
                buffer += data
        except asyncio.CancelledError:
            return
        except ConnectionError:
            pass
        self.ended_at = time.time()


async def open_listener(port: int, token: str, uri: str, request_id: int, timeout: float) -> Listener | None:
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout)
    try:
        writer.write(listen_request(port, token, uri, request_id))
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
        if b" 200 " not in head.split(b"\r\n", 1)[0]:
            writer.close()
            return None
        buffer = b""
        while b"notifications/subscriptions/acknowledged" not in buffer:
            chunk = await asyncio.wait_for(reader.read(65536), timeout)
            if not chunk:
                writer.close()
                return None
            buffer += chunk
    except BaseException:
        writer.close()
        raise
    listener = Listener(uri, opened_at=time.time(), writer=writer)
    rest = buffer.split(b"notifications/subscriptions/acknowledged", 1)[1]
    rest = rest.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in rest else b""
    listener.task = asyncio.ensure_future(listener.pump(reader, rest))
    return listener


async def open_listeners(port: int, plan: list[tuple[str, str]], concurrency: int) -> tuple[list[Listener], int]:
    gate = asyncio.Semaphore(concurrency)
    opened: list[Listener] = []
    refused = 0

    async def one(index: int, token: str, uri: str) -> None:
        nonlocal refused
        async with gate:
            try:
                listener = await open_listener(port, token, uri, index + 1, 60)
            except (OSError, TimeoutError, asyncio.IncompleteReadError):
                listener = None
        if listener is None:
            refused += 1
        else:
            opened.append(listener)

    await asyncio.gather(*(one(i, token, uri) for i, (token, uri) in enumerate(plan)))
    return opened, refused


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


async def sample(pid: int, every: float, samples: list[dict[str, float]], t0: float) -> None:
    while True:
        with contextlib.suppress(OSError):
            status = proc_status(pid)
            samples.append(
                {
                    "t": round(time.time() - t0, 1),
                    "rss_mb": round(status["VmRSS"] / 1024, 2),
                    "threads": status["Threads"],
                    "fds": fd_count(pid),
                }
            )
        await asyncio.sleep(every)


def slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of ``(x, y)`` points."""
    if len(points) < 3:
        return None
    mean_x = statistics.fmean(x for x, _ in points)
    mean_y = statistics.fmean(y for _, y in points)
    var = sum((x - mean_x) ** 2 for x, _ in points)
    if var == 0:
        return None
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / var


def deliveries(listeners: list[Listener], updates: list[tuple[float, int]], until: float) -> dict[str, Any]:
    """Expected (each update of a document times its listeners open then) against received, and latencies."""
    by_uri: dict[str, list[float]] = {}
    for published, pk in updates:
        by_uri.setdefault(f"learn://documents/{pk}", []).append(published)
    expected = received = 0
    latencies: list[float] = []
    for listener in listeners:
        times = sorted(by_uri.get(listener.uri, []))
        end = listener.ended_at if listener.ended_at is not None else until
        expected += sum(1 for t in times if listener.opened_at <= t <= end)
        received += len(listener.received)
        for got in listener.received:
            earlier = [t for t in times if t <= got + 0.05]  # clocks of two processes on one machine
            if earlier:
                latencies.append(max(0.0, got - earlier[-1]))
    return {
        "expected": expected,
        "received": received,
        "lost": max(0, expected - received),
        "delivered_share": received / expected if expected else None,
        "latency_p50_ms": (percentile(latencies, 0.5) or 0) * 1e3,
        "latency_p99_ms": (percentile(latencies, 0.99) or 0) * 1e3,
    }


async def soak(args: argparse.Namespace, env: dict[str, str], port: int, pid: int, prepared: dict[str, Any]) -> Any:
    users = prepared["users"]
    per_user = max(1, math.ceil(args.documents / len(users)))
    watched = [(user["token"], f"learn://documents/{pk}") for user in users for pk in user["documents"][:per_user]][
        : args.documents
    ]
    plan = [watched[i % len(watched)] for i in range(args.listeners)]
    t0 = time.time()
    samples: list[dict[str, float]] = []
    sampler = asyncio.ensure_future(sample(pid, args.sample_seconds, samples, t0))
    listeners, refused = await open_listeners(port, plan, args.concurrency)
    connect_s = time.time() - t0
    print(f"  {len(listeners):,} listeners open in {connect_s:.1f} s ({refused} refused)", flush=True)

    watched_pks = [int(uri.rsplit("/", 1)[1]) for _, uri in watched]
    updater_config = {"documents": watched_pks, "update_rate": args.update_rate}
    updater = subprocess.Popen(
        [sys.executable, __file__, "--role", "updater", "--config", json.dumps(updater_config)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    load_config = {"port": port, "rate": args.rate, "seconds": args.seconds, "workers": args.workers, "users": users}
    load = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--role",
        "load",
        "--config",
        json.dumps(load_config),
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
    )
    load_out, _ = await load.communicate()
    updater.send_signal(signal.SIGTERM)
    updater_out, _ = await asyncio.to_thread(updater.communicate, None, 60)
    updated = json.loads(updater_out)
    stopped = time.time()
    await asyncio.sleep(args.drain)
    sampler.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await sampler
    for listener in listeners:
        if listener.task is not None:
            listener.task.cancel()
        if listener.writer is not None:
            listener.writer.close()
    await asyncio.gather(*(listener.task for listener in listeners if listener.task), return_exceptions=True)
    ended = [listener for listener in listeners if listener.ended_at is not None]
    return {
        "load": json.loads(load_out),
        "updates": len(updated["updates"]),
        "update_failures": updated["failures"],
        "notifications": deliveries(listeners, updated["updates"], stopped + args.drain),
        "listeners_open": len(listeners),
        "listeners_refused": refused,
        "listeners_ended_by_server": len(ended),
        "listeners_connect_s": round(connect_s, 1),
        "samples": samples,
        "t0": t0,
        "load_stopped_s": round(stopped - t0, 1),
    }


def summarize_samples(samples: list[dict[str, float]], warmup: float, until: float) -> dict[str, Any]:
    """RSS slope, threads and descriptors between the end of the warm-up and the end of the load."""
    steady = [s for s in samples if warmup <= s["t"] <= until]
    rss_slope = slope([(s["t"] / 60, s["rss_mb"]) for s in steady])
    return {
        "rss_slope_mb_per_min": rss_slope,
        "rss_mb_first_last": [steady[0]["rss_mb"], steady[-1]["rss_mb"]] if steady else None,
        "rss_mb_max": max((s["rss_mb"] for s in samples), default=None),
        "threads_min_max": [min(s["threads"] for s in steady), max(s["threads"] for s in steady)] if steady else None,
        "fds_min_max": [min(s["fds"] for s in steady), max(s["fds"] for s in steady)] if steady else None,
    }


def main() -> None:
    args = parse_args()
    if args.role != "main":
        (run_load if args.role == "load" else run_updater)(json.loads(args.config))
        return
    stop_on_sigterm()
    raise_fd_limit(args.listeners + 2048)
    load_before = os.getloadavg()
    port = free_port()
    with claimed_redis_database() as redis_url:
        env = server_env(redis_url, port)
        env["MCP_BENCH_CURSOR_KEY"] = env.get("MCP_BENCH_CURSOR_KEY") or secrets.token_urlsafe(32)
        print(
            f"soak: {args.seconds:.0f} s, {args.rate:g} requests/s, {args.listeners:,} listeners on "
            f"{args.documents} documents, {args.update_rate:g} updates/s; database {env['MCP_BENCH_PGDATABASE']}, "
            f"{redis_url}",
            flush=True,
        )
        prepared = prepare_database(env, args, env["MCP_RESOURCE_URI"])
        argv = [*uvicorn_argv("testproject.asgi:application", port), "--backlog", "4096"]
        argv += ["--timeout-graceful-shutdown", "5"]
        contender = Contender(name="soak", argv=argv, env=env, port=port)
        servers = Servers()
        try:
            servers.start(contender)
            wait_up(servers, contender)
            pid = servers.procs["soak"].pid
            run = asyncio.run(soak(args, env, port, pid, prepared))
            log = servers.log_text("soak")
        finally:
            servers.stop()
            from benchmarks import fixture

            with contextlib.suppress(Exception):
                fixture.drop_database()
    from benchmarks.run import git_state

    samples = run.pop("samples")
    result = {
        "config": {k: v for k, v in vars(args).items() if k not in ("role", "config")},
        "commit": git_state(),
        "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(run.pop("t0"))),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        **run,
        **summarize_samples(samples, args.warmup, run["load_stopped_s"]),
        "server_tracebacks": log.count("Traceback"),
        "samples": samples,
    }
    path = write_result("soak", result)
    print_report(result)
    print(f"written: {path}")


def print_report(r: dict[str, Any]) -> None:
    load, notes = r["load"], r["notifications"]
    share = notes["delivered_share"]
    print(
        f"requests: {load['requests']:,} asked at {load['rate_asked']:g}/s, {load['ok']:,} ok, {load['errors']:,} "
        f"errors {load['first_errors'][:2]}; p50 {load['p50_ms']:.1f} ms, p99 {load['p99_ms']:.1f} ms "
        f"(service p50 {load['service_p50_ms']:.1f}, p99 {load['service_p99_ms']:.1f}); kinds {load['kinds']}\n"
        f"listeners: {r['listeners_open']:,} open ({r['listeners_refused']} refused, "
        f"{r['listeners_ended_by_server']} ended by the server); updates {r['updates']:,}; notifications expected "
        f"{notes['expected']:,}, received {notes['received']:,}"
        + (f" ({share:.1%})" if share is not None else "")
        + f"; publish-to-receive p50 {notes['latency_p50_ms']:.0f} ms, p99 {notes['latency_p99_ms']:.0f} ms\n"
        f"server: RSS slope {r['rss_slope_mb_per_min']} MB/min after warm-up, RSS first/last "
        f"{r['rss_mb_first_last']} MB (max {r['rss_mb_max']}), threads {r['threads_min_max']}, fds "
        f"{r['fds_min_max']}; {r['server_tracebacks']} tracebacks in its log; load average "
        f"{r['load_average_before']} -> {r['load_average_after']}",
        flush=True,
    )


if __name__ == "__main__":
    main()
