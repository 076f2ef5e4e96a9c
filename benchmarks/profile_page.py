"""Hot spots (diagnostic, not a benchmark): cProfile of the reference page through the core and through the whole
in-process WSGI request (view, authentication, core, response), top functions by own time and by cumulative
time. ``run.py --profile`` runs it and keeps the text in ``results/profile.txt``.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import RESULTS_DIR, load_fixture, mcp_body, mcp_headers, setup_django


def profile(fn: object, calls: int, top: int) -> str:
    for _ in range(20):
        fn()  # type: ignore[operator]
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        fn()  # type: ignore[operator]
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--page", choices=["shallow", "mid"], default="shallow")
    args = parser.parse_args()

    setup_django()
    from django.core.handlers.wsgi import WSGIHandler

    from benchmarks.bench_drf import environ_factory, wsgi_caller
    from benchmarks.pages import context_for, core_objects, cursor_at, reference_pages

    fixture = load_fixture()
    page = next(p for p in reference_pages(fixture) if p["name"] == args.page)
    user = page["user"]
    server, template = core_objects()
    ctx = context_for(user)
    where = cursor_at(server, template, ctx, user, 0.5, fixture["page_size"])
    params = {"cursor": where["cursor"]}
    request = wsgi_caller(
        WSGIHandler(), environ_factory("POST", "/mcp", "", mcp_body(where["cursor"]), mcp_headers(user["token"]))
    )
    text = f"# core page: {page['label']}, {args.calls} calls\n"
    text += profile(lambda: server.call("resources/list", params, ctx), args.calls, args.top)
    text += f"\n# whole WSGI request: {page['label']}, {args.calls} calls\n"
    text += profile(request, args.calls, args.top)
    out = RESULTS_DIR / "profile.txt"
    out.write_text(text)
    print(text)
    print(f"(written to {out})")


if __name__ == "__main__":
    main()
