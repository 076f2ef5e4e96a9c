"""The AI clients a person has connected: the OAuth applications holding a live token of theirs, and taking one back.

What the connected-apps page (:class:`~mcp_resources.auth.server_views.ConnectedAppsView`) shows and does, on
django-oauth-toolkit's token models. A connection is an application with at least one token of the user that still
works: an access token not expired, or a refresh token neither revoked nor past ``REFRESH_TOKEN_EXPIRE_SECONDS``.
RFC 7592 registration access tokens (``DCR_REGISTRATION_SCOPE``) are the client's, not a connection of the user's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    get_grant_model,
    get_refresh_token_model,
)
from oauth2_provider.scopes import get_scopes_backend
from oauth2_provider.settings import oauth2_settings

from mcp_resources.signals import client_revoked


@dataclass
class Connection:
    """One application the user authorized: its name and client id, what it may do, since when, its last token."""

    application: Any
    scopes: set[str] = field(default_factory=set)
    authorized: datetime | None = None
    last_used: datetime | None = None

    @property
    def name(self) -> str:
        return str(self.application.name or self.application.client_id)

    @property
    def client_id(self) -> str:
        return str(self.application.client_id)

    @property
    def scope_descriptions(self) -> list[tuple[str, str]]:
        """``(scope, description)`` pairs, in scope order (the description of an unknown scope is the scope)."""
        known = get_scopes_backend().get_all_scopes()
        return [(scope, str(known.get(scope, scope))) for scope in sorted(self.scopes)]

    def _saw(self, created: datetime, updated: datetime | None) -> None:
        self.authorized = created if self.authorized is None else min(self.authorized, created)
        latest = max(created, updated or created)
        self.last_used = latest if self.last_used is None else max(self.last_used, latest)


def _registration_scope() -> Q:
    return Q(scope=oauth2_settings.DCR_REGISTRATION_SCOPE)


def _live_refresh_tokens(user: Any) -> Any:
    tokens = get_refresh_token_model().objects.filter(user=user, revoked__isnull=True, application__isnull=False)
    lifetime = oauth2_settings.REFRESH_TOKEN_EXPIRE_SECONDS
    if lifetime:
        tokens = tokens.filter(created__gt=timezone.now() - timedelta(seconds=int(lifetime)))
    return tokens


def connections_of(user: Any) -> list[Connection]:
    """The applications holding a working token of ``user``, most recently used first."""
    found: dict[Any, Connection] = {}
    access_tokens = (
        get_access_token_model()
        .objects.filter(user=user, expires__gt=timezone.now(), application__isnull=False)
        .exclude(_registration_scope())
        .select_related("application")
    )
    for token in access_tokens:
        connection = found.setdefault(token.application_id, Connection(token.application))
        connection.scopes.update(str(token.scope).split())
        connection._saw(token.created, token.updated)
    for refresh in _live_refresh_tokens(user).select_related("application", "access_token"):
        connection = found.setdefault(refresh.application_id, Connection(refresh.application))
        if refresh.access_token is not None:
            connection.scopes.update(str(refresh.access_token.scope).split())
        connection._saw(refresh.created, refresh.updated)
    epoch = timezone.make_aware(datetime(1970, 1, 1))
    return sorted(found.values(), key=lambda c: (c.last_used or epoch, c.client_id), reverse=True)


def revoke_connection(user: Any, client_id: str) -> bool:
    """Take back everything ``user`` granted the application ``client_id``: its refresh tokens are revoked, its
    access tokens and pending authorization codes deleted; then ``mcp_resources.signals.client_revoked`` is
    sent. ``False`` when the application holds nothing of the user's (nothing happens)."""
    application = get_application_model().objects.filter(client_id=client_id).first()
    if application is None:
        return False
    refresh_model = get_refresh_token_model()
    access_model = get_access_token_model()
    with transaction.atomic():
        refresh_tokens = list(refresh_model.objects.filter(user=user, application=application, revoked__isnull=True))
        access_tokens = access_model.objects.filter(user=user, application=application).exclude(_registration_scope())
        grants = get_grant_model().objects.filter(user=user, application=application)
        if not refresh_tokens and not access_tokens.exists() and not grants.exists():
            return False
        for refresh in refresh_tokens:
            refresh.revoke()  # django-oauth-toolkit's: revoked, and its access token deleted
        access_tokens.delete()
        grants.delete()
    client_revoked.send(sender=application.__class__, user=user, client_id=client_id)
    return True
