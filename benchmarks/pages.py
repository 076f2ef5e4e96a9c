"""Pages of the fixture through the server core: call contexts, sealed cursors at a depth, expected first URIs."""

from __future__ import annotations

import time
from typing import Any

from benchmarks.common import DOC_TEMPLATE, IN_PROCESS_HOST, depth_index


def core_objects() -> tuple[Any, Any]:
    """The demo's default server and its ``documents`` template."""
    from mcp_resources.server import default_server

    for template in default_server.registry.templates:
        if template.name == "documents":
            return default_server, template
    raise SystemExit("the demo's 'documents' template is not registered")


def context_for(user: dict[str, Any], host: str = IN_PROCESS_HOST) -> Any:
    """The 2026-07-28 call context of a request bearing ``user``'s token, authenticated as the view does.

    Cursors are bound to the caller (subject, client id, scopes, audience), so a cursor sealed for this context
    is accepted by every server that sees the same token.
    """
    from django.test import RequestFactory

    from mcp_resources.conf import mcp_settings
    from mcp_resources.protocol.versions import V2026_07_28
    from mcp_resources.server import CallContext

    request = RequestFactory().post("/mcp", HTTP_HOST=host, HTTP_AUTHORIZATION=f"Bearer {user['token']}")
    principal = mcp_settings.authentication_class().authenticate(request)
    request.mcp_principal = principal
    return CallContext(request, V2026_07_28, principal)


def sealed_cursor(server: Any, template: Any, ctx: Any, first_id: int, skip: int) -> str:
    """A cursor positioned after the first ``skip`` documents, sealed with the server's codec and binding."""
    from mcp_resources.listing.keyset import encode_key
    from mcp_resources.listing.pipeline import binding
    from mcp_resources.protocol.cursors import make_cursor
    from testproject.library.models import Document

    after = Document.objects.values_list(*template.ordering).get(pk=first_id + skip - 1)
    position = [template.name, encode_key(tuple(after))]
    bound = binding("resources/list", ctx.principal, "", server.registry.templates)
    return make_cursor(server.codec, bound, position, time.time())


def walked_cursor(server: Any, ctx: Any, first_id: int, skip: int) -> tuple[str | None, int]:
    """Fallback: walk pages until one starts at or after document ``skip``; return its cursor and first id."""
    params: dict[str, Any] = {}
    while True:
        result = server.call("resources/list", params, ctx)
        cursor = result.get("nextCursor")
        if cursor is None:
            raise SystemExit("walked off the end of the inventory")
        nxt = server.call("resources/list", {"cursor": cursor}, ctx)
        first = int(nxt["resources"][0]["uri"].rsplit("/", 1)[1])
        if first - first_id >= skip:
            return cursor, first
        params = {"cursor": cursor}


def cursor_at(
    server: Any, template: Any, ctx: Any, user: dict[str, Any], depth: float, page_size: int
) -> dict[str, Any]:
    """Cursor, skipped rows and expected first URI of the page at ``depth`` of ``user``'s inventory."""
    skip = depth_index(user["size"], depth, page_size)
    if skip == 0:
        return {"cursor": None, "skip": 0, "first_uri": None, "how": "first page"}
    expected = DOC_TEMPLATE.format(user["first_id"] + skip)
    try:
        cursor = sealed_cursor(server, template, ctx, user["first_id"], skip)
        result = server.call("resources/list", {"cursor": cursor}, ctx)
        if result["resources"][0]["uri"] == expected:
            return {"cursor": cursor, "skip": skip, "first_uri": expected, "how": "sealed"}
        print(f"  sealed cursor landed on {result['resources'][0]['uri']}, expected {expected}: walking instead")
    except Exception as exc:  # internals moved: fall back to walking
        print(f"  sealing a cursor failed ({type(exc).__name__}: {exc}): walking instead")
    walked, first = walked_cursor(server, ctx, user["first_id"], skip)
    return {
        "cursor": walked,
        "skip": first - user["first_id"],
        "first_uri": DOC_TEMPLATE.format(first),
        "how": "walked",
    }


def check_page(result: dict[str, Any], first_uri: str | None, page_size: int) -> None:
    resources = result["resources"]
    if len(resources) != page_size:
        raise SystemExit(f"page holds {len(resources)} resources, expected {page_size}")
    if first_uri is not None and resources[0]["uri"] != first_uri:
        raise SystemExit(f"page starts at {resources[0]['uri']}, expected {first_uri}")
    if "nextCursor" not in result:
        raise SystemExit("page has no nextCursor")


def reference_pages(fixture: dict[str, Any]) -> list[dict[str, Any]]:
    """The pages items 2, 3 and 5 time: half-way through the smallest and through the middle inventory."""
    users = sorted(fixture["users"], key=lambda u: u["size"])
    chosen = [("shallow", users[0]), ("mid", users[len(users) // 2])]
    return [{"label": f"{label}: {user['size']:,} rows @ 50%", "name": label, "user": user} for label, user in chosen]


def capture_page_sql(server: Any, ctx: Any, params: dict[str, Any]) -> tuple[str, list[Any]]:
    """The documents SELECT the core sends for one page, as passed to the driver: SQL with ``%s`` and params.

    The capturing wrapper is installed outside the core's own (the statement timeout's prefix), so it sees the
    query as the ORM compiled it.
    """
    from django.db import connection

    seen: list[tuple[str, list[Any]]] = []

    def wrapper(execute: Any, sql: str, sql_params: Any, many: bool, context: Any) -> Any:
        if "library_document" in sql and sql.lstrip().upper().startswith("SELECT"):
            seen.append((sql, list(sql_params or ())))
        return execute(sql, sql_params, many, context)

    with connection.execute_wrapper(wrapper):
        server.call("resources/list", params, ctx)
    if len(seen) != 1:
        raise SystemExit(f"expected one documents SELECT for the page, saw {len(seen)}")
    return seen[0]


def http_page(fixture: dict[str, Any]) -> dict[str, Any]:
    """The page the HTTP items request (the first of :func:`reference_pages`), with a fresh token for its user bound
    to the configured canonical resource URI: ``label``, ``user`` (its ``token`` replaced), ``cursor`` (sealed for
    the servers of this tree), ``skip``, ``expected`` (the page's first URI) and ``canonical``."""
    from django.conf import settings
    from django.contrib.auth import get_user_model

    from benchmarks.fixture import mint_token
    from mcp_resources.auth.metadata import normalize_resource_uri

    page = reference_pages(fixture)[0]
    user = dict(page["user"])
    canonical = normalize_resource_uri(str((settings.MCP_RESOURCES or {}).get("RESOURCE_URI") or ""))
    if not canonical:
        raise SystemExit("the benchmark settings name no RESOURCE_URI")
    user["token"] = mint_token(get_user_model().objects.get(pk=user["user_id"]), [canonical])
    server, template = core_objects()
    where = cursor_at(server, template, context_for(user), user, 0.5, fixture["page_size"])
    return {
        "label": page["label"],
        "user": user,
        "cursor": where["cursor"],
        "skip": where["skip"],
        "expected": where["first_uri"],
        "canonical": canonical,
    }
