"""The worth of the speed-ups the restructure removed, measured in the previous tree, one switched off at a time.

The previous tree (commit ``b965b88``, the last before the restructure) is checked out with ``git worktree add``
into ``benchmarks/results/previous-tree`` (git-ignored) and removed at the end. ``benchmarks/previous_tree`` is
copied into it and serves that tree's demo with its own settings on the benchmark database (its
``benchmarks.settings``), with one removed speed-up switched off per server (``MCP_BENCH_REMOVED_OFF``):

- ``token-lookup``: its narrow, precompiled token query; off: django-oauth-toolkit's ``validate_bearer_token``
  (``OAUTH2_VALIDATOR_CLASS`` set to a trivial subclass, which makes ``fast_path_available()`` false);
- ``prepared-statements``: ``PREPARE``/``EXECUTE`` of its fixed queries; off: ``PREPARED_STATEMENTS = False``;
- ``precompiled-listing``: the owner-scoped listing compiled once; off: a ``documents`` template subclass whose
  ``get_queryset()`` returns the same scope (built through the ORM on every page);
- ``front``: ``MCPWSGIApplication`` / ``MCPApplication`` skipping the middleware stack; off: Django's own WSGI or
  ASGI handler with the demo's middleware;
- ``asgi-threads`` (uvicorn only): ``MCPApplication``'s pool of ``ASGI_THREADS`` (2); off: the event loop's
  default executor.

Servers as the previous tree ran them: ``gunicorn`` (one ``gthread`` worker, 2 threads) and ``uvicorn``, with
persistent database connections, except under Django's ASGI handler (``front`` off under uvicorn), where Django
advises none (``benchmarks/serving.py``). The current tree's two default servers run in the same rounds, for the
before/after (``current-gunicorn``, ``current-uvicorn``; ``current-gunicorn`` under the ``gevent`` worker
docs/deployment.md now advises, so its ratio counts the worker class too). Every server gets the same authenticated
``resources/list`` page as item 5 (the previous tree's cursor sealed by its own code, ``previous_tree.seal``).
Each removed speed-up is reported as requests per second with it on / with it off, and p99 likewise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
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
    python_path,
    setup_django,
    write_result,
)
from benchmarks.serving import (
    ASGI_DATABASE,
    PYTHON,
    Contender,
    asgi_database,
    describe,
    free_port,
    gunicorn_argv,
    gunicorn_env,
    measure,
    paired_ratios,
    summarize,
    uvicorn_argv,
)

PREVIOUS_COMMIT = "b965b88"
WORKTREE = RESULTS_DIR / "previous-tree"
ENV = "MCP_BENCH_REMOVED_OFF"
MARK = "previous-tree: switched off"
SWITCHES = {
    "gunicorn": ["token-lookup", "prepared-statements", "precompiled-listing", "front"],
    "uvicorn": ["token-lookup", "prepared-statements", "precompiled-listing", "front", "asgi-threads"],
}
PREVIOUS_DATABASE = {"MCP_BENCH_CONN_MAX_AGE": "none"}  # as the previous tree's benchmarks ran both fronts


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def remove_worktree() -> None:
    if WORKTREE.exists():
        subprocess.run(["git", "worktree", "remove", "--force", str(WORKTREE)], cwd=ROOT, check=False)
        shutil.rmtree(WORKTREE, ignore_errors=True)
    subprocess.run(["git", "worktree", "prune"], cwd=ROOT, check=False)


def add_worktree(commit: str) -> None:
    remove_worktree()
    try:
        git("rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}")
    except subprocess.CalledProcessError:
        raise SystemExit(f"commit {commit} is not in this clone: fetch it, or name another with --commit") from None
    git("worktree", "add", "--detach", str(WORKTREE), commit)
    shutil.copytree(BENCH_DIR / "previous_tree", WORKTREE / "previous_tree")


def previous_env(off: str, database: dict[str, str]) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("MCP_BENCH_ABLATE") and key not in ("MCP_BENCH_TOKEN_CACHE_TTL", ENV)
    }
    env.update(
        PYTHONPATH=python_path(WORKTREE),
        DJANGO_SETTINGS_MODULE="previous_tree.settings",
        MCP_LOG_LEVEL="WARNING",
        **database,
    )
    if off:
        env[ENV] = off
    return env


def seal_previous(user: dict[str, Any], page_size: int) -> dict[str, Any]:
    """The page's cursor sealed by the previous tree's own code (its codec, binding and cursor format)."""
    completed = subprocess.run(
        [PYTHON, "-m", "previous_tree.seal"],
        cwd=WORKTREE,
        env=previous_env("", PREVIOUS_DATABASE),
        input=json.dumps({"user": user, "depth": 0.5, "page_size": page_size}),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if completed.returncode != 0:
        raise SystemExit(f"the previous tree could not seal a cursor:\n{completed.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=float, default=1.5)
    parser.add_argument("--duration", type=float, default=6.0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--commit", default=PREVIOUS_COMMIT, help="the previous tree's commit")
    parser.add_argument("--servers", default="gunicorn,uvicorn")
    parser.add_argument("--keep-worktree", action="store_true", help="leave the previous tree checked out")
    args = parser.parse_args()
    kinds = [k.strip() for k in args.servers.split(",") if k.strip()]
    if set(kinds) - set(SWITCHES):
        parser.error(f"servers: {', '.join(SWITCHES)}")

    setup_django()
    from benchmarks.pages import http_page

    fixture = load_fixture()
    page_size = fixture["page_size"]
    page = http_page(fixture)
    token = page["user"]["token"]
    try:
        add_worktree(args.commit)
        previous = seal_previous(page["user"], page_size)
        if previous["first_uri"] != page["expected"]:
            raise SystemExit(f"the previous tree's page starts at {previous['first_uri']}, not {page['expected']}")
        contenders: list[Contender] = []
        for kind in kinds:
            for off in ["", *SWITCHES[kind]]:
                port = free_port()
                if kind == "gunicorn":
                    argv = gunicorn_argv("previous_tree.wsgi:application", port, "gthread")
                    env = gunicorn_env("gthread")
                    database = PREVIOUS_DATABASE
                else:
                    argv, env = uvicorn_argv("previous_tree.asgi:application", port), {}
                    # Django's ASGI handler: no persistent connections, as Django advises (and as the current
                    # tree's uvicorn server runs).
                    database = ASGI_DATABASE if off == "front" else PREVIOUS_DATABASE
                contenders.append(
                    Contender(
                        name=f"previous-{kind}-{off or 'all-on'}",
                        argv=argv,
                        env={**previous_env(off, database), **env, **database},
                        port=port,
                        body=mcp_body(previous["cursor"]),
                        headers=mcp_headers(token),
                        expect=page["expected"],
                        cwd=WORKTREE,
                        log_mark=f"{MARK} {off}" if off else "",
                    )
                )
        current_env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("MCP_BENCH_ABLATE")},
            "PYTHONPATH": python_path(),
            "DJANGO_SETTINGS_MODULE": "benchmarks.settings",
            "MCP_LOG_LEVEL": "WARNING",
        }
        current_env.pop("MCP_BENCH_TOKEN_CACHE_TTL", None)
        for kind in kinds:
            port = free_port()
            if kind == "gunicorn":
                argv, env = gunicorn_argv("testproject.wsgi:application", port), gunicorn_env()
            else:
                argv, env = uvicorn_argv("testproject.asgi:application", port), asgi_database()
            contenders.append(
                Contender(
                    name=f"current-{kind}",
                    argv=argv,
                    env={**current_env, **env},
                    port=port,
                    body=mcp_body(page["cursor"]),
                    headers=mcp_headers(token),
                    expect=page["expected"],
                )
            )

        def same_page(answers: dict[str, dict[str, Any]]) -> None:
            firsts = {name: answer["result"]["resources"][0]["uri"] for name, answer in answers.items()}
            counts = {name: len(answer["result"]["resources"]) for name, answer in answers.items()}
            if set(firsts.values()) != {page["expected"]} or set(counts.values()) != {page_size}:
                raise SystemExit(f"the servers disagree on the page: {firsts} {counts}")

        print(
            f"removed speed-ups: the previous tree ({args.commit}) under {', '.join(kinds)}, each removed speed-up off "
            f"in turn, and the current tree's defaults; page {page['label']}, {args.concurrency} connections, "
            f"{args.rounds} rounds x {args.duration:g} s (+{args.warmup:g} s warm-up)",
            flush=True,
        )
        samples = measure(contenders, args, check=same_page)
    finally:
        if not args.keep_worktree:
            remove_worktree()
    summary = {name: summarize(runs) for name, runs in samples.items()}
    for name, s in summary.items():
        print(f"  {describe(name, s)}")
    rows = []
    for kind in kinds:
        base = summary[f"previous-{kind}-all-on"]
        for off in SWITCHES[kind]:
            name = f"previous-{kind}-{off}"
            rows.append(
                {
                    "speed_up": off,
                    "server": kind,
                    "rps_on": base["rps"],
                    "rps_off": summary[name]["rps"],
                    "rps_on_over_off": base["rps"] / summary[name]["rps"],
                    "p99_on_ms": base["p99_ms"],
                    "p99_off_ms": summary[name]["p99_ms"],
                    "p99_on_over_off": base["p99_ms"] / summary[name]["p99_ms"],
                    "paired_rps_on_over_off": paired_ratios(samples[f"previous-{kind}-all-on"], samples[name], "rps"),
                }
            )
    current = {
        kind: summary[f"current-{kind}"]["rps"] / summary[f"previous-{kind}-all-on"]["rps"]
        for kind in kinds
        if f"current-{kind}" in summary
    }
    print(f"\n{'removed speed-up':<22} {'server':<9} {'rps on/off':>10} {'p99 on/off':>10}")
    for row in rows:
        print(
            f"{row['speed_up']:<22} {row['server']:<9} {row['rps_on_over_off']:>9.2f}x {row['p99_on_over_off']:>9.2f}x"
        )
    for kind, ratio in current.items():
        print(f"current tree's default {kind} / previous tree's {kind} (every speed-up on): {ratio:.2f}x")
    write_result(
        "removed",
        {
            "commit": args.commit,
            "page": page["label"],
            "rounds": args.rounds,
            "duration_s": args.duration,
            "concurrency": args.concurrency,
            "servers": summary,
            "rows": rows,
            "current_over_previous": current,
        },
    )


if __name__ == "__main__":
    main()
