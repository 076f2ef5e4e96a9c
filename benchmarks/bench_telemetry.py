"""Item 10: what telemetry costs a request (``mcp_resources.telemetry``, docs/telemetry.md).

The page request of item 2 (a 2026-07-28 ``resources/list`` of one page half-way through the smallest inventory,
its bearer token validated) runs in-process through Django's ``WSGIHandler`` under three telemetry modes, switched in
the same process and interleaved round by round:

- ``off``: no telemetry at all (the package without ``opentelemetry-api``);
- ``noop``: ``opentelemetry-api`` with no SDK configured (the API's no-op tracer and meter);
- ``sdk``: the SDK recording every span (``SimpleSpanProcessor`` into an ``InMemorySpanExporter``, emptied after every
  batch) and every measurement (a ``MeterProvider`` with an ``InMemoryMetricReader``).

The modes take turns request by request (a round is one request of each, the order rotated), so that the machine's
load drifts alike for the three. Each request is timed alone; the result is the ratio of the medians (p50) of every
request of each mode. Targets: ``noop`` / ``off`` <= 1.03, ``sdk`` / ``off`` <= 1.08.

    python benchmarks/bench_telemetry.py [--rounds 1500] [--batch 1]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_drf import environ_factory, wsgi_caller
from benchmarks.common import load_fixture, mcp_body, mcp_headers, setup_django, verdict, write_result

TARGETS = {"noop": 1.03, "sdk": 1.08}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=1500)
    parser.add_argument("--batch", type=int, default=1, help="requests of one mode in a row, each timed alone")
    args = parser.parse_args()

    setup_django()
    from django.core.handlers.wsgi import WSGIHandler
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from benchmarks.pages import context_for, core_objects, cursor_at, reference_pages
    from mcp_resources import telemetry

    fixture = load_fixture()
    page = reference_pages(fixture)[0]
    user = page["user"]
    server, template = core_objects()
    where = cursor_at(server, template, context_for(user), user, 0.5, fixture["page_size"])
    request = wsgi_caller(
        WSGIHandler(), environ_factory("POST", "/mcp", "", mcp_body(where["cursor"]), mcp_headers(user["token"]))
    )
    status, body = request()
    if not status.startswith("200") or len(json.loads(body)["result"]["resources"]) != fixture["page_size"]:
        raise SystemExit(f"the view answered {status}: {body[:300]!r}")

    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    telemetry.configure()
    noop = telemetry._instruments
    telemetry.configure(tracer_provider=tracer_provider, meter_provider=meter_provider)
    sdk = telemetry._instruments
    modes: dict[str, Any] = {"off": None, "noop": noop, "sdk": sdk}

    def run(instruments: Any) -> Callable[[], list[float]]:
        def batch() -> list[float]:
            telemetry._instruments = instruments
            times = []
            for _ in range(args.batch):
                t0 = time.perf_counter()
                request()
                times.append(time.perf_counter() - t0)
            exporter.clear()
            return times

        return batch

    batches = {name: run(instruments) for name, instruments in modes.items()}
    for _ in range(20):  # warm-up
        for batch in batches.values():
            batch()
    samples: dict[str, list[float]] = {name: [] for name in modes}
    names = list(modes)
    for r in range(args.rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            samples[name].extend(batches[name]())
    telemetry.configure()
    recorded = reader.get_metrics_data()
    histogram_points = sum(
        len(metric.data.data_points)
        for rm in recorded.resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
        if metric.name == "mcp.server.operation.duration"
    )
    if not histogram_points:
        raise SystemExit("the sdk mode recorded no mcp.server.operation.duration")

    p50 = {name: statistics.median(values) for name, values in samples.items()}
    ratios = {name: p50[name] / p50["off"] for name in ("noop", "sdk")}
    print(
        f"item 10: telemetry overhead, in-process WSGI, {page['label']}, {args.rounds} rounds x {args.batch} "
        f"requests a mode, {fixture['vendor']}"
    )
    for name in names:
        print(f"  {name}: p50 {p50[name] * 1e3:.3f} ms over {len(samples[name])} requests")
    for name, target in TARGETS.items():
        print(f"{name} / off p50: {ratios[name]:.3f}x (target <= {target:g}x: {verdict(ratios[name] <= target)})")
    write_result(
        "telemetry",
        {
            "page": page["label"],
            "rounds": args.rounds,
            "batch": args.batch,
            "p50_ms": {name: value * 1e3 for name, value in p50.items()},
            "ratios": ratios,
            "targets": TARGETS,
        },
    )


if __name__ == "__main__":
    main()
