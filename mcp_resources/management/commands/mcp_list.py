"""``manage.py mcp_list --user alice [--prefix P] [--all] [--json]``: resources/list as that user would see it."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from mcp_resources.management.caller import call, operator_context


class Command(BaseCommand):
    help = "List MCP resources as a user sees them (through the same server core as HTTP)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", required=True, help="Username of the caller.")
        parser.add_argument("--prefix", default="", help="Only URIs starting with this prefix.")
        parser.add_argument("--scope", help="Space-separated scopes of the caller (default: every declared scope).")
        parser.add_argument("--all", action="store_true", help="Follow nextCursor through every page.")
        parser.add_argument("--cursor", help="Start from this cursor.")
        parser.add_argument("--json", action="store_true", help="Print each page's JSON result.")

    def handle(self, *args: Any, **options: Any) -> None:
        scopes = options["scope"].split() if options["scope"] is not None else None
        ctx = operator_context(options["user"], scopes)
        params: dict[str, Any] = {}
        if options["prefix"]:
            params["prefix"] = options["prefix"]
        if options["cursor"]:
            params["cursor"] = options["cursor"]
        while True:
            result = call("resources/list", dict(params), ctx)
            if options["json"]:
                self.stdout.write(json.dumps(result, indent=2))
            else:
                for resource in result["resources"]:
                    self.stdout.write(f"{resource['uri']}\t{resource['name']}")
            cursor = result.get("nextCursor")
            if not options["all"] or cursor is None:
                if cursor is not None and not options["json"]:
                    self.stderr.write(f"next cursor: {cursor}")
                break
            params["cursor"] = cursor
