"""Shared helpers for the benchmark scripts: paths, Django set-up, the fixture description and interleaved timing.

Every script measures its contenders interleaved in one process (round-robin, order rotated every round) and
reports medians and the ratios of those medians: absolute times drift by about 30% between runs on this kind of
machine, ratios measured in one run do not.
"""

from __future__ import annotations

import json
import os
import secrets
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = ROOT / "benchmarks"
RESULTS_DIR = BENCH_DIR / "results"
FIXTURE_FILE = RESULTS_DIR / "fixture.json"

PROTOCOL_VERSION = "2026-07-28"
DOC_TEMPLATE = "learn://documents/{}"
DEPTHS = (0.0, 0.5, 0.99)
IN_PROCESS_HOST = "127.0.0.1:8000"


def python_path(first: Path = ROOT) -> str:
    """``PYTHONPATH`` for a process of the benchmarks: ``first`` (the tree to import), then whatever the caller's
    ``PYTHONPATH`` held besides the repository (e.g. a directory with an extra package)."""
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != ROOT]
    return os.pathsep.join([str(first), *extra])


def setup_django() -> None:
    """Import path and settings for a script started by ``run.py`` (or by hand with the same environment)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchmarks.settings")
    # One CURSOR_KEYS secret for this script and every server it starts (run.py sets one per run).
    os.environ.setdefault("MCP_BENCH_CURSOR_KEY", secrets.token_urlsafe(32))
    import django

    django.setup()


def load_fixture() -> dict[str, Any]:
    """What ``fixture.py setup`` wrote: database, page size, users (id, size, first document id, token)."""
    return json.loads(FIXTURE_FILE.read_text())


def write_result(name: str, data: dict[str, Any]) -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")
    return path


def depth_index(size: int, depth: float, page_size: int) -> int:
    """Rows skipped before the page at ``depth``, kept so that the page is full and not the last one."""
    return max(0, min(round(size * depth), size - page_size - 1))


def calibrate(fn: Callable[[], Any], target_seconds: float, max_calls: int = 100_000) -> int:
    """Calls per batch so that one batch takes about ``target_seconds`` (at least one call)."""
    t0 = time.perf_counter()
    fn()
    once = time.perf_counter() - t0
    n, elapsed = 1, once
    while elapsed < 0.02 and n < max_calls:
        n *= 4
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        elapsed = time.perf_counter() - t0
    per_call = elapsed / n
    return max(1, min(max_calls, round(target_seconds / per_call)))


def interleaved(
    contenders: dict[str, Callable[[], Any]],
    *,
    rounds: int,
    batch_seconds: float,
    warmup: int = 3,
) -> dict[str, list[float]]:
    """Seconds per call of every contender in every round, measured round-robin with the order rotated.

    Each contender is warmed up, calibrated once to about ``batch_seconds`` per batch, then timed as one batch per
    round; the median across rounds is what scripts report.
    """
    names = list(contenders)
    for name in names:
        for _ in range(warmup):
            contenders[name]()
    batches = {name: calibrate(contenders[name], batch_seconds) for name in names}
    samples: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            fn, n = contenders[name], batches[name]
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            samples[name].append((time.perf_counter() - t0) / n)
    return samples


def median(values: list[float]) -> float:
    return statistics.median(values)


def fmt_time(seconds: float) -> str:
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds * 1e6:.2f} µs"


def verdict(ok: bool) -> str:
    return "meets target" if ok else "MISSES target"


def mcp_body(cursor: str | None, request_id: int = 1) -> bytes:
    """A 2026-07-28 ``resources/list`` request (the same bytes for every server but the cursor)."""
    params: dict[str, Any] = {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    }
    if cursor is not None:
        params["cursor"] = cursor
    message = {"jsonrpc": "2.0", "id": request_id, "method": "resources/list", "params": params}
    return json.dumps(message, separators=(",", ":")).encode()


def mcp_headers(token: str | None) -> dict[str, str]:
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": PROTOCOL_VERSION,
        "Mcp-Method": "resources/list",
    }
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers
