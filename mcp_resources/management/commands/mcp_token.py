"""``manage.py mcp_token --user alice --scope "documents:read"``: print a fresh access token (development aid).

The token is a django-oauth-toolkit ``AccessToken`` bound (RFC 8707) to the server's canonical resource URI,
issued to a public OAuth application created on first use. Only the token is printed on stdout.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from mcp_resources.conf import mcp_settings

APPLICATION_NAME = "mcp_token (development)"


class Command(BaseCommand):
    help = "Print an access token for a user, bound to this MCP server's resource URI."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", required=True, help="Username of the token's owner.")
        parser.add_argument("--scope", default="", help="Space-separated scopes.")
        parser.add_argument("--expires-in", type=int, default=3600, help="Lifetime in seconds (default 3600).")
        parser.add_argument(
            "--resource",
            action="append",
            help="Resource URI the token is bound to (repeatable; default: the configured RESOURCE_URI).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        from mcp_resources.auth.tokens import issue_access_token

        user_model = get_user_model()
        try:
            user = user_model._default_manager.get_by_natural_key(options["user"])
        except user_model.DoesNotExist as exc:
            raise CommandError(f"no user {options['user']!r}") from exc
        if options["expires_in"] <= 0:
            raise CommandError("--expires-in must be positive")
        resource = [r for r in (options["resource"] or [mcp_settings.resource_uri]) if r]
        if not resource:
            raise CommandError(
                "MCP_RESOURCES['RESOURCE_URI'] is not set: pass --resource with the endpoint's URL "
                "(a token without a resource is refused)"
            )
        token = issue_access_token(user, options["scope"], resource, options["expires_in"], APPLICATION_NAME)
        self.stdout.write(token)
