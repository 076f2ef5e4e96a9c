"""Item 5: HTTP throughput of one ``resources/list`` page against the official MCP Python SDK, both validating the
same django-oauth-toolkit bearer token against the same tables on every request.

Servers, one process each, on loopback, all serving the same page (half-way through the smallest inventory) from
the same database with the same SQL, to the same token:

- ``sdk``: the SDK's low-level ``Server`` (``json_response=True``, stateless) under uvicorn (``sdk_server.py``),
  its requests authenticated by the SDK's own auth middleware with a ``TokenVerifier`` that reads the token's row
  from django-oauth-toolkit's tables (checksum, application, user, expiry) on every request;
- ``ours-gunicorn``: the demo as docs/deployment.md serves it under WSGI, ``gunicorn testproject.wsgi`` (Django's
  WSGI handler, the demo's whole middleware stack), one worker process of gunicorn's ``gevent`` class with HTTP
  keep-alive and Django's connection pool;
- ``ours-uvicorn``: the demo as it is served by default under ASGI, ``uvicorn testproject.asgi:application``
  (Channels' routers, ``MCPEndpoint``, which runs Django's request handler with the whole middleware stack in one
  worker thread), with Django's connection pool.

Reported next to them, not the verdict: ``ours-gunicorn-gthread``, the same under gunicorn's ``gthread`` worker
class, 2 threads, persistent database connections (gunicorn's ``sync`` worker closes every connection and belongs
behind a buffering proxy). And labelled as opt-ins:

- ``ours-uvicorn-asgi``: ``MCPEndpoint.as_asgi(django_asgi_app)`` (``benchmarks/asgi_fast.py`` with
  ``MCP_BENCH_ASGI_HANDLER=asgi``): the same requests handed to Django's ASGI handler, middleware in async mode;
- ``ours-uvicorn-nomw``: ``MCPEndpoint(middleware=False)`` (``benchmarks/asgi_fast.py`` with
  ``MCP_BENCH_ASGI_MIDDLEWARE=0``): the view in one thread hop, no Django handler, no middleware;
- ``ours-uvicorn+conn0``: the default ASGI server without the pool, a database connection per request
  (``CONN_MAX_AGE`` 0, Django's default);
- ``ours-gunicorn+ssb``: gunicorn with Django's ``server_side_binding`` on PostgreSQL (a project's database
  option; psycopg then prepares repeated statements, as the SDK server's connection does);
- ``ours-gunicorn+tc``, ``ours-uvicorn+tc``: the two default servers with ``TOKEN_CACHE_TTL_SECONDS`` 30 (a
  validated token is reused for 30 s: revocation elsewhere takes up to that long to be seen);
- ``ours-gunicorn-nofast``, ``ours-uvicorn-nofast``: the two default servers with list pages encoded by the
  standard library's json instead of orjson (``MCP_BENCH_ABLATE=orjson``): whether a target is missed without
  orjson, which is a dependency for as long as one is;
- with ``--granian``: ``ours-granian-wsgi``, the same WSGI application under granian (HTTP in Rust).

Database connections as Django's docs advise (``benchmarks/serving.py``): Django's pool under gunicorn's ``gevent``
worker, persistent under ``gthread`` (``CONN_MAX_AGE=None``, one per thread), Django's pool under uvicorn (or a
connection per request where psycopg_pool is missing); the SDK keeps one psycopg connection. Ours
receives a 2026-07-28 ``resources/list`` with a sealed cursor; the SDK the same request with its own plain cursor.
Load: ``http_client.py`` (``benchmarks/serving.py``), rounds interleaved, medians compared. Targets: ours >= 1.0x
the SDK's requests per second under gunicorn and under uvicorn, with the token cache off (the default).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import (
    BENCH_DIR,
    RESULTS_DIR,
    load_fixture,
    mcp_body,
    mcp_headers,
    python_path,
    setup_django,
    verdict,
    write_result,
)
from benchmarks.serving import (
    ASGI_DATABASE,
    BIN,
    GUNICORN_THREADS,
    GUNICORN_WORKER,
    PYTHON,
    WSGI_DATABASE,
    Contender,
    asgi_database,
    describe,
    free_port,
    gunicorn_argv,
    gunicorn_env,
    measure,
    paired_ratios,
    pool_available,
    summarize,
    uvicorn_argv,
)

TARGETS = {"ours-gunicorn": 1.0, "ours-uvicorn": 1.0}
UNKNOWN_TOKEN = "not-a-token-of-this-server"  # every server must answer it with a 401 before the rounds
CACHE_TTL = 30  # seconds, for the "+tc" servers: the revocation bound docs/oauth.md suggests
OPT_INS = {
    "ours-uvicorn-asgi": "uvicorn, `MCPEndpoint.as_asgi(django_asgi_app)`: Django's ASGI handler, middleware on",
    "ours-uvicorn-nomw": "uvicorn, `MCPEndpoint(middleware=False)`: no Django handler, no middleware",
    "ours-gunicorn+tc": f"gunicorn, `TOKEN_CACHE_TTL_SECONDS` {CACHE_TTL}",
    "ours-uvicorn+tc": f"uvicorn, `TOKEN_CACHE_TTL_SECONDS` {CACHE_TTL}",
    "ours-gunicorn+ssb": "gunicorn, Django's `server_side_binding` (psycopg prepares repeated statements)",
    "ours-uvicorn+conn0": "uvicorn, a database connection per request (`CONN_MAX_AGE` 0) instead of Django's pool",
    "ours-granian-wsgi": "the same WSGI application under granian (HTTP in Rust; reported only)",
    "ours-gunicorn-nofast": "gunicorn without orjson: list pages encoded by the standard library's json",
    "ours-uvicorn-nofast": "uvicorn without orjson: list pages encoded by the standard library's json",
}


def param_spec(params: list[Any], created_db: Any, last_id: int) -> list[list[Any]]:
    """Which captured parameters carry the position (created, id); the others are constants."""
    spec: list[list[Any]] = []
    for value in params:
        if type(value) is type(created_db) and value == created_db:
            spec.append(["created", None])
        elif type(value) is int and value == last_id:
            spec.append(["id", None])
        else:
            spec.append(["const", value])
    kinds = {kind for kind, _ in spec}
    if not {"created", "id"} <= kinds:
        raise SystemExit(f"could not find the position in the captured parameters {params!r}")
    return spec


def same_page(page_size: int, expected: str) -> Any:
    def check(answers: dict[str, dict[str, Any]]) -> None:
        seen = {}
        for name, answer in answers.items():
            resources = answer["result"]["resources"]
            if len(resources) != page_size or resources[0]["uri"] != expected or "nextCursor" not in answer["result"]:
                raise SystemExit(f"{name} served a different page: {json.dumps(answer)[:400]}")
            seen[name] = (resources[0]["uri"], resources[-1]["uri"], len(resources))
        if len(set(seen.values())) != 1:
            raise SystemExit(f"the servers disagree on the page: {seen}")

    return check


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=float, default=1.5)
    parser.add_argument("--duration", type=float, default=6.0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--granian", action="store_true", help="also the WSGI application under granian")
    parser.add_argument("--servers", default="", help="comma-separated servers to run (the SDK's always runs)")
    args = parser.parse_args()

    setup_django()
    from django.db import connection

    from benchmarks.pages import capture_page_sql, context_for, core_objects, http_page
    from testproject.library.models import Document

    fixture = load_fixture()
    page_size = fixture["page_size"]
    vendor = fixture["vendor"]
    page = http_page(fixture)
    user, expected, canonical = page["user"], page["expected"], page["canonical"]
    server, _ = core_objects()
    ctx = context_for(user)
    where = {"cursor": page["cursor"], "skip": page["skip"]}
    names = ["sdk", "ours-gunicorn", "ours-uvicorn", "ours-gunicorn-gthread", "ours-uvicorn-asgi", "ours-uvicorn-nomw"]
    names += ["ours-gunicorn-nofast", "ours-uvicorn-nofast"]
    if not os.environ.get("MCP_BENCH_TOKEN_CACHE_TTL"):
        names += ["ours-gunicorn+tc", "ours-uvicorn+tc"]
    if vendor == "postgresql" and os.environ.get("MCP_BENCH_PG_BINDING") != "server":
        names.append("ours-gunicorn+ssb")
    if pool_available():
        names.append("ours-uvicorn+conn0")
    if args.granian and (BIN / "granian").exists():
        names.append("ours-granian-wsgi")
    if args.servers:
        chosen = {name.strip() for name in args.servers.split(",")}
        names = [name for name in names if name == "sdk" or name in chosen]
    ports = {name: free_port() for name in names}
    sql, sql_params = capture_page_sql(server, ctx, {"cursor": where["cursor"]})
    before = Document.objects.get(pk=user["first_id"] + where["skip"] - 1)
    created_db = Document._meta.get_field("created").get_db_prep_value(before.created, connection)
    created_text = before.created.isoformat() if vendor == "postgresql" else str(created_db)
    db = connection.settings_dict
    config = {
        "sql": sql,
        "params": param_spec(sql_params, created_db, before.pk),
        "page_size": page_size,
        "vendor": vendor,
        "dsn": f"host={db.get('HOST')} port={db.get('PORT')} user={db.get('USER')} dbname={db.get('NAME')}",
        "sqlite_path": str(db["NAME"]),
        "probe_created": created_text,
        "probe_id": before.pk,
        "resource": canonical,
        "issuer": "http://127.0.0.1:8000/",
    }
    config_file = RESULTS_DIR / "sdk_config.json"
    config_file.write_text(json.dumps(config, default=str))
    connection.close()

    base_env = {
        **os.environ,
        "PYTHONPATH": python_path(),
        "DJANGO_SETTINGS_MODULE": "benchmarks.settings",
        "MCP_LOG_LEVEL": "WARNING",
    }
    ours_body, ours_headers = mcp_body(where["cursor"]), mcp_headers(user["token"])
    tc = {"MCP_BENCH_TOKEN_CACHE_TTL": str(CACHE_TTL)}
    servers: dict[str, tuple[list[str], dict[str, str]]] = {
        "sdk": ([PYTHON, str(BENCH_DIR / "sdk_server.py"), str(config_file), str(ports["sdk"])], {}),
        "ours-gunicorn": (gunicorn_argv("testproject.wsgi:application", ports.get("ours-gunicorn", 0)), gunicorn_env()),
        "ours-uvicorn": (uvicorn_argv("testproject.asgi:application", ports.get("ours-uvicorn", 0)), asgi_database()),
        "ours-gunicorn-gthread": (
            gunicorn_argv("testproject.wsgi:application", ports.get("ours-gunicorn-gthread", 0), "gthread"),
            gunicorn_env("gthread"),
        ),
        "ours-uvicorn-asgi": (
            uvicorn_argv("benchmarks.asgi_fast:application", ports.get("ours-uvicorn-asgi", 0)),
            {"MCP_BENCH_ASGI_HANDLER": "asgi", **asgi_database()},
        ),
        "ours-uvicorn-nomw": (
            uvicorn_argv("benchmarks.asgi_fast:application", ports.get("ours-uvicorn-nomw", 0)),
            {"MCP_BENCH_ASGI_MIDDLEWARE": "0", **asgi_database()},
        ),
        "ours-gunicorn-nofast": (
            gunicorn_argv("testproject.wsgi:application", ports.get("ours-gunicorn-nofast", 0)),
            {**gunicorn_env(), "MCP_BENCH_ABLATE": "orjson"},
        ),
        "ours-uvicorn-nofast": (
            uvicorn_argv("testproject.asgi:application", ports.get("ours-uvicorn-nofast", 0)),
            {**asgi_database(), "MCP_BENCH_ABLATE": "orjson"},
        ),
        "ours-uvicorn+conn0": (
            uvicorn_argv("testproject.asgi:application", ports.get("ours-uvicorn+conn0", 0)),
            ASGI_DATABASE,
        ),
        "ours-gunicorn+ssb": (
            gunicorn_argv("testproject.wsgi:application", ports.get("ours-gunicorn+ssb", 0)),
            {**gunicorn_env(), "MCP_BENCH_PG_BINDING": "server"},
        ),
        "ours-gunicorn+tc": (
            gunicorn_argv("testproject.wsgi:application", ports.get("ours-gunicorn+tc", 0)),
            {**gunicorn_env(), **tc},
        ),
        "ours-uvicorn+tc": (
            uvicorn_argv("testproject.asgi:application", ports.get("ours-uvicorn+tc", 0)),
            {**asgi_database(), **tc},
        ),
        "ours-granian-wsgi": (
            [
                str(BIN / "granian"),
                "--interface",
                "wsgi",
                "testproject.wsgi:application",
                "--host",
                "127.0.0.1",
                "--port",
                str(ports.get("ours-granian-wsgi", 0)),
                "--workers",
                "1",
                "--blocking-threads",
                str(GUNICORN_THREADS),
                "--http",
                "1",
                "--no-ws",
                "--log-level",
                "warning",
            ],
            WSGI_DATABASE,
        ),
    }
    contenders = []
    for name in names:
        argv, env = servers[name]
        body = mcp_body(f"{created_text}|{before.pk}") if name == "sdk" else ours_body
        contenders.append(
            Contender(
                name=name,
                argv=argv,
                env={**base_env, **env},
                port=ports[name],
                body=body,
                headers=ours_headers,
                expect=expected,
                refused_headers=mcp_headers(UNKNOWN_TOKEN),
                description=OPT_INS.get(name, ""),
            )
        )
    print(
        f"item 5: HTTP throughput, one page ({page['label']}, {page_size} resources), {vendor}, every request's "
        f"bearer token validated against django-oauth-toolkit's tables, {args.concurrency} connections, "
        f"{args.rounds} rounds x {args.duration:g} s (+{args.warmup:g} s warm-up)",
        flush=True,
    )
    samples = measure(contenders, args, check=same_page(page_size, expected))
    summary = {name: summarize(runs) for name, runs in samples.items()}
    ratios = {name: summary[name]["rps"] / summary["sdk"]["rps"] for name in names if name != "sdk"}
    paired = {name: paired_ratios(samples[name], samples["sdk"], "rps") for name in names if name != "sdk"}
    for name in names:
        ratio = f" = {ratios[name]:.2f}x the SDK" if name in ratios else ""
        label = f" [opt-in: {OPT_INS[name]}]" if name in OPT_INS else ""
        print(f"  {describe(name, summary[name])}{ratio}{label}")
    for name, target in TARGETS.items():
        if name not in ratios:
            continue
        print(
            f"{name} / SDK throughput: {ratios[name]:.2f}x (target >= {target:g}x: {verdict(ratios[name] >= target)})"
        )
    write_result(
        "http",
        {
            "page": page["label"],
            "page_size": page_size,
            "vendor": vendor,
            "concurrency": args.concurrency,
            "rounds": args.rounds,
            "duration_s": args.duration,
            "servers": summary,
            "ratios": ratios,
            "paired_ratios": paired,
            "targets": TARGETS,
            "opt_ins": {name: OPT_INS[name] for name in names if name in OPT_INS},
            "token_cache_ttl_of_variants": CACHE_TTL,
            "gunicorn_worker": GUNICORN_WORKER,
            "gunicorn_threads_of_gthread": GUNICORN_THREADS,
            "sql": sql,
        },
    )


if __name__ == "__main__":
    main()
