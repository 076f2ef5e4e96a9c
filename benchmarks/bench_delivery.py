"""Delivery (issues 13 and 28): notifications delivered by ``subscriptions/listen`` streams on uvicorn workers,
against a bare reader of the same engine (Redis Streams), while documents change at a steady rate.

Two servers, each ``--workers`` (2) uvicorn processes of the same application on ports of their own (no reload,
one worker each), all on the Redis log (``MCP_REDIS_URL=redis://127.0.0.1:6379/<--redis-db>``; the benchmark owns
that database and flushes it before every server it starts), with ``benchmarks.settings_delivery`` (the demo's
settings, ``STREAMS_PER_CALLER`` raised):

- ours: ``testproject.asgi:application``, the demo as deployed: real OAuth callers (django-oauth-toolkit tokens,
  scope ``documents:read``), each listener's token checked on its listen and its access to the document re-checked
  as the server does before each ``updated`` notification, on a fresh migrated SQLite file; with ``--server gevent``,
  ``testproject.wsgi:application`` under gunicorn's gevent worker instead (one gunicorn with one worker per process;
  its worker is the process measured and killed);
- bare: ``benchmarks.bare_reader:application``, one ``XREAD BLOCK`` task per process on the same Redis stream
  writing each ``updated`` event to the requests whose listen body asks for its URI (and replaying from the log
  after a resume id): no Django, no authentication, no access check, no limits, no coalescing, the floor of Redis
  Streams and the ASGI server.

Data: ``--documents`` (20) documents of the demo's ``Document`` model owned round-robin by ``--users`` (4) users.
N listeners are spread evenly over the documents (listener ``i`` watches document ``i % 20``, on worker
``i % --workers``) and each carries its document owner's token: ``--tokens shared`` (default) one token per user,
``--tokens distinct`` one token per listener (the worst case for a server that batches its access checks by
caller). Each listener POSTs ``subscriptions/listen`` (protocol 2026-07-28, ``resourceSubscriptions:
[learn://documents/<pk>]``), raw asyncio streams on loopback, a bounded number of handshakes at once, and waits for
the acknowledgement (whose ``_meta["io.github.django-mcp-resources/eventId"]`` is its first resume position).

For each N (500 and 5,000) and each rate R of its sweep (500: 10, 20, 40, ... updates/s; 5,000: 1, 2, 4, ...),
for each server (the first alternating), in fresh server processes: warm up (one listener per document and one
update of each), open the N listeners, then a publisher process (Django on the same settings and log) calls the
public ``mcp_resources.subscriptions.notify_resource_updated(uri)`` R times a second for ``--duration`` (120)
seconds, round-robin over the documents (open loop: publication ``k`` is due at ``start + k / R``;
``--publisher-lanes`` at once, each owning a fixed subset of the documents so that the publications of one URI keep
their order; from the worker threads of one event loop, as a view of an ASGI worker publishes, or
``--publisher-mode threads``), and records the time of every publication (``CLOCK_MONOTONIC``, which every process
of the machine shares). The log's ids of the run's publications are then read from Redis (the last ones of each
URI, in order). Once the publisher is done the listeners get up to ``--drain`` seconds (less once every listener
has a notification of the newest publication of its URI or has been ended, or after ``--quiet`` seconds without a
receipt or an end) for what is still on its way; a delivery later than that counts as lost.

With ``--kill-at F`` (needs two workers), ``F`` of the way through the updates the first worker is killed
(``kill -9``); each of its listeners, once its connection broke, listens again on the second worker with the last
event id it received (ours: the resume id in the listen's ``_meta``, docs/subscriptions.md; bare: the same key,
replayed with ``XRANGE``).

Each listener's notifications carry the log's id of their event (SSE ``id``). A publication of its URI counts:

- **covered** when the listener received a notification of the URI with that id or a later one (our streams
  coalesce the updates of one URI waiting at once, last change wins, documented; the issue allows it); its latency
  is publication to that first such notification;
- **one-to-one** when it received a notification with exactly that id.

A client's **gap** is the publications of its URI it never got covered (across its reconnection). Per run:
covered and one-to-one fractions, gaps, extras and duplicates, streams ended by the server (and how many with a
final JSON-RPC result), p50/p99 publish-to-receive latency (covered, and one-to-one; a lost delivery counts as
infinitely late, as in item 6), the publisher's lateness, server CPU per covered delivery; per N the ratios
ours/bare at the target rate, and for each server the highest rate with 100% covered and the first rate below (a
server is not measured above its first rate below 100%; the sweep of an N stops once both have fallen).

With ``--revoke M``, after the sweeps: M listeners of ours, each on a token of its own, and another process that
revokes their tokens ``--revoke-rate`` a second with django-oauth-toolkit's ``AccessToken.revoke()`` (what its
revocation endpoint calls); per token, the revoke call's start to the stream's final result.

With ``--ablate NAME[,NAME]``, each speed-up of ``benchmarks/ablation.py`` named is measured switched off, as a
server of its own (``ours-without-NAME``: ours with ``MCP_BENCH_ABLATE=NAME``) beside ours and bare at each point:
its p99 over ours' and over bare's at the target rates (``static-index``: a query of the ``StaticResource`` table
for every update decided).

Targets (issue 28), in the same run: at 500 listeners and 10 updates/s, and at 5,000 listeners and 1 update/s, on
two workers for two minutes: 100% delivered (covered), p99 at most 1.5x the bare reader's; with a worker killed
half way, gap 0; revocation to the final result, p99 at most 1 s. Everything stops by itself: per-step time-outs
and an overall ``--deadline``.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import json
import math
import os
import re
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_listeners import (
    flush_redis,
    fmt_ms,
    free_port,
    gunicorn_worker,
    percentile,
    proc_cpu_seconds,
    proc_status,
    raise_fd_limit,
    ratio,
    server_argv,
)
from benchmarks.common import PROTOCOL_VERSION, RESULTS_DIR, ROOT, python_path, write_result

SETTINGS = "benchmarks.settings_delivery"
APPS = {"ours": "testproject.asgi:application", "bare": "benchmarks.bare_reader:application"}
WITHOUT = "ours-without-"
"""A server of ``--ablate NAME``: ours, with the speed-up ``NAME`` switched off (``benchmarks/ablation.py``)."""


def app_of(kind: str) -> str:
    """The application a server of ``kind`` runs: ``ours`` for ours and its ablations, else ``kind``."""
    return "ours" if kind.startswith(WITHOUT) else kind


RESOURCE_URI = "http://127.0.0.1:8000/mcp"  # every server's MCP_RESOURCE_URI: the audience the tokens are bound to
URI_TEMPLATE = "learn://documents/{}"
META = {"io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION, "io.modelcontextprotocol/clientCapabilities": {}}
LOG_KEY = "mcp_resources:events"  # the Redis stream of the log
ACK_MARK = b"notifications/subscriptions/acknowledged"
UPDATE_MARK = b"notifications/resources/updated"
RESULT_MARK = b'"result"'
FRAME_END = b"\r\n\r\n"
# A notification's log id; in a listen request's _meta, the id to resume after (docs/subscriptions.md).
EVENT_ID_META = "io.github.django-mcp-resources/eventId"
SSE_ID = re.compile(rb"(?:^|\n)id: (\d+-\d+)\r?\n")
ACK_POSITION = re.compile(rb'"io\.github\.django-mcp-resources/eventId":\s*"(\d+-\d+)"')
SERVER = ["uvicorn"]  # how ours is served (--server)
SWEEPS = {500: [10, 20, 40, 80, 160, 320, 640], 5000: [1, 2, 4, 8, 16, 32, 64]}
TARGET_RATES = {500: 10.0, 5000: 1.0}
DELIVERED_TARGET = 1.0  # ours delivered / bare delivered, at least
P99_TARGET = 1.5  # ours p99 / bare p99, at most
REVOKE_TARGET_MS = 1000.0  # revoke call to the stream's final result, p99, at most
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
from oauth2_provider.models import get_access_token_model
pks = list(get_access_token_model().objects.order_by("pk").values_list("pk", flat=True))
out = {{
    "documents": [{{"pk": d.pk, "owner": j % users_n}} for j, d in enumerate(documents)],
    "shared": shared,
    "distinct": per_listener,
    "distinct_pks": pks[users_n:],  # created after the shared ones, in order
}}
print("DELIVERY-DATA " + json.dumps(out))
"""


