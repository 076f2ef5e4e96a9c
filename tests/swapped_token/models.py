"""The token models swapped into one app, as django-oauth-toolkit's "Extending the token models" advises: an access
token that is revoked by stamping it, not by deleting it, whose default manager leaves revoked rows out."""

from __future__ import annotations

from django.db import models
from oauth2_provider.models import AbstractAccessToken, AbstractIDToken, AbstractRefreshToken


class UnrevokedTokens(models.Manager["SoftRevokedAccessToken"]):
    """Only the tokens not revoked (django-oauth-toolkit loads a bearer token through ``AccessToken.objects``)."""

    def get_queryset(self) -> models.QuerySet[SoftRevokedAccessToken]:
        return super().get_queryset().filter(revoked_at__isnull=True)


class SoftRevokedAccessToken(AbstractAccessToken):
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = UnrevokedTokens()

    class Meta(AbstractAccessToken.Meta):
        swappable = "OAUTH2_PROVIDER_ACCESS_TOKEN_MODEL"


class RefreshToken(AbstractRefreshToken):
    class Meta(AbstractRefreshToken.Meta):
        swappable = "OAUTH2_PROVIDER_REFRESH_TOKEN_MODEL"


class IDToken(AbstractIDToken):
    class Meta(AbstractIDToken.Meta):
        swappable = "OAUTH2_PROVIDER_ID_TOKEN_MODEL"
