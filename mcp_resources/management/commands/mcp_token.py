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


def known_scopes() -> set[str]:
    """Scopes a token may carry: required by a registered template or static resource (admin rows included),
    declared by django-oauth-toolkit's ``SCOPES``, or named in ``SCOPE_HIERARCHY``."""
    from mcp_resources.auth.metadata import scopes_supported
    from mcp_resources.auth.tokens import authorization_server_scopes

    known = set(scopes_supported()) | set(authorization_server_scopes())
    for broad, narrower in mcp_settings.scope_hierarchy.items():
        known.add(broad)
        known.update(narrower)
    return known


def check_scopes(requested: list[str]) -> None:
    """``CommandError`` naming every requested scope nothing declares (a typo would mint a token that reaches
    nothing)."""
    known = known_scopes()
    unknown = [scope for scope in dict.fromkeys(requested) if scope not in known]
    if not unknown:
        return
    listed = ", ".join(repr(scope) for scope in unknown)
    raise CommandError(
        f"unknown scope{'s' if len(unknown) > 1 else ''} {listed}: not required by any registered template or "
        "static resource, nor declared in django-oauth-toolkit's OAUTH2_PROVIDER['SCOPES'] or "
        "MCP_RESOURCES['SCOPE_HIERARCHY']. Known scopes: " + (", ".join(sorted(known)) or "none") + "."
    )


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
        check_scopes(options["scope"].split())
        token = issue_access_token(user, options["scope"], resource, options["expires_in"], APPLICATION_NAME)
        self.stdout.write(token)