def prepare(env: dict[str, str], args: argparse.Namespace, max_listeners: int) -> dict[str, Any]:
    """Migrate the temporary SQLite file, create the users, their documents and their tokens (``max_listeners`` of
    one listener each)."""
    manage = [sys.executable, str(ROOT / "testproject" / "manage.py")]
    migrated = subprocess.run(
        [*manage, "migrate", "--verbosity", "0"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    if migrated.returncode != 0:
        raise SystemExit(f"migrate failed:\n{migrated.stdout}\n{migrated.stderr}")
    code = PREPARE.format(
        users=args.users,
        documents=args.documents,
        distinct=max_listeners,
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


SERVING: dict[int, int] = {}
"""gunicorn's pid -> its (only) worker's pid, the process that serves (``--server gevent``)."""


def serving_pid(process: subprocess.Popen[bytes]) -> int:
    """The process that serves: uvicorn's own, or gunicorn's worker."""
    return SERVING.get(process.pid, process.pid)


@contextlib.contextmanager
def uvicorn_server(kind: str, label: str, env: dict[str, str]) -> Iterator[tuple[subprocess.Popen[bytes], int, Path]]:
    """``kind``'s server on a free port: uvicorn, or for ours with ``--server gevent`` one gunicorn gevent worker
    (``testproject.wsgi``)."""
    port = free_port()
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    app = app_of(kind)
    gevent = app == "ours" and SERVER[0] == "gevent"
    if kind.startswith(WITHOUT):
        env = {**env, "MCP_BENCH_ABLATE": kind.removeprefix(WITHOUT)}
    log = RESULTS_DIR / f"delivery-{kind}{'-gevent' if gevent else ''}-{label}.log"
    # The demo's lifespan goes to MCPEndpoint (ours); the bare consumer has none.
    argv = server_argv(APPS[app], port, gevent=gevent, lifespan=app == "ours")
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
            if gevent:
                SERVING[process.pid] = gunicorn_worker(process.pid)
            yield process, port, log
        finally:
            SERVING.pop(process.pid, None)
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


def listen_request(port: int, token: str, uri: str, request_id: int, resume: str | None = None) -> bytes:
    """A ``subscriptions/listen`` POST; ``resume``: the last event id received (docs/subscriptions.md)."""
    meta = {**META, EVENT_ID_META: resume} if resume else META
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "subscriptions/listen",
            "params": {"_meta": meta, "notifications": {"resourceSubscriptions": [uri]}},
        },
        separators=(",", ":"),
    ).encode()
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {PROTOCOL_VERSION}\r\n"
        f"Mcp-Method: subscriptions/listen\r\nAuthorization: Bearer {token}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def id_key(event_id: str | bytes) -> tuple[int, int]:
    """A log id (``<milliseconds>-<sequence>``) as numbers, in the log's order."""
    text = event_id.decode() if isinstance(event_id, bytes) else event_id
    ms, _, seq = text.partition("-")
    return int(ms), int(seq or 0)


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
    """One client: its listen stream (re-opened with its last event id after a reconnect), the receipt times and
    log ids of its ``updated`` events, in order, and how its stream ended."""

    def __init__(self, index: int, token: str, uri: str, crowd: Crowd) -> None:
        self.index = index
        self.token = token
        self.uri = uri
        self.crowd = crowd
        self.port = 0
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.received: list[float] = []
        self.ids: list[tuple[int, int]] = []  # the log id of each receipt
        self.last_id: str | None = None  # the acknowledgement's position, then the last notification's id
        self.task: asyncio.Task[None] | None = None
        self.ended: float | None = None  # when the server closed the stream (or the connection broke)
        self.final_result = False  # an event carrying "result" arrived: the server's end of the listen
        self.final_at: float | None = None
        self.closing = False
        self.reconnects = 0

    def feed(self, buffer: bytes, at: float) -> bytes:
        """Count the complete events in ``buffer``; returns the incomplete rest."""
        while True:
            end = buffer.find(FRAME_END)
            if end < 0:
                return buffer
            frame, buffer = buffer[:end], buffer[end + len(FRAME_END) :]
            if UPDATE_MARK in frame:
                self.received.append(at)
                found = SSE_ID.search(frame)
                if found:
                    self.last_id = found.group(1).decode()
                    self.ids.append(id_key(self.last_id))
                else:
                    self.ids.append((0, 0))
                self.crowd.last_receipt = at
            elif RESULT_MARK in frame:  # the listen's answer: its stream is over (the connection may stay open)
                self.final_result = True
                self.final_at = at
                if self.ended is None:
                    self.ended = at
                    self.crowd.last_receipt = at

    async def pump(self, pending: bytes) -> None:
        assert self.reader is not None
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
        if not self.closing and self.ended is None:
            self.ended = now()
            self.crowd.last_receipt = self.ended  # an end is news too: the drain waits for the streams still ending
        self.crowd.changed.set()

    def close(self) -> None:
        self.closing = True
        if self.task is not None:
            self.task.cancel()
        if self.writer is not None:
            self.writer.close()

    async def connect(self, port: int, request_id: int, timeout: float, resume: str | None = None) -> None:
        """Connect, POST ``subscriptions/listen`` (after ``resume``) and wait for the acknowledgement; raises
        ``Refused`` otherwise."""
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout)
        try:
            writer.write(listen_request(port, self.token, self.uri, request_id, resume))
            head = await asyncio.wait_for(reader.readuntil(FRAME_END), timeout)
            status = head.split(b"\r\n", 1)[0]
            if b" 200 " not in status:
                rest = b""
                with contextlib.suppress(Exception):
                    rest = await asyncio.wait_for(reader.read(300), 1)
                raise Refused(f"{status.decode(errors='replace')} {rest[:200]!r}")
            buffer = b""
            deadline = time.monotonic() + timeout
            while ACK_MARK not in buffer or buffer.find(FRAME_END, buffer.index(ACK_MARK)) < 0:
                chunk = await asyncio.wait_for(reader.read(65536), max(0.01, deadline - time.monotonic()))
                if not chunk:
                    raise Refused(f"closed before the acknowledgement: {buffer[:200]!r}")
                buffer += chunk
        except BaseException:
            writer.close()
            raise
        position = ACK_POSITION.search(buffer)
        if position and not resume:
            self.last_id = position.group(1).decode()
        self.port, self.reader, self.writer = port, reader, writer
        self.ended, self.final_result, self.final_at, self.closing = None, False, None, False
        rest = buffer[buffer.index(ACK_MARK) :]
        end = rest.find(FRAME_END)
        self.task = asyncio.ensure_future(self.pump(rest[end + len(FRAME_END) :]))


