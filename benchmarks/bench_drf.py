"""Item 2: listing throughput against Django REST framework's ``ListAPIView`` with ``CursorPagination``.

Both run in-process through Django's ``WSGIHandler`` (middleware, URL resolution, the view, the response), on the
same model, data, scoping, ordering (created, id) and page size, both authenticated with the same
django-oauth-toolkit bearer token and scope: ours is a 2026-07-28 ``resources/list`` POST to ``/mcp`` with a
sealed cursor, DRF a ``GET /bench/drf/documents?cursor=...`` whose cursor DRF itself encoded for the same
position. Each call builds a fresh WSGI environ, consumes the body and closes the response. Two pages (half-way
through the smallest and the middle inventory); the headline is the lower (less favourable) ratio.
Target: >= 2x DRF's pages per second. Also reported, not the verdict: ours with the token cache (``ours+tc``).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import (
    DOC_TEMPLATE,
    IN_PROCESS_HOST,
    interleaved,
    load_fixture,
    mcp_body,
    mcp_headers,
    median,
    setup_django,
    verdict,
    write_result,
)

TARGET = 2.0


def environ_factory(method: str, path: str, query: str, body: bytes, headers: dict[str, str]) -> Callable[[], dict]:
    host, port = IN_PROCESS_HOST.split(":")
    base: dict[str, Any] = {
        "REQUEST_METHOD": method,
        "SCRIPT_NAME": "",
        "PATH_INFO": path,
        "QUERY_STRING": query,
        "SERVER_NAME": host,
        "SERVER_PORT": port,
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_HOST": IN_PROCESS_HOST,
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": False,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }
    for name, value in headers.items():
        key = name.upper().replace("-", "_")
        if key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            base[key] = value
        else:
            base["HTTP_" + key] = value
    if body:
        base["CONTENT_LENGTH"] = str(len(body))

    def make() -> dict[str, Any]:
        environ = dict(base)
        environ["wsgi.input"] = io.BytesIO(body)
        return environ

    return make


def wsgi_caller(handler: Any, make_environ: Callable[[], dict]) -> Callable[[], tuple[str, bytes]]:
    def call() -> tuple[str, bytes]:
        status: list[str] = []

        def start_response(s: str, headers: Any, exc_info: Any = None) -> None:
            status.append(s)

        response = handler(make_environ(), start_response)
        try:
            body = b"".join(response)
        finally:
            close = getattr(response, "close", None)
            if close is not None:
                close()
        return status[0], body

    return call


def drf_cursor(first_id: int, skip: int) -> str:
    """DRF's own encoding of the position just before document ``first_id + skip``."""
    from rest_framework.pagination import Cursor

    from benchmarks.drf_views import DocumentPagination
    from testproject.library.models import Document

    before = Document.objects.get(pk=first_id + skip - 1)
    paginator = DocumentPagination()
    paginator.base_url = "http://testserver/"
    url = paginator.encode_cursor(Cursor(offset=0, reverse=False, position=str(before.created)))
    return parse_qs(urlparse(url).query)["cursor"][0]


CACHE_TTL = 30  # seconds, for the "ours+tc" contender: the revocation bound docs/oauth.md suggests


