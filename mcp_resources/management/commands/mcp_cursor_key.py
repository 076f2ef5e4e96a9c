"""``manage.py mcp_cursor_key``: print a fresh secret for ``MCP_RESOURCES["CURSOR_KEYS"]``.

Every process that serves the endpoint must know the same key, or a cursor sealed by one is refused by another
(docs/deployment.md). Only the key is printed, so it can go straight into a secret store or an environment variable.
"""

from __future__ import annotations

import secrets
from typing import Any

from django.core.management.base import BaseCommand

KEY_BYTES = 32
"""Random bytes in a key (256 bits: the AES-256 key is derived from it); printed as 43 URL-safe characters."""


class Command(BaseCommand):
    help = "Print a fresh random secret for MCP_RESOURCES['CURSOR_KEYS'] (one line, URL-safe base64)."
    requires_system_checks: list[str] = []  # a key is needed before the deployment's settings are complete

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(secrets.token_urlsafe(KEY_BYTES))
