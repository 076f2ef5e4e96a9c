"""A small closed-loop HTTP load generator (stdlib only), run as its own process by ``bench_http.py``.

``--concurrency`` threads each keep one ``http.client`` connection (reopened whenever the server closes it) and
send the same POST back to back for ``--warmup`` then ``--duration`` seconds; only requests that complete inside
the measured window count. Every response must be 200 and contain ``--expect``. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import threading
import time
from pathlib import Path
from urllib.parse import urlparse


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--body-file", required=True)
    parser.add_argument("--headers", required=True, help="JSON object")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--expect", default="")
    parser.add_argument("--timeout", type=float, default=10.0)
    args = parser.parse_args()

    url = urlparse(args.url)
    body = Path(args.body_file).read_bytes()
    headers = json.loads(args.headers)
    expect = args.expect.encode()
    start = time.perf_counter()
    measure_from = start + args.warmup
    stop_at = measure_from + args.duration
    lock = threading.Lock()
    latencies: list[float] = []
    counts = {"ok": 0, "errors": 0, "reconnects": 0}
    first_error: list[str] = []

    def worker() -> None:
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=args.timeout)
        mine: list[float] = []
        ok = errors = reconnects = 0
        error = ""
        while True:
            t0 = time.perf_counter()
            if t0 >= stop_at:
                break
            try:
                conn.request("POST", url.path, body, headers)
                response = conn.getresponse()
                data = response.read()
                if response.will_close:
                    conn.close()
                    reconnects += 1
                good = response.status == 200 and expect in data
                if not good and not error:
                    error = f"HTTP {response.status}: {data[:200]!r}"
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                good = False
                if not error:
                    error = f"{type(exc).__name__}: {exc}"
            t1 = time.perf_counter()
            if t0 >= measure_from and t1 <= stop_at:
                if good:
                    ok += 1
                    mine.append(t1 - t0)
                else:
                    errors += 1
        conn.close()
        with lock:
            latencies.extend(mine)
            counts["ok"] += ok
            counts["errors"] += errors
            counts["reconnects"] += reconnects
            if error and not first_error:
                first_error.append(error)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(args.concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=args.warmup + args.duration + args.timeout + 5)
    latencies.sort()
    result = {
        "requests": counts["ok"],
        "errors": counts["errors"],
        "reconnects": counts["reconnects"],
        "seconds": args.duration,
        "rps": counts["ok"] / args.duration,
        "p50_ms": statistics.median(latencies) * 1e3 if latencies else None,
        "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1e3 if latencies else None,
        "first_error": first_error[0] if first_error else None,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