class Refused(Exception):
    pass


async def open_crowd(
    ports: list[int], plan: list[tuple[str, str]], concurrency: int, timeout: float, first_id: int
) -> Crowd:
    """Listener ``i`` of ``plan`` on ``ports[i % len(ports)]`` (one worker each)."""
    crowd = Crowd()
    gate = asyncio.Semaphore(concurrency)

    async def one(index: int, token: str, uri: str) -> None:
        listener = Listener(index, token, uri, crowd)
        async with gate:
            try:
                await listener.connect(ports[index % len(ports)], first_id + index, timeout)
                crowd.listeners.append(listener)
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
    print("RESULT " + json.dumps(out), flush=True)


async def run_role(
    env: dict[str, str], role: str, config: dict[str, Any], timeout: float, on_go: Any = None
) -> dict[str, Any]:
    """Run this script as ``role`` (publisher, revoker) in a process of its own: wait for its READY, say GO (then
    call ``on_go(time)``), and return the JSON object of its ``RESULT`` line."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--role",
        role,
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
            raise RuntimeError(f"the {role} did not start: {ready!r}")
        process.stdin.write(b"GO\n")
        await process.stdin.drain()
        if on_go is not None:
            on_go(now())
        while True:
            line = await asyncio.wait_for(process.stdout.readline(), timeout)
            if not line:
                raise RuntimeError(f"the {role} ended without a result")
            if line.startswith(b"RESULT "):
                result: dict[str, Any] = json.loads(line[len(b"RESULT ") :])
                break
        await asyncio.wait_for(process.wait(), 30)
        return result
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def publish(
    env: dict[str, str], uris: list[str], rate: float, args: argparse.Namespace, on_go: Any = None
) -> dict[str, Any]:
    config = {
        "uris": uris,
        "rate": rate,
        "duration": args.duration,
        "lanes": args.publisher_lanes,
        "mode": args.publisher_mode,
    }
    return await run_role(env, "publisher", config, args.duration * 3 + 60, on_go)


def run_revoker(config: dict[str, Any]) -> None:
    """Revoke the access tokens ``pks`` with django-oauth-toolkit's ``AccessToken.revoke()``, ``rate`` a second
    (open loop, in order), and print every call's start time and index, and the call times."""
    import django

    django.setup()
    from oauth2_provider.models import get_access_token_model

    pks: list[int] = config["pks"]
    rate = float(config["rate"])
    tokens = get_access_token_model().objects.in_bulk(pks)
    print("READY", flush=True)
    sys.stdin.readline()
    start = now() + 0.2
    revocations: list[tuple[float, int]] = []
    calls: list[float] = []
    missing = 0
    for index, pk in enumerate(pks):
        delay = start + index / rate - now()
        if delay > 0:
            time.sleep(delay)
        token = tokens.get(pk)
        if token is None:
            missing += 1
            continue
        t = now()
        token.revoke()
        calls.append(now() - t)
        revocations.append((t, index))
    out = {
        "revocations": revocations,
        "missing": missing,
        "call_ms_p50": statistics.median(calls) * 1e3 if calls else None,
        "call_ms_max": max(calls) * 1e3 if calls else None,
    }
    print("RESULT " + json.dumps(out), flush=True)


# One measurement -----------------------------------------------------------------------------------------


def log_ids(redis_url: str, counts: dict[str, int]) -> dict[str, list[tuple[int, int]]]:
    """The log ids of the last ``counts[uri]`` ``updated`` events of each URI (the run's publications, in order;
    fewer when some never reached the log)."""
    import redis

    found: dict[str, list[tuple[int, int]]] = {uri: [] for uri in counts}
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        start = "-"
        while True:
            entries: list[tuple[str, dict[str, str]]] = client.xrange(LOG_KEY, min=start, max="+", count=10_000)  # type: ignore[assignment]
            for event_id, fields in entries:
                if fields.get("k") == "updated" and fields.get("t") in found:
                    found[fields["t"]].append(id_key(event_id))
            if len(entries) < 10_000:
                break
            start = "(" + entries[-1][0]
    finally:
        client.close()
    return {uri: ids[max(0, len(ids) - counts[uri]) :] for uri, ids in found.items()}


@dataclass
class Account:
    """One client's publications: the latency of each, one-to-one (a notification with its own id) and covered (the
    first notification of its URI with its id or a later one: coalescing per URI, docs/subscriptions.md); ``inf``
    when none came."""

    one_to_one: list[float]
    covered: list[float]
    extra: int  # notifications with an id that is none of the run's publications of the URI
    duplicates: int  # notifications of an id received before

    @property
    def gap(self) -> int:
        return sum(1 for latency in self.covered if math.isinf(latency))


def account(listener: Listener, publications: list[tuple[float, tuple[int, int]]]) -> Account:
    """Match ``listener``'s receipts to the (time, log id) of its URI's publications by id."""
    order = sorted(range(len(listener.ids)), key=listener.ids.__getitem__)
    ids_sorted = [listener.ids[j] for j in order]
    earliest = [math.inf] * (len(order) + 1)  # the earliest receipt among those with an id >= ids_sorted[j]
    for j in range(len(order) - 1, -1, -1):
        earliest[j] = min(earliest[j + 1], listener.received[order[j]])
    first_at: dict[tuple[int, int], float] = {}
    for at, event_id in zip(listener.received, listener.ids, strict=True):
        first_at.setdefault(event_id, at)
    one_to_one, covered = [], []
    for published, event_id in publications:
        at = earliest[bisect.bisect_left(ids_sorted, event_id)]
        covered.append(max(0.0, at - published))
        exact = first_at.get(event_id, math.inf)
        one_to_one.append(max(0.0, exact - published))
    known = {event_id for _, event_id in publications}
    return Account(
        one_to_one,
        covered,
        extra=sum(1 for event_id in listener.ids if event_id not in known),
        duplicates=len(listener.ids) - len(set(listener.ids)),
    )


async def drain(crowd: Crowd, pending: Callable[[Listener], bool], args: argparse.Namespace) -> float:
    """Wait until no open listener is ``pending``, or ``--quiet`` seconds pass without a receipt or an end of a
    stream, or ``--drain`` seconds; returns the seconds waited."""
    t0 = now()
    deadline = t0 + args.drain
    crowd.last_receipt = max(crowd.last_receipt, t0)
    while True:
        waiting = any(listener.ended is None and pending(listener) for listener in crowd.listeners)
        current = now()
        if not waiting or current >= deadline or current - crowd.last_receipt >= args.quiet:
            return current - t0
        crowd.changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(crowd.changed.wait(), 0.2)


def status_of(pid: int) -> dict[str, int]:
    """``Threads`` and ``VmRSS`` of a process; empty once it is gone (a killed worker)."""
    try:
        values = proc_status(pid)
    except OSError:
        return {}
    return values if "VmRSS" in values else {}


async def kill_and_resume(
    victim: subprocess.Popen[bytes],
    crowd: Crowd,
    port: int,
    at: float,
    args: argparse.Namespace,
    report: dict[str, Any],
) -> None:
    """At ``at``, ``kill -9`` the worker ``victim``; each of its listeners, once its stream broke, listens again on
    ``port`` (the other worker) with the last event id it received (or its acknowledgement's position)."""
    await asyncio.sleep(max(0.0, at - now()))
    with contextlib.suppress(OSError):
        report["cpu_s_at_kill"] = proc_cpu_seconds(serving_pid(victim))
    killed = now()
    os.kill(serving_pid(victim), signal.SIGKILL)
    report["killed_at"] = killed
    victims = [listener for listener in crowd.listeners if listener.port != port]
    gate = asyncio.Semaphore(args.concurrency)
    took: list[float] = []
    failures: list[str] = []

    async def one(listener: Listener) -> None:
        if listener.task is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(listener.task), args.connect_timeout)
        if listener.writer is not None:
            listener.writer.close()
        async with gate:
            try:
                await listener.connect(port, 2 * 10**6 + listener.index, args.connect_timeout, listener.last_id)
            except (OSError, TimeoutError, asyncio.IncompleteReadError, Refused) as exc:
                failures.append(f"{type(exc).__name__}: {exc}")
                return
        listener.reconnects += 1
        took.append(now() - killed)

    await asyncio.gather(*(one(listener) for listener in victims))
    report.update(
        victims=len(victims),
        resumed=len(took),
        failed=len(failures),
        failures=failures[:3],
        resumed_p50_s=statistics.median(took) if took else None,
        resumed_max_s=max(took) if took else None,
    )


