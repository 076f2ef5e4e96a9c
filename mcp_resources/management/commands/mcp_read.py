"""``manage.py mcp_read URI --user alice``: resources/read as that user would see it."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from mcp_resources.management.caller import call, operator_context


class Command(BaseCommand):
    help = "Read an MCP resource as a user (through the same server core as HTTP)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("uri", help="The resource URI.")
        parser.add_argument("--user", required=True, help="Username of the caller.")
        parser.add_argument("--scope", help="Space-separated scopes of the caller (default: every declared scope).")
        parser.add_argument("--json", action="store_true", help="Print the JSON result.")

    def handle(self, *args: Any, **options: Any) -> None:
        scopes = options["scope"].split() if options["scope"] is not None else None
        ctx = operator_context(options["user"], scopes)
        result = call("resources/read", {"uri": options["uri"]}, ctx)
        if options["json"]:
            self.stdout.write(json.dumps(result, indent=2))
            return
        for content in result["contents"]:
            if "text" in content:
                self.stdout.write(content["text"])
            else:
                self.stdout.write(f"<{content.get('mimeType', 'binary')}: {len(content['blob'])} base64 characters>")
