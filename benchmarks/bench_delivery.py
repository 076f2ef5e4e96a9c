"""Delivery (issues 13 and 28): notifications delivered by ``subscriptions/listen`` streams on one uvicorn worker,
against a bare reader of the same engine (Redis Streams), while documents change at a steady rate.

Two servers, one uvicorn process each (no reload, one worker), both on the Redis log
(``MCP_REDIS_URL=redis://127.0.0.1:6379/<--redis-db>``; the benchmark owns that database and flushes it before
every server it starts), both with ``benchmarks.settings_delivery`` (the demo's settings, ``STREAMS_PER_CALLER``
raised):

- ours: ``testproject.asgi:application``, the demo as deployed: real OAuth callers (django-oauth-toolkit tokens,
  scope ``documents:read``), each listener's token checked on its listen and its access to the document re-checked
  as the server does before each ``updated`` notification, on a fresh migrated SQLite file;
- bare: ``benchmarks.bare_reader:application``, one ``XREAD BLOCK`` task on the same Redis stream writing each
  ``updated`` event to the requests whose listen body asks for its URI: no Django, no authentication, no access
  check, no limits, the floor of Redis Streams and the ASGI server.

Data: ``--documents`` (20) documents of the demo's ``Document`` model owned round-robin by ``--users`` (4) users.
N listeners are spread evenly over the documents (listener ``i`` watches document ``i % 20``) and each carries its
document owner's token: ``--tokens shared`` (default) one token per user, ``--tokens distinct`` one token per
listener (the worst case for a server that batches its access checks by caller). Each listener POSTs
``subscriptions/listen`` (protocol 2026-07-28, ``resourceSubscriptions: [learn://documents/<pk>]``), raw asyncio
streams on loopback, a bounded number of handshakes at once, and waits for the acknowledgement.

For each N (500 and 5,000) and each rate R of its sweep (500: 10, 20, 40, ... updates/s; 5,000: 1, 2, 4, ...),
for each server (the first alternating), in a fresh server process: warm up (one listener per document and one
update of each), open the N listeners, then a publisher process (Django on the same settings and layer) calls the
public ``mcp_resources.subscriptions.notify_resource_updated(uri)`` R times a second for ``--duration`` seconds,
round-robin over the documents (open loop: publication ``k`` is due at ``start + k / R``; ``--publisher-lanes``
at once, each owning a fixed subset of the documents so that the publications of one URI keep their order; from
the worker threads of one event loop, as a view of an ASGI worker publishes, or ``--publisher-mode threads``), and
records the time of every publication (``CLOCK_MONOTONIC``, which every process of the machine shares). Once it is
done the listeners get up to ``--drain`` seconds (less once every listener has what it was owed or has been ended,
or after ``--quiet`` seconds without a receipt or an end) for what is still on its way; a delivery later than that
counts as lost.

Expected notifications: each publication times the listeners of its URI (all of them are open before the first
publication). A stream's receipts are matched to its URI's publications in order (streams deliver in order; a
receipt before its publication is counted as an extra); a lost delivery counts as infinitely late, as in item 6,
and after a loss the later receipts of that stream are matched one publication early (latency over-estimated, never
under). Per run: delivered fraction, streams ended by the server and how many of those ended with a final JSON-RPC
result (an event carrying ``"result"``, the documented signal to resynchronise), p50/p99 publish-to-receive
latency, the publisher's lateness, server CPU per delivery; per N the ratios ours/bare at the target rate, and for
each server the highest rate with 100% delivered and the first rate below (a server is not measured above its
first rate below 100%; the sweep of an N stops once both have fallen, or at its last rate).

Targets (issue 13), on one worker in the same run: at 500 listeners and 10 updates/s, and at 5,000 listeners and
1 update/s, ours delivers 100% of what the bare consumer delivers, with p99 at most 1.5x the bare consumer's.
Everything stops by itself: per-step time-outs and an overall ``--deadline``.
"""

from __future__ import annotations

import argparse
import asyncio
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
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_listeners import (
    flush_redis,
    fmt_ms,
    free_port,
    percentile,
    proc_cpu_seconds,
    proc_status,
    raise_fd_limit,
    ratio,
)
from benchmarks.common import PROTOCOL_VERSION, RESULTS_DIR, ROOT, python_path, write_result