async def measure(
    kind: str,
    workers: list[tuple[subprocess.Popen[bytes], int]],
    n: int,
    rate: float,
    plan: list[tuple[str, str]],
    env: dict[str, str],
    args: argparse.Namespace,
) -> dict[str, Any]:
    from mcp_resources.subscriptions import notify_resource_updated

    ports = [port for _, port in workers]
    pids = [serving_pid(process) for process, _ in workers]
    uris = list(dict.fromkeys(uri for _, uri in plan))
    warm_plan = plan[: len(uris)]  # listener i watches document i % documents: one listener of each
    # Warm-up: a listener per document and an update of each, so that pools, caches and allocators have grown.
    warm = await open_crowd(ports, warm_plan, args.concurrency, args.connect_timeout, first_id=10**6)
    if warm.refused or not warm.listeners:
        raise RuntimeError(f"{kind}: warm-up listeners refused ({warm.refused}): {warm.refusals}")
    for uri in uris:
        await asyncio.to_thread(notify_resource_updated, uri)
    await drain(warm, lambda listener: not listener.received, argparse.Namespace(drain=10.0, quiet=5.0))
    warmed = sum(1 for listener in warm.listeners if listener.received)
    await warm.close()
    await asyncio.sleep(args.settle)

    t0 = now()
    crowd = await open_crowd(ports, plan, args.concurrency, args.connect_timeout, first_id=1)
    connect_s = now() - t0
    connected = len(crowd.listeners)
    await asyncio.sleep(args.settle)
    before = [status_of(pid) for pid in pids]

    cpu0, client0 = [proc_cpu_seconds(pid) for pid in pids], resource.getrusage(resource.RUSAGE_SELF)
    kill: dict[str, Any] = {}
    killer: list[asyncio.Task[None]] = []
    if args.kill_at and len(workers) > 1:
        # The publisher starts 0.2 s after GO; the first worker dies ``--kill-at`` of the way through.
        def on_go(go: float) -> None:
            at = go + 0.2 + args.kill_at * args.duration
            killer.append(asyncio.ensure_future(kill_and_resume(workers[0][0], crowd, ports[1], at, args, kill)))

        published = await publish(env, uris, rate, args, on_go)
        if killer:
            await asyncio.wait_for(killer[0], args.connect_timeout * 2 + 30)
    else:
        published = await publish(env, uris, rate, args)
    by_uri: dict[str, list[float]] = {uri: [] for uri in uris}
    global_index: dict[str, list[int]] = {uri: [] for uri in uris}
    for k, (t, index) in enumerate(published["publications"]):
        by_uri[uris[index]].append(t)
        global_index[uris[index]].append(k)
    ids = await asyncio.to_thread(log_ids, args.redis_url, {uri: len(times) for uri, times in by_uri.items()})
    # (time, id) of each publication that reached the log; those that did not (the tail of a short list is the
    # newest, so the earliest go without an id) count for nobody.
    owed = {uri: list(zip(times[len(times) - len(ids[uri]) :], ids[uri], strict=True)) for uri, times in by_uri.items()}
    unlogged = sum(len(by_uri[uri]) - len(owed[uri]) for uri in uris)
    last = {uri: pairs[-1][1] if pairs else (0, 0) for uri, pairs in owed.items()}
    drain_s = await drain(crowd, lambda listener: not listener.ids or max(listener.ids) < last[listener.uri], args)
    cpu_s = sum(
        (kill.get("cpu_s_at_kill", 0.0) if killer and j == 0 else proc_cpu_seconds(pid)) - cpu0[j]
        for j, pid in enumerate(pids)
    )
    client1 = resource.getrusage(resource.RUSAGE_SELF)
    client_cpu_s = (client1.ru_utime + client1.ru_stime) - (client0.ru_utime + client0.ru_stime)
    after = [status_of(pid) for pid in pids]

    expected = sum(len(owed[listener.uri]) for listener in crowd.listeners)
    one_to_one: list[float] = []
    covered: list[float] = []
    extra = duplicates = short = 0
    gaps: list[int] = []
    # Per publication: covered deliveries and the slowest of them (the fan-out time), to see when a run fell.
    per_publication: list[list[float]] = [[0, 0.0] for _ in published["publications"]]
    offset = {uri: len(by_uri[uri]) - len(owed[uri]) for uri in uris}
    for listener in crowd.listeners:
        mine = account(listener, owed[listener.uri])
        one_to_one += mine.one_to_one
        covered += mine.covered
        extra += mine.extra
        duplicates += mine.duplicates
        gaps.append(mine.gap)
        short += any(math.isinf(latency) for latency in mine.one_to_one)
        for position, latency in enumerate(mine.covered):
            if not math.isinf(latency):
                slot = per_publication[global_index[listener.uri][offset[listener.uri] + position]]
                slot[0] += 1
                slot[1] = max(slot[1], latency)
    ended = [listener for listener in crowd.listeners if listener.ended is not None]
    first = published["publications"][0][0] if published["publications"] else now()
    await crowd.close()

    delivered = sum(1 for latency in one_to_one if not math.isinf(latency))
    reached = sum(1 for latency in covered if not math.isinf(latency))
    received = [latency for latency in one_to_one if not math.isinf(latency)]
    result: dict[str, Any] = {
        "server": kind,
        "workers": len(workers),
        "listeners": n,
        "rate": rate,
        "connected": connected,
        "refused": crowd.refused,
        "refusals": crowd.refusals,
        "warmed": f"{warmed}/{len(warm.listeners)}",
        "connect_s": connect_s,
        "publications": len(published["publications"]),
        "unlogged": unlogged,
        "publisher": {key: value for key, value in published.items() if key != "publications"},
        "expected": expected,
        # one-to-one: a notification carrying the publication's own id
        "delivered": delivered,
        "delivered_share": delivered / expected if expected else None,
        # covered: a notification of the URI with that id or a later one (coalescing per URI)
        "covered": reached,
        "covered_share": reached / expected if expected else None,
        "coalesced": reached - delivered,
        "gap_total": sum(gaps),
        "clients_with_gap": sum(1 for gap in gaps if gap),
        "gap_max": max(gaps, default=0),
        "extra": extra,
        "duplicates": duplicates,
        "listeners_short": short,
        "ended_by_server": sum(1 for listener in ended),
        "ended_with_result": sum(1 for listener in ended if listener.final_result),
        "kill": {key: value - first if key == "killed_at" else value for key, value in kill.items()},
        "last_delivery_after_s": max(
            (listener.received[-1] for listener in crowd.listeners if listener.received), default=first
        )
        - first,
        "drain_s": drain_s,
        # A delivery that never came counts as infinitely late.
        "p50_ms": statistics.median(received) * 1e3 if received else None,
        "p99_ms": percentile(one_to_one, 0.99) * 1e3 if received else None,
        "covered_p50_ms": percentile(covered, 0.5) * 1e3 if reached else None,
        "covered_p99_ms": percentile(covered, 0.99) * 1e3 if reached else None,
        "max_ms": max(received) * 1e3 if received else None,
        "server_cpu_s": cpu_s,
        "server_cpu_us_per_delivery": cpu_s / max(1, reached) * 1e6,
        "client_cpu_s": client_cpu_s,
        "rss_before_kb": [s.get("VmRSS") for s in before],
        "rss_after_kb": [s.get("VmRSS") for s in after],
        "threads_after": [s.get("Threads") for s in after],
        # [published at (s from the first), covered deliveries, slowest of them (ms)] per publication
        "per_publication": [
            [round(t - first, 3), int(count), round(slowest * 1e3, 1)]
            for (t, _), (count, slowest) in zip(published["publications"], per_publication, strict=True)
        ],
    }
    killed = (
        f"; worker 0 killed at {result['kill'].get('killed_at', 0):.1f} s, {kill.get('resumed', 0)}/"
        f"{kill.get('victims', 0)} resumed on the other (last after {kill.get('resumed_max_s') or 0:.1f} s)"
        if kill
        else ""
    )
    print(
        f"  {kind:>4} x{len(workers)} N={n:,} R={rate:g}/s: {connected:,} connected in {connect_s:.1f} s "
        f"({crowd.refused} refused); {result['publications']} publications (achieved "
        f"{published['achieved_rate'] or 0:.1f}/s, late p99 {published['late_ms_p99'] or 0:.0f} ms){killed}; "
        f"covered {reached:,}/{expected:,} ({result['covered_share'] or 0:.2%}), one-to-one {delivered:,} "
        f"({result['delivered_share'] or 0:.2%}); gap {result['gap_total']} in {result['clients_with_gap']} clients; "
        f"{extra} extra, {duplicates} duplicates; {len(ended)} streams ended by the server "
        f"({result['ended_with_result']} with a final result); covered p50 {fmt_ms(result['covered_p50_ms'])}, "
        f"p99 {fmt_ms(result['covered_p99_ms'])}; one-to-one p99 {fmt_ms(result['p99_ms'])}; drain {drain_s:.1f} s; "
        f"server CPU {cpu_s:.1f} s ({result['server_cpu_us_per_delivery']:.0f} µs/delivery), client CPU "
        f"{client_cpu_s:.1f} s",
        flush=True,
    )
    return result


