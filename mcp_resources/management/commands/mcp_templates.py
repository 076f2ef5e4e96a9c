"""``manage.py mcp_templates``: list the registered resource templates."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from mcp_resources.admin import describe_templates


class Command(BaseCommand):
    help = "List the registered MCP resource templates."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="Print JSON instead of a table.")

    def handle(self, *args: Any, **options: Any) -> None:
        rows = describe_templates()
        if options["json"]:
            self.stdout.write(json.dumps(rows, indent=2))
            return
        if not rows:
            self.stdout.write("No templates are registered.")
            return
        for row in rows:
            scopes = " ".join(row["required_scopes"]) or "-"
            flags = "" if row["discoverable"] else " (suppressed)"
            self.stdout.write(f"{row['name']}\t{row['uri_template']}\t{row['access']}\t{scopes}{flags}")
