"""Item 7: a ``resources/list`` page through a membership path against the same page through a direct owner.

The same caller, the same inventory size, the same ordering ``(created, id)`` and page size, through the server
core (``MCPServer.call("resources/list", ...)``, compiled page queries on): ``documents`` owned directly
(``owner_field = "owner"``, index ``(owner, created, id)``) against ``tickets`` of the projects the caller is a
member of (``owner_field = "project__members"``, an ``EXISTS`` semi-join; indexes ``(project, created, id)`` and
``(created, id)``), and of the projects of the caller's teams (``"project__team__memberships__user"``).

Two shapes of membership, each with ``--size`` tickets visible to the caller, seeded in turn (each replaces the
benchmark database's projects and tickets; the fixture's documents stay): ``few``, the caller in 10 projects of 500
(2% of all tickets), and ``half``, the caller in 20 projects of 40. Pages are timed at depths 0%, 50% and 99% of
the caller's inventory, interleaved with the direct page at the same depth. Reported: membership page time /
direct page time for each shape, path and depth, and the worst of each shape against its target.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import (
    DEPTHS,
    depth_index,
    fmt_time,
    interleaved,
    median,
    setup_django,
    verdict,
    write_result,
)

SHAPES = {"few": (10, 500), "half": (20, 40)}
"""shape: (the caller's projects, all projects); every project holds ``size / caller's projects`` tickets."""
TARGETS = {"few": 8.0, "half": 2.0}
"""The worst membership / direct ratio accepted for each shape: with half of the table visible a page reads about
two pages of rows in order; in a few of many projects it reads the caller's records after the position, or
``page size / share`` rows, whichever PostgreSQL estimates cheaper."""


def seed_direct(size: int) -> Any:
    """The caller ``bench_members_<size>`` with ``size`` documents of its own (seeded once)."""
    from django.contrib.auth import get_user_model

    from benchmarks.fixture import seed_documents
    from testproject.library.models import Document

    user, _ = get_user_model().objects.get_or_create(username=f"bench_members_{size}")
    if not Document.objects.filter(owner=user).exists():
        seed_documents(user.pk, size)
    return user


def seed_shape(user: Any, shape: str, size: int) -> None:
    """Replace every project, team, membership and ticket with ``shape``: ``user`` a member of the first projects
    (and of their teams), three other members in every project and team, ``size`` tickets in the caller's projects,
    ticket times interleaved across the projects (as tickets arrive); then ``VACUUM ANALYZE``."""
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction

    from testproject.library.models import Membership, Project, Team, Ticket

    mine, total = SHAPES[shape]
    others = [get_user_model().objects.get_or_create(username=f"bench_member_{i}")[0] for i in range(12)]
    postgres = connection.vendor == "postgresql"
    with transaction.atomic():
        if postgres:  # no dead rows left behind: the planner probes the ends of the indexes it ranges over
            with connection.cursor() as cursor:
                cursor.execute(
                    "TRUNCATE library_ticket, library_project_members, library_project, library_membership, "
                    "library_team"
                )
        else:
            Ticket.objects.all().delete()
            Project.objects.all().delete()
            Team.objects.all().delete()
        teams = Team.objects.bulk_create(Team(name=f"team {i}") for i in range(total))
        projects = Project.objects.bulk_create(Project(name=f"project {i}", team=teams[i]) for i in range(total))
        through = Project.members.through
        through.objects.bulk_create(
            through(project=p, user=others[(i + k) % len(others)]) for i, p in enumerate(projects) for k in range(3)
        )
        through.objects.bulk_create(through(project=p, user=user) for p in projects[:mine])
        Membership.objects.bulk_create(
            Membership(team=t, user=others[(i + k) % len(others)]) for i, t in enumerate(teams) for k in range(3)
        )
        Membership.objects.bulk_create(Membership(team=t, user=user) for t in teams[:mine])
        created = (
            "timestamptz '2024-01-01 00:00:00+00' + (s.i * %s + p.rank) * interval '1 millisecond'"
            if postgres
            else "datetime('2024-01-01 00:00:00', '+' || ((s.i * %s + p.rank) / 1000.0) || ' seconds')"
        )
        series = (
            "generate_series(1, %s) AS s(i)"
            if postgres
            else "(WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %s) SELECT i FROM n) AS s"
        )
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO library_ticket (project_id, title, body, created) SELECT p.id, 'Ticket ' || s.i, '', "
                f"{created} FROM (SELECT id, ROW_NUMBER() OVER (ORDER BY id) AS rank FROM library_project) AS p, "
                f"{series}",
                [total, size // mine],
            )
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE" if postgres else "ANALYZE")


def templates() -> dict[str, Any]:
    from mcp_resources.resources import ModelResourceTemplate
    from testproject.library.models import Document, Ticket

    class Documents(ModelResourceTemplate):
        model = Document
        name = "documents"
        uri_template = "learn://documents/{id}"
        required_scopes = ("documents:read",)
        ordering = ("created", "id")
        name_field = "title"
        queryset = Document.objects.filter(deleted_at__isnull=True)
        owner_field = "owner"

    def tickets(label: str, path: str) -> type[ModelResourceTemplate]:
        attrs = {
            "model": Ticket,
            "name": label,
            "uri_template": f"learn://{label}/{{id}}",
            "required_scopes": ("documents:read",),
            "ordering": ("created", "id"),
            "name_field": "title",
            "owner_field": path,
        }
        return type(f"Tickets_{label}", (ModelResourceTemplate,), attrs)

    return {"documents": Documents, "tickets": tickets}


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


def page_at(server: Any, ctx: Any, depth: float, size: int, page_size: int) -> tuple[dict[str, Any], str | None]:
    """The request params of the page at ``depth`` of the caller's inventory (a sealed cursor after the row at that
    depth), and the URI the page must start with."""
    from mcp_resources.listing.keyset import encode_key
    from mcp_resources.listing.pipeline import binding
    from mcp_resources.protocol.cursors import make_cursor

    template = server.registry.templates[0]
    skip = depth_index(size, depth, page_size)
    if skip == 0:
        return {}, None
    rows = list(template.get_queryset(ctx.request).order_by(*template.ordering)[skip - 1 : skip + 1])
    after = template.get_queryset(ctx.request).values_list(*template.ordering).get(pk=rows[0].pk)
    position = [template.name, encode_key(tuple(after))]
    bound = binding("resources/list", ctx.principal, "", server.registry.templates)
    cursor = make_cursor(server.codec, bound, position, time.time())
    return {"cursor": cursor}, template.uri_template.replace("{id}", str(rows[1].pk))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=10_000, help="records visible to the caller on each side")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--batch-seconds", type=float, default=0.05)
    args = parser.parse_args()

    setup_django()
    from django.db import connection

    from mcp_resources.conf import mcp_settings

    page_size = mcp_settings.page_size
    user = seed_direct(args.size)
    ctx = context_of(user)
    made = templates()
    servers = {
        "direct": server_of(made["documents"]),
        "members": server_of(made["tickets"]("members", "project__members")),
        "teams": server_of(made["tickets"]("teams", "project__team__memberships__user")),
    }
    print(
        f"item 7: membership paths, {args.size:,} visible records a side, page size {page_size}, "
        f"{args.rounds} interleaved rounds, {connection.vendor}"
    )
    points = []
    print(f"{'shape':>6} {'path':>8} {'depth':>6} {'page':>11} {'direct page':>12} {'ratio':>7}")
    for shape in SHAPES:
        seed_shape(user, shape, args.size)
        contenders: dict[str, Any] = {}
        for side, server in servers.items():
            for depth in DEPTHS:
                params, first = page_at(server, ctx, depth, args.size, page_size)

                def call(server: Any = server, params: dict[str, Any] = params) -> dict[str, Any]:
                    return server.call("resources/list", params, ctx)

                page = call()
                if len(page["resources"]) != page_size or "nextCursor" not in page:
                    raise SystemExit(f"{side} @ {depth:.0%}: {len(page['resources'])} resources, expected a full page")
                if first is not None and page["resources"][0]["uri"] != first:
                    raise SystemExit(f"{side} @ {depth:.0%}: starts at {page['resources'][0]['uri']}, not {first}")
                contenders[f"{side} @ {depth:g}"] = call
        samples = interleaved(contenders, rounds=args.rounds, batch_seconds=args.batch_seconds)
        times = {name: median(values) for name, values in samples.items()}
        for side in ("members", "teams"):
            for depth in DEPTHS:
                ours, direct = times[f"{side} @ {depth:g}"], times[f"direct @ {depth:g}"]
                point = {"shape": shape, "path": side, "depth": depth, "page_s": ours, "direct_s": direct}
                point["ratio"] = ours / direct
                points.append(point)
                print(
                    f"{shape:>6} {side:>8} {depth:>6.0%} {fmt_time(ours):>11} {fmt_time(direct):>12} "
                    f"{ours / direct:>6.2f}x"
                )
    worst = {shape: max((p for p in points if p["shape"] == shape), key=lambda p: p["ratio"]) for shape in SHAPES}
    for shape, point in worst.items():
        verdict_ = verdict(point["ratio"] <= TARGETS[shape])
        print(
            f"worst membership / direct, {shape}: {point['ratio']:.2f}x ({point['path']} at {point['depth']:.0%}; "
            f"target <= {TARGETS[shape]:g}x: {verdict_})"
        )
    write_result(
        "members",
        {
            "size": args.size,
            "page_size": page_size,
            "vendor": connection.vendor,
            "rounds": args.rounds,
            "shapes": {shape: {"caller_projects": m, "projects": t} for shape, (m, t) in SHAPES.items()},
            "points": points,
            "worst": {shape: point["ratio"] for shape, point in worst.items()},
            "targets": TARGETS,
        },
    )


if __name__ == "__main__":
    main()