async def measure_revocation(
    workers: list[tuple[subprocess.Popen[bytes], int]],
    plan: list[tuple[str, str]],
    pks: list[int],
    env: dict[str, str],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """Listener ``i`` holds token ``pks[i]`` alone; another process revokes the tokens ``--revoke-rate`` a second.
    Latency: the revoke call's start to the stream's final result."""
    ports = [port for _, port in workers]
    crowd = await open_crowd(ports, plan, args.concurrency, args.connect_timeout, first_id=1)
    await asyncio.sleep(args.settle)
    config = {"pks": pks[: len(plan)], "rate": args.revoke_rate}
    revoked = await run_role(env, "revoker", config, len(plan) / args.revoke_rate * 3 + 60)
    due = {index for _, index in revoked["revocations"]}
    drain_s = await drain(crowd, lambda listener: listener.index in due, args)
    by_index = {listener.index: listener for listener in crowd.listeners}
    latencies: list[float] = []
    for t, index in revoked["revocations"]:
        listener = by_index.get(index)
        if listener is not None:
            final = listener.final_at
            latencies.append(max(0.0, final - t) if final is not None else math.inf)
    open_after = sum(1 for listener in crowd.listeners if listener.ended is None)
    without_result = sum(1 for listener in crowd.listeners if listener.ended is not None and not listener.final_result)
    await crowd.close()
    finite = [latency for latency in latencies if not math.isinf(latency)]
    result: dict[str, Any] = {
        "workers": len(workers),
        "listeners": len(plan),
        "connected": len(crowd.listeners),
        "refused": crowd.refused,
        "revoked": len(revoked["revocations"]),
        "rate": args.revoke_rate,
        "revoke_call_ms_p50": revoked["call_ms_p50"],
        "revoke_call_ms_max": revoked["call_ms_max"],
        "ended_with_result": len(finite),
        "ended_without_result": without_result,
        "still_open": open_after,
        "p50_ms": percentile(latencies, 0.5) * 1e3 if finite else None,
        "p99_ms": percentile(latencies, 0.99) * 1e3 if finite else None,
        "max_ms": max(latencies) * 1e3 if finite else None,
        "drain_s": drain_s,
    }
    print(
        f"  revocation x{len(workers)}: {result['connected']:,}/{len(plan):,} listeners, each its own token; "
        f"{result['revoked']:,} revoked at {args.revoke_rate:g}/s (call p50 {revoked['call_ms_p50'] or 0:.1f} ms); "
        f"{len(finite):,} ended with the final result, {without_result} without, {open_after} still open; "
        f"revoke to final result p50 {fmt_ms(result['p50_ms'])}, p99 {fmt_ms(result['p99_ms'])}, "
        f"max {fmt_ms(result['max_ms'])}",
        flush=True,
    )
    return result


def full(run: dict[str, Any]) -> bool:
    """Every publication covered for every client, nobody refused, every killed worker's client resumed."""
    resumed = not run["kill"] or run["kill"].get("failed", 1) == 0
    return bool(run["connected"]) and run["covered"] >= run["expected"] and not run["refused"] and resumed


@contextlib.contextmanager
def uvicorn_workers(
    kind: str, label: str, env: dict[str, str], count: int
) -> Iterator[list[tuple[subprocess.Popen[bytes], int, Path]]]:
    """``count`` uvicorn workers of ``kind``, one process and port each."""
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(uvicorn_server(kind, f"{label}-w{j}", env)) for j in range(count)]


def note_logs(kind: str, logs: list[Path]) -> list[dict[str, Any]]:
    summaries = [log_summary(log) for log in logs]
    for summary in summaries:
        noted = [line for line in summary["first"] if "graceful shutdown exceeded" not in line]
        if noted:  # (uvicorn cancels the streams still open at shutdown: not worth a line)
            print(f"    {kind} server log ({summary['lines']} lines): {noted[:3]}")
    return summaries


