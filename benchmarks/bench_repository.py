"""Item 8: a ``resources/list`` page from a repository source against a model page of the same size.

The same caller, the same records, the same page size, through the server core (``MCPServer.call("resources/list",
...)``): ``documents``, a model template (``owner_field = "owner"``, ``name_field``: the compiled value-row page
query), against ``shelf``, a repository (``ResourceRepository``) whose pager reads the very same rows with a keyset
query of its own on the same index (``(owner, created, id)``) and continues with an opaque token of its own (16
bytes: the last row's time and id), which travels sealed in our cursor as a token position; it loads the rows the way
the model page does (psycopg's own timestamp loader on PostgreSQL). What differs is the
machinery: the pager's batch checked against the contract, each URI checked to read back through the template, the
token position sealed and opened, against the keyset position of the model page. Pages are timed at depths 0%, 50%
and 99% of the caller's inventory, interleaved. Reported: repository page time / model page time at each depth, and
the worst against the target (1.3x).
"""

from __future__ import annotations

import argparse
import datetime
import struct
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import DEPTHS, depth_index, fmt_time, interleaved, median, setup_django, verdict, write_result

TARGET = 1.3
"""The worst repository page / model page ratio accepted (issue 15)."""

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def pack(created: datetime.datetime, pk: int) -> bytes:
    """The pager's own continuation token: the last row's time (microseconds) and id."""
    if created.tzinfo is None:  # SQLite's raw rows hold naive UTC times
        created = created.replace(tzinfo=datetime.UTC)
    delta = created - EPOCH
    return struct.pack(">qq", (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds, pk)


def unpack(token: bytes) -> tuple[datetime.datetime, int]:
    micros, pk = struct.unpack(">qq", token)
    return EPOCH + datetime.timedelta(microseconds=micros), pk


def templates() -> dict[str, Any]:
    from django.db import connection

    from mcp_resources.exceptions import PageTokenRejected
    from mcp_resources.queries import native_timestamps
    from mcp_resources.resources import ModelResourceTemplate, RepositoryPage, ResourceRepository
    from testproject.library.models import Document

    class Documents(ModelResourceTemplate):
        model = Document
        name = "documents"
        uri_template = "learn://documents/{id}"
        required_scopes = ("documents:read",)
        ordering = ("created", "id")
        name_field = "title"
        queryset = Document.objects.filter(deleted_at__isnull=True)
        owner_field = "owner"

    class Shelf(ResourceRepository):
        name = "shelf"
        uri_template = "learn://shelf/{id}"
        required_scopes = ("documents:read",)

        def list_page(
            self, request: Any, *, token: str | bytes | None, limit: int, prefix: str, deadline: float
        ) -> RepositoryPage:
            owner = int(request.mcp_principal.subject)
            sql = "SELECT id, title, created FROM library_document WHERE owner_id = %s AND deleted_at IS NULL"
            params: list[Any] = [owner]
            if token is not None:
                if not isinstance(token, bytes) or len(token) != 16:
                    raise PageTokenRejected("not a token of this pager")
                sql += " AND (created, id) > (%s, %s)"
                created, pk = unpack(token)
                params += [connection.ops.adapt_datetimefield_value(created), pk]
            sql += " ORDER BY created, id LIMIT %s"
            params.append(limit + 1)
            # The same loading as the model page's query (psycopg's own timestamp loader on PostgreSQL).
            with native_timestamps(connection.alias), connection.cursor() as cursor:
                cursor.execute(sql, params)
                rows = cursor.fetchall()
            batch = rows[:limit]
            resources = [{"uri": f"learn://shelf/{pk}", "name": title} for pk, title, _ in batch]
            last = batch[-1] if batch else None
            return RepositoryPage(resources, pack(last[2], last[0]) if last and len(rows) > limit else None)

        def read(self, request: Any, uri: str, variables: Any) -> Any:
            raise NotImplementedError

    return {"documents": Documents, "shelf": Shelf}


def seed(size: int) -> Any:
    """The caller ``bench_repository_<size>`` with ``size`` documents of its own (seeded once), analyzed."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from benchmarks.fixture import seed_documents
    from testproject.library.models import Document

    user, _ = get_user_model().objects.get_or_create(username=f"bench_repository_{size}")
    if not Document.objects.filter(owner=user).exists():
        seed_documents(user.pk, size)
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE library_document" if connection.vendor == "postgresql" else "ANALYZE")
    return user


def server_of(template: type[Any]) -> Any:
    from mcp_resources.registries import ResourceRegistry
    from mcp_resources.server import MCPServer

    registry = ResourceRegistry(f"bench-{template.name}")
    registry.register(template)
    return MCPServer(registry)


def context_of(user: Any) -> Any:
    from django.test import RequestFactory

    from mcp_resources.principal import Principal
    from mcp_resources.protocol.versions import V2026_07_28
    from mcp_resources.server import CallContext

    request = RequestFactory().post("/mcp")
    request.user = user
    principal = Principal(
        subject=str(user.pk), client_id="bench", scopes=frozenset({"documents:read"}), authenticated=True
    )
    request.mcp_principal = principal
    return CallContext(request, V2026_07_28, principal)


def page_at(server: Any, ctx: Any, user: Any, depth: float, size: int, page_size: int) -> tuple[dict[str, Any], int]:
    """The request params of the page at ``depth`` (a cursor sealed after the row at that depth, holding the
    template's keyset position or the pager's token), and the id the page must start with."""
    from mcp_resources.listing.pipeline import binding
    from mcp_resources.protocol.cursors import TokenPosition, make_cursor
    from testproject.library.models import Document

    rows = list(Document.objects.filter(owner=user, deleted_at__isnull=True).order_by("created", "id"))
    skip = depth_index(size, depth, page_size)
    if skip == 0:
        return {}, rows[0].pk
    last = rows[skip - 1]
    template = server.registry.templates[0]
    if template.name == "documents":
        key: Any = [last.created.isoformat(), last.pk]
    else:
        key = TokenPosition(pack(last.created, last.pk)).to_json()
    bound = binding("resources/list", ctx.principal, "", server.registry.templates)
    return {"cursor": make_cursor(server.codec, bound, [template.name, key], time.time())}, rows[skip].pk


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=10_000, help="the caller's records")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--batch-seconds", type=float, default=0.05)
    args = parser.parse_args()

    setup_django()
    from django.db import connection

    from mcp_resources.conf import mcp_settings

    page_size = mcp_settings.page_size
    user = seed(args.size)
    ctx = context_of(user)
    made = templates()
    servers = {"model": server_of(made["documents"]), "repository": server_of(made["shelf"])}
    print(
        f"item 9: a repository page against a model page, {args.size:,} records, page size {page_size}, "
        f"{args.rounds} interleaved rounds, {connection.vendor}"
    )
    contenders: dict[str, Any] = {}
    for side, server in servers.items():
        for depth in DEPTHS:
            params, first = page_at(server, ctx, user, depth, args.size, page_size)

            def call(server: Any = server, params: dict[str, Any] = params) -> dict[str, Any]:
                return server.call("resources/list", params, ctx)

            page = call()
            if len(page["resources"]) != page_size or "nextCursor" not in page:
                raise SystemExit(f"{side} @ {depth:.0%}: {len(page['resources'])} resources, expected a full page")
            if not page["resources"][0]["uri"].endswith(f"/{first}"):
                raise SystemExit(f"{side} @ {depth:.0%}: starts at {page['resources'][0]['uri']}, not id {first}")
            contenders[f"{side} @ {depth:g}"] = call
    samples = interleaved(contenders, rounds=args.rounds, batch_seconds=args.batch_seconds)
    times = {name: median(values) for name, values in samples.items()}
    points = []
    print(f"{'depth':>6} {'repository page':>16} {'model page':>12} {'ratio':>7}")
    for depth in DEPTHS:
        ours, model = times[f"repository @ {depth:g}"], times[f"model @ {depth:g}"]
        points.append({"depth": depth, "repository_s": ours, "model_s": model, "ratio": ours / model})
        print(f"{depth:>6.0%} {fmt_time(ours):>16} {fmt_time(model):>12} {ours / model:>6.2f}x")
    worst = max(points, key=lambda p: p["ratio"])
    print(
        f"worst repository / model page: {worst['ratio']:.2f}x at {worst['depth']:.0%} "
        f"(target <= {TARGET:g}x: {verdict(worst['ratio'] <= TARGET)})"
    )
    write_result(
        "repository",
        {
            "size": args.size,
            "page_size": page_size,
            "vendor": connection.vendor,
            "rounds": args.rounds,
            "points": points,
            "worst": worst["ratio"],
            "target": TARGET,
        },
    )


if __name__ == "__main__":
    main()