def with_token_cache(call: Callable[[], Any]) -> Callable[[], Any]:
    """``call`` with ``MCP_RESOURCES["TOKEN_CACHE_TTL_SECONDS"]`` set for its duration.

    The dict is changed in place, without Django's ``setting_changed`` signal (which empties the cache): the cache
    lives across calls as it does in a server process with the setting on. Every other contender runs with the
    default, 0, and so validates every token against the database, as DRF with django-oauth-toolkit does.
    """
    from django.conf import settings

    def cached() -> Any:
        conf = settings.MCP_RESOURCES
        saved = conf.get("TOKEN_CACHE_TTL_SECONDS", 0)
        conf["TOKEN_CACHE_TTL_SECONDS"] = CACHE_TTL
        try:
            return call()
        finally:
            conf["TOKEN_CACHE_TTL_SECONDS"] = saved

    return cached


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--batch-seconds", type=float, default=0.15)
    args = parser.parse_args()

    setup_django()
    from urllib.parse import urlencode

    from django.core.handlers.wsgi import WSGIHandler

    from benchmarks.pages import context_for, core_objects, cursor_at, reference_pages
    from mcp_resources.conf import mcp_settings

    fixture = load_fixture()
    page_size = fixture["page_size"]
    server, template = core_objects()
    handler = WSGIHandler()
    contenders: dict[str, Callable[[], Any]] = {}
    pages = reference_pages(fixture)
    cache_variant = not mcp_settings.token_cache_ttl_seconds
    for page in pages:
        user, name = page["user"], page["name"]
        where = cursor_at(server, template, context_for(user), user, 0.5, page_size)
        expected = DOC_TEMPLATE.format(user["first_id"] + where["skip"])
        ours = wsgi_caller(
            handler, environ_factory("POST", "/mcp", "", mcp_body(where["cursor"]), mcp_headers(user["token"]))
        )
        status, body = ours()
        resources = json.loads(body).get("result", {}).get("resources", [])
        if not status.startswith("200") or len(resources) != page_size or resources[0]["uri"] != expected:
            raise SystemExit(f"our view answered {status}: {body[:300]!r}")
        query = urlencode({"cursor": drf_cursor(user["first_id"], where["skip"])})
        drf = wsgi_caller(
            handler,
            environ_factory("GET", "/bench/drf/documents", query, b"", {"Authorization": f"Bearer {user['token']}"}),
        )
        status, body = drf()
        results = json.loads(body).get("results", []) if status.startswith("200") else []
        if len(results) != page_size or results[0]["uri"] != expected:
            raise SystemExit(f"the DRF view answered {status}: {body[:300]!r}")
        contenders[f"ours {name}"] = ours
        contenders[f"drf {name}"] = drf
        if cache_variant:
            contenders[f"ours+tc {name}"] = with_token_cache(ours)

    print(
        f"item 2: listing throughput vs DRF ListAPIView + CursorPagination, in-process WSGI, "
        f"{args.rounds} interleaved rounds, page size {page_size}, {fixture['vendor']}"
    )
    samples = interleaved(contenders, rounds=args.rounds, batch_seconds=args.batch_seconds)
    for page in pages:
        name = page["name"]
        page["ours_pages_per_s"] = 1 / median(samples[f"ours {name}"])
        page["drf_pages_per_s"] = 1 / median(samples[f"drf {name}"])
        page["ours_over_drf"] = page["ours_pages_per_s"] / page["drf_pages_per_s"]
        if f"ours+tc {name}" in samples:
            page["ours_tc_pages_per_s"] = 1 / median(samples[f"ours+tc {name}"])
            page["ours_tc_over_drf"] = page["ours_tc_pages_per_s"] / page["drf_pages_per_s"]
            print(
                f"  {page['label']}: with TOKEN_CACHE_TTL_SECONDS={CACHE_TTL}: ours {page['ours_tc_pages_per_s']:.0f} "
                f"pages/s = {page['ours_tc_over_drf']:.2f}x DRF (reported, not the verdict)"
            )
        del page["user"]
        print(
            f"  {page['label']}: ours {page['ours_pages_per_s']:.0f} pages/s, DRF {page['drf_pages_per_s']:.0f} "
            f"pages/s = {page['ours_over_drf']:.2f}x DRF"
        )
    worst = min(page["ours_over_drf"] for page in pages)
    print(f"ours / DRF throughput (worst page): {worst:.2f}x (target >= {TARGET:g}x: {verdict(worst >= TARGET)})")
    write_result("drf", {"pages": pages, "ours_over_drf": worst, "target": TARGET, "rounds": args.rounds})


if __name__ == "__main__":
    main()