async def run_all(
    args: argparse.Namespace, sizes: list[int], redis_url: str, env: dict[str, str], data: dict[str, Any]
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    runs: list[dict[str, Any]] = []
    kinds = [kind.strip() for kind in args.servers.split(",") if kind.strip()]
    kinds += [WITHOUT + name for name in args.ablate]
    step = args.duration * 2 + args.drain + 2 * args.connect_timeout + 300  # one measurement's time-out
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
                with uvicorn_workers(kind, f"{n}-{rate:g}", env, args.workers) as started:
                    workers = [(process, port) for process, port, _ in started]
                    run = await asyncio.wait_for(measure(kind, workers, n, rate, plan, env, args), step)
                run["log"] = note_logs(kind, [log for _, _, log in started])
                runs.append(run)
                if not full(run):
                    fallen.add(kind)
            turn += 1
    revocation = None
    if args.revoke:
        flush_redis(redis_url)
        plan = listener_plan(data, args.revoke, "distinct")
        with uvicorn_workers("ours", f"revoke-{args.revoke}", env, args.workers) as started:
            workers = [(process, port) for process, port, _ in started]
            revocation = await asyncio.wait_for(
                measure_revocation(workers, plan, data["distinct_pks"], env, args), step
            )
        revocation["log"] = note_logs("ours", [log for _, _, log in started])
    flush_redis(redis_url)
    return runs, revocation


# Summary -------------------------------------------------------------------------------------------------


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per server and N: the highest rate with 100% delivered and the first below; per N: the ratios at the target."""
    servers = []
    for n in sorted({r["listeners"] for r in runs}):
        for kind in sorted({r["server"] for r in runs}, key=lambda kind: (kind != "ours", kind != "bare", kind)):
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
                    "share_at_first_below": below["covered_share"] if below else None,
                    "one_to_one_at_first_below": below["delivered_share"] if below else None,
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
                # covered (coalescing per URI allowed, as the issue does); one-to-one beside it
                "delivered_ratio": ours["covered"] / bare["covered"] if bare["covered"] else None,
                "ours_share": ours["covered_share"],
                "bare_share": bare["covered_share"],
                "ours_one_to_one_share": ours["delivered_share"],
                "bare_one_to_one_share": bare["delivered_share"],
                "p50_ratio": ratio(ours["covered_p50_ms"], bare["covered_p50_ms"]),
                "p99_ratio": ratio(ours["covered_p99_ms"], bare["covered_p99_ms"]),
                "ours_p99_ms": ours["covered_p99_ms"],
                "bare_p99_ms": bare["covered_p99_ms"],
                "one_to_one_p99_ratio": ratio(ours["p99_ms"], bare["p99_ms"]),
                "ours_ended": ours["ended_by_server"],
                "ours_gap": ours["gap_total"],
                "bare_gap": bare["gap_total"],
                "ours_resumed": ours["kill"].get("resumed"),
                "bare_resumed": bare["kill"].get("resumed"),
                # Each speed-up switched off (--ablate), in the same run: its p99 over ours and over bare.
                "ablations": {
                    run["server"].removeprefix(WITHOUT): {
                        "p99_ms": run["covered_p99_ms"],
                        "p50_ms": run["covered_p50_ms"],
                        "covered_share": run["covered_share"],
                        "p99_over_ours": ratio(run["covered_p99_ms"], ours["covered_p99_ms"]),
                        "p99_over_bare": ratio(run["covered_p99_ms"], bare["covered_p99_ms"]),
                    }
                    for run in runs
                    if run["server"].startswith(WITHOUT) and run["listeners"] == n and run["rate"] == rate
                },
            }
        )
    return {"servers": servers, "points": points}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--listeners", default="500,5000", help="comma-separated listener counts (default 500,5000; '' for none)"
    )
    parser.add_argument("--rates-500", default=",".join(map(str, SWEEPS[500])), help="the sweep at 500 listeners")
    parser.add_argument("--rates-5000", default=",".join(map(str, SWEEPS[5000])), help="the sweep at 5,000")
    parser.add_argument("--rates", default="", help="the sweep for any other listener count (default: 1,2,4,...)")
    parser.add_argument("--quick", action="store_true", help="500 listeners only, 10 s of updates, 10..80/s")
    parser.add_argument("--duration", type=float, default=120.0, help="seconds of updates per measurement")
    parser.add_argument(
        "--workers", type=int, default=2, help="uvicorn processes per server (listener i on i %% workers)"
    )
    parser.add_argument(
        "--kill-at",
        type=float,
        default=0.0,
        help="kill -9 the first worker this far through the updates (0.5: half way; needs --workers 2 or more); "
        "its listeners resume on the second with their last event id",
    )
    parser.add_argument("--documents", type=int, default=20)
    parser.add_argument("--users", type=int, default=4, help="owners of the documents (round-robin)")
    parser.add_argument("--tokens", choices=["shared", "distinct"], default="shared")
    parser.add_argument(
        "--revoke",
        type=int,
        default=0,
        help="after the sweeps: this many listeners of ours, each on a token of its own, whose tokens another "
        "process revokes (AccessToken.revoke()); revoke-to-final-result latency",
    )
    parser.add_argument("--revoke-rate", type=float, default=100.0, help="revocations a second (open loop)")
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
    parser.add_argument(
        "--ablate",
        default="",
        help="comma-separated speed-ups (benchmarks/ablation.py) to measure switched off, each as a server of its "
        "own (ours-without-NAME) in the same run: its p99 against ours and bare at the target rates",
    )
    parser.add_argument(
        "--server",
        choices=["uvicorn", "gevent"],
        default="uvicorn",
        help="how ours is served: uvicorn (testproject.asgi), or gunicorn's gevent worker (testproject.wsgi), one "
        "gunicorn with one worker per --workers; the bare reader is always uvicorn's",
    )
    parser.add_argument("--output", default="delivery", help="results/<output>.json (default delivery)")
    parser.add_argument("--role", choices=["main", "publisher", "revoker"], default="main", help=argparse.SUPPRESS)
    parser.add_argument("--config", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    SERVER[0] = args.server
    args.ablate = [name.strip() for name in args.ablate.split(",") if name.strip()]
    from benchmarks.ablation import SPEED_UPS

    unknown = [name for name in args.ablate if name not in SPEED_UPS]
    if unknown:
        parser.error(f"--ablate: unknown speed-up(s) {', '.join(unknown)}; known: {', '.join(SPEED_UPS)}")
    if args.role == "publisher":
        run_publisher(json.loads(args.config))
        return
    if args.role == "revoker":
        run_revoker(json.loads(args.config))
        return
    if args.documents % args.publisher_lanes:
        parser.error("--publisher-lanes must divide --documents (each lane owns whole documents)")
    if args.kill_at and args.workers < 2:
        parser.error("--kill-at needs --workers 2 or more (the listeners resume on another worker)")

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
    redis_url = args.redis_url = f"redis://127.0.0.1:6379/{args.redis_db}"
    most = max([*sizes, args.revoke])
    limit = raise_fd_limit(most + args.documents + 1024)
    if limit < most + 256:
        raise SystemExit(f"RLIMIT_NOFILE is {limit}: too low for {most:,} listeners")
    try:
        flush_redis(redis_url)
    except Exception as exc:
        raise SystemExit(f"Redis is not reachable at {redis_url} ({type(exc).__name__}: {exc})") from exc

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mcp-delivery-") as tmp:
        env = server_env(Path(tmp), redis_url)
        os.environ.update({key: env[key] for key in ("DJANGO_SETTINGS_MODULE", "MCP_DEMO_DB", "MCP_REDIS_URL")})
        os.environ["MCP_RESOURCE_URI"] = RESOURCE_URI
        import django

        django.setup()
        distinct = max(args.revoke, max(sizes, default=0) if args.tokens == "distinct" else 0)
        data = prepare(env, args, distinct)
        print(
            f"delivery: listeners on {args.workers} worker(s) per server (ours under {args.server}; listener i on "
            f"worker i % {args.workers}), ours vs a bare reader of the Redis stream, publications from a third "
            "process, "
            f"{args.documents} documents of {args.users} users, tokens {args.tokens}, Redis db {args.redis_db}, "
            f"{args.duration:g} s of updates per point"
            + (f", worker 0 killed {args.kill_at:g} of the way" if args.kill_at else "")
            + "; sweeps "
            + "; ".join(f"N={n:,}: {', '.join(f'{r:g}' for r in args.sweeps[n])}/s" for n in sizes)
            + (f"; then {args.revoke:,} tokens revoked at {args.revoke_rate:g}/s" if args.revoke else ""),
            flush=True,
        )
        runs, revocation = asyncio.run(asyncio.wait_for(run_all(args, sizes, redis_url, env, data), args.deadline))

    summary = summarize(runs)
    from benchmarks.run import git_state

    for s in summary["servers"]:
        highest = "none" if s["highest_full_rate"] is None else f"{s['highest_full_rate']:g}/s"
        print(
            f"{s['server']:>4} N={s['listeners']:,}: highest rate with 100% covered {highest}, first rate below "
            + (
                f"{s['first_rate_below']:g}/s ({s['share_at_first_below']:.1%} covered, "
                f"{s['one_to_one_at_first_below']:.1%} one-to-one)"
                if s["first_rate_below"] is not None
                else f"none up to {max(s['rates']):g}/s"
            )
        )
    for p in summary["points"]:
        delivered_ok = p["delivered_ratio"] is not None and p["delivered_ratio"] >= DELIVERED_TARGET
        p99_ok = p["p99_ratio"] is not None and p["p99_ratio"] <= P99_TARGET
        print(
            f"N={p['listeners']:,} at {p['rate']:g}/s: covered ours/bare "
            + ("n/a" if p["delivered_ratio"] is None else f"{p['delivered_ratio']:.3f}")
            + f" (ours {p['ours_share']:.2%}, bare {p['bare_share']:.2%}; one-to-one ours "
            f"{p['ours_one_to_one_share']:.2%}, bare {p['bare_one_to_one_share']:.2%}; target >= "
            f"{DELIVERED_TARGET:g}: {'met' if delivered_ok else 'MISSED'}); covered p99 ours/bare "
            f"{fmt_ms(p['ours_p99_ms'])}/{fmt_ms(p['bare_p99_ms'])} = "
            + ("n/a" if p["p99_ratio"] is None else f"{p['p99_ratio']:.2f}x")
            + f" (target <= {P99_TARGET:g}x: {'met' if p99_ok else 'MISSED'}); gap ours {p['ours_gap']}, bare "
            f"{p['bare_gap']}"
        )
        for name, off in p["ablations"].items():
            print(
                f"  without {name}: covered p99 {fmt_ms(off['p99_ms'])} (p50 {fmt_ms(off['p50_ms'])}, "
                f"{off['covered_share']:.2%} covered) = "
                + ("n/a" if off["p99_over_ours"] is None else f"{off['p99_over_ours']:.2f}x ours")
                + ", "
                + ("n/a" if off["p99_over_bare"] is None else f"{off['p99_over_bare']:.2f}x bare")
            )
    if revocation is not None:
        p99 = revocation["p99_ms"]
        print(
            f"revocation: p99 {fmt_ms(p99)} (target <= {REVOKE_TARGET_MS:g} ms: "
            f"{'met' if p99 is not None and p99 <= REVOKE_TARGET_MS else 'MISSED'})"
        )
    print(f"took {time.monotonic() - started:.0f} s")
    write_result(
        args.output,
        {
            "runs": runs,
            **summary,
            "revocation": revocation,
            "targets": {
                "delivered_ratio": DELIVERED_TARGET,
                "p99_ratio": P99_TARGET,
                "revoke_p99_ms": REVOKE_TARGET_MS,
            },
            "config": {
                key: value for key, value in vars(args).items() if key not in ("role", "config", "sweeps", "redis_url")
            },
            "sweeps": {str(n): rates for n, rates in args.sweeps.items()},
            "fd_limit": limit,
            "cpus": os.cpu_count(),
            "load_average": os.getloadavg(),
            "commit": git_state(),
            "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        },
    )


if __name__ == "__main__":
    main()