SETTINGS = "benchmarks.settings_delivery"
APPS = {"ours": "testproject.asgi:application", "bare": "benchmarks.bare_reader:application"}
RESOURCE_URI = "http://127.0.0.1:8000/mcp"  # every server's MCP_RESOURCE_URI: the audience the tokens are bound to
URI_TEMPLATE = "learn://documents/{}"
META = {"io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION, "io.modelcontextprotocol/clientCapabilities": {}}
ACK_MARK = b"notifications/subscriptions/acknowledged"
UPDATE_MARK = b"notifications/resources/updated"
RESULT_MARK = b'"result"'
FRAME_END = b"\r\n\r\n"
SWEEPS = {500: [10, 20, 40, 80, 160, 320, 640], 5000: [1, 2, 4, 8, 16, 32, 64]}
TARGET_RATES = {500: 10.0, 5000: 1.0}
DELIVERED_TARGET = 1.0  # ours delivered / bare delivered, at least
P99_TARGET = 1.5  # ours p99 / bare p99, at most
CLOCK = time.CLOCK_MONOTONIC


def now() -> float:
    """The clock of every timestamp here, shared by the processes of one machine (the publisher's too)."""
    return time.clock_gettime(CLOCK)


# Set-up --------------------------------------------------------------------------------------------------


def server_env(workdir: Path, redis_url: str) -> dict[str, str]:
    keep_out = ("MCP_TEST_DB", "PGDATABASE", "MCP_DEMO_DB", "DJANGO_SETTINGS_MODULE", "DJANGO_DEBUG", "MCP_REDIS_URL")
    env = {key: value for key, value in os.environ.items() if key not in keep_out}
    env.update(
        DJANGO_SETTINGS_MODULE=SETTINGS,
        MCP_DEMO_DB=str(workdir / "delivery.sqlite3"),
        MCP_REDIS_URL=redis_url,
        MCP_RESOURCE_URI=RESOURCE_URI,
        PYTHONPATH=python_path(),
    )
    return env


PREPARE = """
import json
from django.contrib.auth import get_user_model
from django.db import transaction
from mcp_resources.auth.tokens import issue_access_token
from testproject.library.models import Document

users_n, documents_n, distinct, resource = {users}, {documents}, {distinct}, {resource!r}
lifetime = 6 * 3600
with transaction.atomic():
    users = [get_user_model().objects.create_user(f"delivery{{i}}", password=None) for i in range(users_n)]
    documents = [
        Document.objects.create(owner=users[j % users_n], title=f"delivery document {{j}}", body="")
        for j in range(documents_n)
    ]
    shared = [issue_access_token(user, "documents:read", [resource], lifetime, "delivery") for user in users]
    # One token per listener (listener i watches document i % documents_n, owned by user (i % documents_n) % users_n)
    per_listener = [
        issue_access_token(users[(i % documents_n) % users_n], "documents:read", [resource], lifetime, "delivery")
        for i in range(distinct)
    ]
out = {{
    "documents": [{{"pk": d.pk, "owner": j % users_n}} for j, d in enumerate(documents)],
    "shared": shared,
    "distinct": per_listener,
}}
print("DELIVERY-DATA " + json.dumps(out))
"""


def prepare(env: dict[str, str], args: argparse.Namespace, max_listeners: int) -> dict[str, Any]:
    """Migrate the temporary SQLite file, create the users, their documents and their tokens."""
    manage = [sys.executable, str(ROOT / "testproject" / "manage.py")]
    migrated = subprocess.run(
        [*manage, "migrate", "--verbosity", "0"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    if migrated.returncode != 0:
        raise SystemExit(f"migrate failed:\n{migrated.stdout}\n{migrated.stderr}")
    code = PREPARE.format(
        users=args.users,
        documents=args.documents,
        distinct=max_listeners if args.tokens == "distinct" else 0,
        resource=RESOURCE_URI,
    )
    done = subprocess.run(
        [*manage, "shell", "--no-imports", "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )
    if done.returncode != 0:
        raise SystemExit(f"could not create the data:\n{done.stdout}\n{done.stderr}")
    line = next(line for line in done.stdout.splitlines() if line.startswith("DELIVERY-DATA "))
    data: dict[str, Any] = json.loads(line[len("DELIVERY-DATA ") :])
    return data


def listener_plan(data: dict[str, Any], n: int, tokens: str) -> list[tuple[str, str]]:
    """(token, uri) of each of ``n`` listeners: spread evenly over the documents, each with its owner's token."""
    documents = data["documents"]
    plan = []
    for i in range(n):
        document = documents[i % len(documents)]
        token = data["distinct"][i] if tokens == "distinct" else data["shared"][document["owner"]]
        plan.append((token, URI_TEMPLATE.format(document["pk"])))
    return plan


# Servers -------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def uvicorn_server(kind: str, label: str, env: dict[str, str]) -> Iterator[tuple[subprocess.Popen[bytes], int, Path]]:
    port = free_port()
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    log = RESULTS_DIR / f"delivery-{kind}-{label}.log"
    argv = [sys.executable, "-m", "uvicorn", APPS[kind], "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--log-level", "warning", "--backlog", "4096", "--timeout-graceful-shutdown", "5"]
    # The demo's lifespan goes to MCPEndpoint (ours); the bare consumer has none.
    argv += ["--lifespan", "on" if kind == "ours" else "off"]
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
            yield process, port, log
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=15)


def log_summary(log: Path) -> dict[str, Any]:
    """What the server logged: line count, tracebacks, and the first distinct lines that are not traceback frames."""
    lines = log.read_text(errors="replace").splitlines()
    distinct: list[str] = []
    for line in lines:
        if line.startswith((" ", "Traceback")) or not line.strip():
            continue
        short = line[:300]
        if short not in distinct:
            distinct.append(short)
        if len(distinct) >= 8:
            break
    return {"lines": len(lines), "tracebacks": sum(1 for line in lines if "Traceback" in line), "first": distinct}


# Listeners -----------------------------------------------------------------------------------------------


def listen_request(port: int, token: str, uri: str, request_id: int) -> bytes:
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "subscriptions/listen",
            "params": {"_meta": META, "notifications": {"resourceSubscriptions": [uri]}},
        },
        separators=(",", ":"),
    ).encode()
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {PROTOCOL_VERSION}\r\n"
        f"Mcp-Method: subscriptions/listen\r\nAuthorization: Bearer {token}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


@dataclass
class Crowd:
    """Open listeners; ``changed`` is set whenever one of them receives something or ends."""

    listeners: list[Listener] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    refused: int = 0
    refusals: list[str] = field(default_factory=list)
    last_receipt: float = 0.0

    async def close(self) -> None:
        for listener in self.listeners:
            listener.close()
        await asyncio.gather(*(listener.task for listener in self.listeners if listener.task), return_exceptions=True)


class Listener:
    """One open listen stream: receipt times of its ``updated`` events, in order, and how it ended."""

    def __init__(self, uri: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, crowd: Crowd) -> None:
        self.uri = uri
        self.reader = reader
        self.writer = writer
        self.crowd = crowd
        self.received: list[float] = []
        self.task: asyncio.Task[None] | None = None
        self.ended: float | None = None  # when the server closed the stream (or the connection broke)
        self.final_result = False  # an event carrying "result" arrived: the server's end of the listen
        self.closing = False

    def feed(self, buffer: bytes, at: float) -> bytes:
        """Count the complete events in ``buffer``; returns the incomplete rest."""
        while True:
            end = buffer.find(FRAME_END)
            if end < 0:
                return buffer
            frame, buffer = buffer[:end], buffer[end + len(FRAME_END) :]
            if UPDATE_MARK in frame:
                self.received.append(at)
                self.crowd.last_receipt = at
            elif RESULT_MARK in frame:
                self.final_result = True

    async def pump(self, pending: bytes) -> None:
        buffer = self.feed(pending, now())
        self.crowd.changed.set()
        try:
            while True:
                data = await self.reader.read(65536)
                if not data:
                    break
                buffer = self.feed(buffer + data, now())
                self.crowd.changed.set()
        except asyncio.CancelledError:
            return
        except ConnectionError:
            pass
        if not self.closing:
            self.ended = now()
            self.crowd.last_receipt = self.ended  # an end is news too: the drain waits for the streams still ending
        self.crowd.changed.set()

    def close(self) -> None:
        self.closing = True
        if self.task is not None:
            self.task.cancel()
        self.writer.close()


async def open_listener(port: int, token: str, uri: str, request_id: int, crowd: Crowd, timeout: float) -> Listener:
    """Connect, POST ``subscriptions/listen`` and wait for the acknowledgement; raises ``Refused`` otherwise."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout)
    try:
        writer.write(listen_request(port, token, uri, request_id))
        head = await asyncio.wait_for(reader.readuntil(FRAME_END), timeout)
        status = head.split(b"\r\n", 1)[0]
        if b" 200 " not in status:
            rest = b""
            with contextlib.suppress(Exception):
                rest = await asyncio.wait_for(reader.read(300), 1)
            raise Refused(f"{status.decode(errors='replace')} {rest[:200]!r}")
        buffer = b""
        deadline = time.monotonic() + timeout
        while ACK_MARK not in buffer:
            chunk = await asyncio.wait_for(reader.read(65536), max(0.01, deadline - time.monotonic()))
            if not chunk:
                raise Refused(f"closed before the acknowledgement: {buffer[:200]!r}")
            buffer += chunk
    except BaseException:
        writer.close()
        raise
    listener = Listener(uri, reader, writer, crowd)
    rest = buffer[buffer.index(ACK_MARK) :]
    end = rest.find(FRAME_END)
    listener.task = asyncio.ensure_future(listener.pump(rest[end + len(FRAME_END) :] if end >= 0 else b""))
    return listener


class Refused(Exception):
    pass


async def open_crowd(port: int, plan: list[tuple[str, str]], concurrency: int, timeout: float, first_id: int) -> Crowd:
    crowd = Crowd()
    gate = asyncio.Semaphore(concurrency)

    async def one(index: int, token: str, uri: str) -> None:
        async with gate:
            try:
                crowd.listeners.append(await open_listener(port, token, uri, first_id + index, crowd, timeout))
            except (OSError, TimeoutError, asyncio.IncompleteReadError, Refused) as exc:
                crowd.refused += 1
                if len(crowd.refusals) < 3:
                    crowd.refusals.append(f"{type(exc).__name__}: {exc}")

    await asyncio.gather(*(one(i, token, uri) for i, (token, uri) in enumerate(plan)))
    return crowd


# The publisher (its own process) --------------------------------------------------------------------------


def run_publisher(config: dict[str, Any]) -> None:
    """``notify_resource_updated`` ``rate`` times a second for ``duration`` seconds, round-robin over ``uris``.

    Prints READY once Django is set up, starts on a line from stdin, then prints one JSON object: every
    publication as (time just before the call, index of its URI), the call times and the lateness. ``lanes``
    publish at once, lane ``j`` the publications ``k`` with ``k % lanes == j`` (whole documents, in order).

    Mode ``loop`` (default) calls the public function from the worker threads of one long-lived event loop, as a
    view of an ASGI worker would: ``async_to_sync`` inside it runs the layer's ``group_send`` on that loop, on the
    layer's pooled connections. Mode ``threads`` calls it from plain threads, as a management command or a WSGI
    worker would: each call gets an event loop and a Redis connection of its own (about 4 ms a call here), so this
    publisher tops out at a few hundred updates a second on two cores.
    """
    import django

    django.setup()
    from asgiref.sync import sync_to_async

    from mcp_resources.subscriptions import notify_resource_updated

    uris: list[str] = config["uris"]
    rate, duration, lanes = float(config["rate"]), float(config["duration"]), int(config["lanes"])
    total = max(1, round(rate * duration))
    publications: list[tuple[float, int]] = []
    calls: list[float] = []
    late: list[float] = []
    errors: list[str] = []

    def timed(uri: str) -> tuple[float, float]:
        t = now()
        notify_resource_updated(uri)  # the public API logs its failures and never raises
        return t, now() - t

    def record(k: int, due: float, t: float, took: float) -> None:
        publications.append((t, k % len(uris)))
        calls.append(took)
        late.append(max(0.0, t - due))

    async def lane(index: int, start: float) -> None:
        for k in range(index, total, lanes):
            due = start + k / rate
            delay = due - now()
            if delay > 0:
                await asyncio.sleep(delay)
            try:
                t, took = await sync_to_async(timed, thread_sensitive=False)(uris[k % len(uris)])
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
                continue
            record(k, due, t, took)

    def thread_lane(index: int, start: float) -> None:
        for k in range(index, total, lanes):
            due = start + k / rate
            delay = due - now()
            if delay > 0:
                time.sleep(delay)
            try:
                t, took = timed(uris[k % len(uris)])
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
                continue
            record(k, due, t, took)  # list.append is atomic

    async def run_loop() -> None:
        # One publication first, untimed: the loop's connections to Redis are opened before the schedule starts.
        await sync_to_async(notify_resource_updated, thread_sensitive=False)("learn://documents/warm-up")
        print("READY", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        start = now() + 0.2
        await asyncio.gather(*(lane(i, start) for i in range(lanes)))

    if config.get("mode", "loop") == "loop":
        asyncio.run(run_loop())
    else:
        print("READY", flush=True)
        sys.stdin.readline()
        start = now() + 0.2
        workers = [threading.Thread(target=thread_lane, args=(i, start), daemon=True) for i in range(lanes)]
        for thread in workers:
            thread.start()
        for thread in workers:
            thread.join()
    publications.sort()
    span = publications[-1][0] - publications[0][0] if len(publications) > 1 else 0.0
    out = {
        "publications": publications,
        "asked": total,
        "mode": config.get("mode", "loop"),
        "achieved_rate": (len(publications) - 1) / span if span > 0 else None,
        "call_ms_p50": statistics.median(calls) * 1e3 if calls else None,
        "call_ms_max": max(calls) * 1e3 if calls else None,
        "late_ms_p99": percentile(late, 0.99) * 1e3 if late else None,
        "late_ms_max": max(late) * 1e3 if late else None,
        "errors": errors[:5],
    }
    print("PUBLISHED " + json.dumps(out), flush=True)


async def publish(env: dict[str, str], uris: list[str], rate: float, args: argparse.Namespace) -> dict[str, Any]:
    config = {
        "uris": uris,
        "rate": rate,
        "duration": args.duration,
        "lanes": args.publisher_lanes,
        "mode": args.publisher_mode,
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--role",
        "publisher",
        "--config",
        json.dumps(config),
        cwd=ROOT,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        limit=2**26,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    try:
        ready = await asyncio.wait_for(process.stdout.readline(), 120)
        if ready.strip() != b"READY":
            raise RuntimeError(f"publisher did not start: {ready!r}")
        process.stdin.write(b"GO\n")
        await process.stdin.drain()
        timeout = args.duration * 3 + 60
        while True:
            line = await asyncio.wait_for(process.stdout.readline(), timeout)
            if not line:
                raise RuntimeError("the publisher ended without a result")
            if line.startswith(b"PUBLISHED "):
                result: dict[str, Any] = json.loads(line[len(b"PUBLISHED ") :])
                break
        await asyncio.wait_for(process.wait(), 30)
        return result
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


# One measurement -----------------------------------------------------------------------------------------


def match(listener: Listener, publications: list[float]) -> tuple[list[tuple[int, float]], int]:
    """The receipts matched in order to ``publications`` (of the listener's URI) as (position, latency), and the
    extras (receipts with no publication before them left to match)."""
    matched: list[tuple[int, float]] = []
    extra = 0
    index = 0
    for got in listener.received:
        if index < len(publications) and publications[index] <= got + 0.001:
            matched.append((index, max(0.0, got - publications[index])))
            index += 1
        else:
            extra += 1
    return matched, extra


async def drain(crowd: Crowd, owed: dict[str, int], args: argparse.Namespace) -> float:
    """Wait until every open listener has what it is owed, or ``--quiet`` seconds pass without a receipt or an end
    of a stream, or ``--drain`` seconds; returns the seconds waited."""
    t0 = now()
    deadline = t0 + args.drain
    crowd.last_receipt = max(crowd.last_receipt, t0)
    while True:
        pending = any(
            listener.ended is None and len(listener.received) < owed.get(listener.uri, 0)
            for listener in crowd.listeners
        )
        current = now()
        if not pending or current >= deadline or current - crowd.last_receipt >= args.quiet:
            return current - t0
        crowd.changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(crowd.changed.wait(), 0.2)


async def measure(
    kind: str,
    pid: int,
    port: int,
    n: int,
    rate: float,
    plan: list[tuple[str, str]],
    env: dict[str, str],
    args: argparse.Namespace,
) -> dict[str, Any]:
    from mcp_resources.subscriptions import notify_resource_updated

    uris = list(dict.fromkeys(uri for _, uri in plan))
    warm_plan = plan[: len(uris)]  # listener i watches document i % documents: one listener of each
    # Warm-up: a listener per document and an update of each, so that pools, caches and allocators have grown.
    warm = await open_crowd(port, warm_plan, args.concurrency, args.connect_timeout, first_id=10**6)
    if warm.refused or not warm.listeners:
        raise RuntimeError(f"{kind}: warm-up listeners refused ({warm.refused}): {warm.refusals}")
    for uri in uris:
        await asyncio.to_thread(notify_resource_updated, uri)
    await drain(warm, dict.fromkeys(uris, 1), argparse.Namespace(drain=10.0, quiet=5.0))
    warmed = sum(1 for listener in warm.listeners if listener.received)
    await warm.close()
    await asyncio.sleep(args.settle)

    t0 = now()
    crowd = await open_crowd(port, plan, args.concurrency, args.connect_timeout, first_id=1)
    connect_s = now() - t0
    connected = len(crowd.listeners)
    await asyncio.sleep(args.settle)
    before = proc_status(pid)

    cpu0, client0 = proc_cpu_seconds(pid), resource.getrusage(resource.RUSAGE_SELF)
    published = await publish(env, uris, rate, args)
    by_uri: dict[str, list[float]] = {uri: [] for uri in uris}
    global_index: dict[str, list[int]] = {uri: [] for uri in uris}
    for k, (t, index) in enumerate(published["publications"]):
        by_uri[uris[index]].append(t)
        global_index[uris[index]].append(k)
    owed = {uri: len(times) for uri, times in by_uri.items()}
    drain_s = await drain(crowd, owed, args)
    cpu_s = proc_cpu_seconds(pid) - cpu0
    client1 = resource.getrusage(resource.RUSAGE_SELF)
    client_cpu_s = (client1.ru_utime + client1.ru_stime) - (client0.ru_utime + client0.ru_stime)
    after = proc_status(pid)

    expected = sum(owed[listener.uri] for listener in crowd.listeners)
    latencies: list[float] = []
    extra = short = 0
    # Per publication: deliveries and the slowest of them (the fan-out time), to see when a run started to fall.
    per_publication: list[list[float]] = [[0, 0.0] for _ in published["publications"]]
    for listener in crowd.listeners:
        matched, extras = match(listener, by_uri[listener.uri])
        for position, latency in matched:
            latencies.append(latency)
            slot = per_publication[global_index[listener.uri][position]]
            slot[0] += 1
            slot[1] = max(slot[1], latency)
        extra += extras
        short += len(matched) < owed[listener.uri]
    ended = [listener for listener in crowd.listeners if listener.ended is not None]
    first_ended = min((listener.ended for listener in ended if listener.ended is not None), default=None)
    last_ended = max((listener.ended for listener in ended if listener.ended is not None), default=None)
    await crowd.close()

    delivered = len(latencies)
    result = {
        "server": kind,
        "listeners": n,
        "rate": rate,
        "connected": connected,
        "refused": crowd.refused,
        "refusals": crowd.refusals,
        "warmed": f"{warmed}/{len(warm.listeners)}",
        "connect_s": connect_s,
        "publications": len(published["publications"]),
        "publisher": {key: value for key, value in published.items() if key != "publications"},
        "expected": expected,
        "delivered": delivered,
        "delivered_share": delivered / expected if expected else None,
        "extra": extra,
        "listeners_short": short,
        "ended_by_server": len(ended),
        "ended_with_result": sum(1 for listener in ended if listener.final_result),
        "first_end_after_s": None if first_ended is None else first_ended - published["publications"][0][0],
        "last_end_after_s": None if last_ended is None else last_ended - published["publications"][0][0],
        # when the last delivery arrived, from the first publication (deliveries stop there when a run falls)
        "last_delivery_after_s": max(
            (listener.received[-1] for listener in crowd.listeners if listener.received),
            default=published["publications"][0][0],
        )
        - published["publications"][0][0],
        "drain_s": drain_s,
        "p50_ms": statistics.median(latencies) * 1e3 if latencies else None,
        # A delivery that never came counts as infinitely late.
        "p99_ms": percentile(latencies + [math.inf] * (expected - delivered), 0.99) * 1e3 if latencies else None,
        "max_ms": max(latencies) * 1e3 if latencies else None,
        "server_cpu_s": cpu_s,
        "server_cpu_us_per_delivery": cpu_s / max(1, delivered) * 1e6,
        "client_cpu_s": client_cpu_s,
        "rss_before_kb": before["VmRSS"],
        "rss_after_kb": after["VmRSS"],
        "threads_after": after["Threads"],
        # [published at (s from the first), deliveries, slowest delivery (ms)] per publication
        "per_publication": [
            [round(t - published["publications"][0][0], 3), int(count), round(slowest * 1e3, 1)]
            for (t, _), (count, slowest) in zip(published["publications"], per_publication, strict=True)
        ],
    }
    share = result["delivered_share"]
    print(
        f"  {kind:>4} N={n:,} R={rate:g}/s: {connected:,} connected in {connect_s:.1f} s ({crowd.refused} refused); "
        f"{result['publications']} publications (achieved {published['achieved_rate'] or 0:.1f}/s, late p99 "
        f"{published['late_ms_p99'] or 0:.0f} ms); {delivered:,}/{expected:,} delivered"
        + (f" ({share:.2%})" if share is not None else "")
        + f", {extra} extra; {len(ended)} streams ended by the server ({result['ended_with_result']} with a final "
        "result"
        + (
            f", between {result['first_end_after_s']:.1f} and {result['last_end_after_s']:.1f} s after the first "
            f"publication; the last delivery at {result['last_delivery_after_s']:.1f} s"
            if ended
            else ""
        )
        + f"); p50 {fmt_ms(result['p50_ms'])}, p99 {fmt_ms(result['p99_ms'])}, max {fmt_ms(result['max_ms'])}; "
        f"drain {drain_s:.1f} s; server CPU {cpu_s:.1f} s ({result['server_cpu_us_per_delivery']:.0f} µs/delivery), "
        f"client CPU {client_cpu_s:.1f} s",
        flush=True,
    )
    return result


def full(run: dict[str, Any]) -> bool:
    return bool(run["connected"]) and run["delivered"] >= run["expected"] and not run["refused"]


async def run_all(
    args: argparse.Namespace, sizes: list[int], redis_url: str, env: dict[str, str], data: dict[str, Any]
) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    kinds = [kind.strip() for kind in args.servers.split(",") if kind.strip()]
    turn = 0
    for n in sizes:
        plan = listener_plan(data, n, args.tokens)
        fallen: set[str] = set()
        for rate in args.sweeps[n]:
            active = [kind for kind in kinds if kind not in fallen]
            if not active:
                break
            for kind in active[turn % len(active) :] + active[: turn % len(active)]:  # the first server alternates
                flush_redis(redis_url)
                label = f"{n}-{rate:g}"
                with uvicorn_server(kind, label, env) as (process, port, log):
                    run = await measure(kind, process.pid, port, n, rate, plan, env, args)
                run["log"] = log_summary(log)
                noted = [line for line in run["log"]["first"] if "graceful shutdown exceeded" not in line]
                if noted:  # (uvicorn cancels the streams still open at shutdown: not worth a line)
                    print(f"    {kind} server log ({run['log']['lines']} lines): {noted[:3]}")
                runs.append(run)
                if not full(run):
                    fallen.add(kind)
            turn += 1
    flush_redis(redis_url)
    return runs


# Summary -------------------------------------------------------------------------------------------------


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per server and N: the highest rate with 100% delivered and the first below; per N: the ratios at the target."""
    servers = []
    for n in sorted({r["listeners"] for r in runs}):
        for kind in ("ours", "bare"):
            mine = sorted((r for r in runs if r["listeners"] == n and r["server"] == kind), key=lambda r: r["rate"])
            if not mine:
                continue
            below = next((r for r in mine if not full(r)), None)
            good = [r["rate"] for r in mine if full(r) and (below is None or r["rate"] < below["rate"])]
            servers.append(
                {
                    "server": kind,
                    "listeners": n,
                    "highest_full_rate": max(good, default=None),
                    "first_rate_below": below["rate"] if below else None,
                    "share_at_first_below": below["delivered_share"] if below else None,
                    "rates": [r["rate"] for r in mine],
                }
            )
    points = []
    for n, rate in TARGET_RATES.items():
        ours = next((r for r in runs if r["server"] == "ours" and r["listeners"] == n and r["rate"] == rate), None)
        bare = next((r for r in runs if r["server"] == "bare" and r["listeners"] == n and r["rate"] == rate), None)
        if not ours or not bare:
            continue
        points.append(
            {
                "listeners": n,
                "rate": rate,
                "delivered_ratio": ours["delivered"] / bare["delivered"] if bare["delivered"] else None,
                "ours_share": ours["delivered_share"],
                "bare_share": bare["delivered_share"],
                "p50_ratio": ratio(ours["p50_ms"], bare["p50_ms"]),
                "p99_ratio": ratio(ours["p99_ms"], bare["p99_ms"]),
                "ours_p99_ms": ours["p99_ms"],
                "bare_p99_ms": bare["p99_ms"],
                "ours_ended": ours["ended_by_server"],
            }
        )
    return {"servers": servers, "points": points}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--listeners", default="500,5000", help="comma-separated listener counts (default 500,5000)")
    parser.add_argument("--rates-500", default=",".join(map(str, SWEEPS[500])), help="the sweep at 500 listeners")
    parser.add_argument("--rates-5000", default=",".join(map(str, SWEEPS[5000])), help="the sweep at 5,000")
    parser.add_argument("--rates", default="", help="the sweep for any other listener count (default: 1,2,4,...)")
    parser.add_argument("--quick", action="store_true", help="500 listeners only, 10 s of updates, 10..80/s")
    parser.add_argument("--duration", type=float, default=15.0, help="seconds of updates per measurement")
    parser.add_argument("--documents", type=int, default=20)
    parser.add_argument("--users", type=int, default=4, help="owners of the documents (round-robin)")
    parser.add_argument("--tokens", choices=["shared", "distinct"], default="shared")
    parser.add_argument("--publisher-lanes", type=int, default=20, help="publications at once; must divide --documents")
    parser.add_argument(
        "--publisher-mode",
        choices=["loop", "threads"],
        default="loop",
        help="loop: from the worker threads of one event loop (an ASGI view); threads: plain threads, a new event "
        "loop and Redis connection per call (a management command)",
    )
    parser.add_argument("--concurrency", type=int, default=64, help="handshakes under way at once")
    parser.add_argument("--settle", type=float, default=1.0)
    parser.add_argument("--connect-timeout", type=float, default=60.0)
    parser.add_argument("--drain", type=float, default=15.0, help="seconds at most for deliveries still under way")
    parser.add_argument("--quiet", type=float, default=4.0, help="end the drain after this long without a receipt")
    parser.add_argument("--deadline", type=float, default=3000.0, help="seconds for the whole run")
    parser.add_argument("--redis-db", type=int, default=11, help="the Redis database to use (flushed)")
    parser.add_argument("--servers", default="ours,bare", help="which servers to measure (default: ours,bare)")
    parser.add_argument("--role", choices=["main", "publisher"], default="main", help=argparse.SUPPRESS)
    parser.add_argument("--config", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "publisher":
        run_publisher(json.loads(args.config))
        return
    if args.documents % args.publisher_lanes:
        parser.error("--publisher-lanes must divide --documents (each lane owns whole documents)")

    if args.quick:
        args.listeners, args.duration, args.rates_500 = "500", min(args.duration, 10.0), "10,20,40,80"
    sizes = [int(s) for s in args.listeners.split(",") if s.strip()]
    default_rates = args.rates or "1,2,4,8,16,32,64"
    args.sweeps = {
        n: [
            float(r) for r in {500: args.rates_500, 5000: args.rates_5000}.get(n, default_rates).split(",") if r.strip()
        ]
        for n in sizes
    }
    redis_url = f"redis://127.0.0.1:6379/{args.redis_db}"
    limit = raise_fd_limit(max(sizes) + args.documents + 1024)
    if limit < max(sizes) + 256:
        raise SystemExit(f"RLIMIT_NOFILE is {limit}: too low for {max(sizes):,} listeners")
    try:
        flush_redis(redis_url)
    except Exception as exc:
        raise SystemExit(f"Redis is not reachable at {redis_url} ({type(exc).__name__}: {exc})") from exc

    with tempfile.TemporaryDirectory(prefix="mcp-delivery-") as tmp:
        env = server_env(Path(tmp), redis_url)
        os.environ.update({key: env[key] for key in ("DJANGO_SETTINGS_MODULE", "MCP_DEMO_DB", "MCP_REDIS_URL")})
        os.environ["MCP_RESOURCE_URI"] = RESOURCE_URI
        import django

        django.setup()
        data = prepare(env, args, max(sizes))
        print(
            f"delivery: listeners on one uvicorn worker, ours vs a bare reader of the Redis stream, "
            f"{args.documents} documents of {args.users} users, tokens {args.tokens}, Redis db {args.redis_db}, "
            f"{args.duration:g} s of updates per point; sweeps "
            + "; ".join(f"N={n:,}: {', '.join(f'{r:g}' for r in args.sweeps[n])}/s" for n in sizes),
            flush=True,
        )
        runs = asyncio.run(asyncio.wait_for(run_all(args, sizes, redis_url, env, data), args.deadline))

    summary = summarize(runs)
    from benchmarks.run import git_state

    for s in summary["servers"]:
        highest = "none" if s["highest_full_rate"] is None else f"{s['highest_full_rate']:g}/s"
        print(
            f"{s['server']:>4} N={s['listeners']:,}: highest rate with 100% delivered {highest}, first rate below "
            + (
                f"{s['first_rate_below']:g}/s ({s['share_at_first_below']:.1%} delivered)"
                if s["first_rate_below"] is not None
                else f"none up to {max(s['rates']):g}/s"
            )
        )
    for p in summary["points"]:
        delivered_ok = p["delivered_ratio"] is not None and p["delivered_ratio"] >= DELIVERED_TARGET
        p99_ok = p["p99_ratio"] is not None and p["p99_ratio"] <= P99_TARGET
        print(
            f"N={p['listeners']:,} at {p['rate']:g}/s: delivered ours/bare "
            + ("n/a" if p["delivered_ratio"] is None else f"{p['delivered_ratio']:.3f}")
            + f" (ours {p['ours_share']:.2%}, bare {p['bare_share']:.2%}; target >= {DELIVERED_TARGET:g}: "
            f"{'met' if delivered_ok else 'MISSED'}); p99 ours/bare {fmt_ms(p['ours_p99_ms'])}/"
            f"{fmt_ms(p['bare_p99_ms'])} = "
            + ("n/a" if p["p99_ratio"] is None else f"{p['p99_ratio']:.2f}x")
            + f" (target <= {P99_TARGET:g}x: {'met' if p99_ok else 'MISSED'})"
        )
    write_result(
        "delivery",
        {
            "runs": runs,
            **summary,
            "targets": {"delivered_ratio": DELIVERED_TARGET, "p99_ratio": P99_TARGET},
            "config": {key: value for key, value in vars(args).items() if key not in ("role", "config", "sweeps")},
            "sweeps": {str(n): rates for n, rates in args.sweeps.items()},
            "fd_limit": limit,
            "cpus": os.cpu_count(),
            "commit": git_state(),
            "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        },
    )


if __name__ == "__main__":
    main()
