"""``manage.py mcp_token --user alice --scope "documents:read"``: print a fresh access token (development aid).

The token is a django-oauth-toolkit ``AccessToken`` bound (RFC 8707) to the server's canonical resource URI,
issued to a public OAuth application created on first use. Only the token is printed on stdout.
"""

from __future__ import annotations

import secrets
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

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
        from oauth2_provider.models import get_access_token_model, get_application_model

        user_model = get_user_model()
        try:
            user = user_model._default_manager.get_by_natural_key(options["user"])
        except user_model.DoesNotExist as exc:
            raise CommandError(f"no user {options['user']!r}") from exc
        if options["expires_in"] <= 0:
            raise CommandError("--expires-in must be positive")
        application_model = get_application_model()
        application, _ = application_model.objects.get_or_create(
            name=APPLICATION_NAME,
            defaults={
                "client_type": application_model.CLIENT_PUBLIC,
                "authorization_grant_type": application_model.GRANT_AUTHORIZATION_CODE,
                "redirect_uris": "http://127.0.0.1/callback",
                "skip_authorization": False,
            },
        )
        resource = options["resource"] or [mcp_settings.resource_uri]
        token = secrets.token_urlsafe(32)
        get_access_token_model().objects.create(
            user=user,
            application=application,
            token=token,
            scope=" ".join(options["scope"].split()),
            expires=timezone.now() + timedelta(seconds=options["expires_in"]),
            resource=[r for r in resource if r],
        )
        self.stdout.write(token)
