"""The authorization server's ``OAUTH2_VALIDATOR_CLASS``: django-oauth-toolkit's validator, and a replayed
authorization code revokes the tokens issued from it (RFC 6749 sections 4.1.2 and 10.5).

django-oauth-toolkit deletes a code's grant when the code is exchanged and answers a second exchange with
``invalid_grant``, but the tokens of the first exchange stay valid: nothing links them to the code. Here each
exchange is remembered (the model ``mcp_resources.models.RedeemedCode``: digests only) for as long as its tokens may
live, and a second use of the code, whenever it comes, deletes the access token and revokes the refresh token's whole
family (every token refreshed from it since), through django-oauth-toolkit's own ``RefreshToken.revoke_family``.
Two exchanges racing each other are caught too: the loser's grant deletion fails, and both exchanges' tokens go.

A project with a validator of its own subclasses this one (``authorization_server_settings()`` names it).
"""

from __future__ import annotations

import hashlib
import logging
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_refresh_token_model
from oauth2_provider.oauth2_validators import OAuth2Validator as ToolkitValidator
from oauth2_provider.settings import oauth2_settings
from oauthlib.oauth2.rfc6749 import errors

from mcp_resources.models import RedeemedCode

logger = logging.getLogger("mcp_resources.auth")


def code_digest(code: str, client_id: str) -> str:
    """What is stored of an authorization code: SHA-256 of the client id and the code."""
    return hashlib.sha256(f"{client_id}\x00{code}".encode()).hexdigest()


class OAuth2Validator(ToolkitValidator):
    """django-oauth-toolkit's validator; a second use of an authorization code revokes the tokens of the first."""

    def save_bearer_token(self, token: dict[str, Any], request: Any, *args: Any, **kwargs: Any) -> None:
        super().save_bearer_token(token, request, *args, **kwargs)
        if request.grant_type == "authorization_code" and getattr(request, "code", None) and request.client:
            self.remember_exchange(request.code, request.client.client_id, token)

    def remember_exchange(self, code: str, client_id: str, token: dict[str, Any]) -> None:
        """Record that ``code`` was exchanged for ``token`` (its access token checksum, its refresh token family)."""
        checksum = hashlib.sha256(str(token["access_token"]).encode()).hexdigest()
        refresh = get_refresh_token_model().objects.filter(access_token__token_checksum=checksum).first()
        lifetime = max(
            int(oauth2_settings.ACCESS_TOKEN_EXPIRE_SECONDS),
            int(oauth2_settings.REFRESH_TOKEN_EXPIRE_SECONDS or 0),
            int(oauth2_settings.AUTHORIZATION_CODE_EXPIRE_SECONDS),
        )
        now = timezone.now()
        RedeemedCode.objects.filter(expires__lt=now).delete()
        RedeemedCode.objects.create(
            code_digest=code_digest(code, client_id),
            access_token_checksum=checksum,
            token_family=getattr(refresh, "token_family", None),
            expires=now + timedelta(seconds=lifetime),
        )

    def validate_code(self, client_id: str, code: str, client: Any, request: Any, *args: Any, **kwargs: Any) -> bool:
        valid: bool = super().validate_code(client_id, code, client, request, *args, **kwargs)
        if not valid and client is not None:
            self.revoke_exchanged(code, client.client_id)
        return valid

    def invalidate_authorization_code(self, client_id: str, code: str, request: Any, *args: Any, **kwargs: Any) -> None:
        try:
            super().invalidate_authorization_code(client_id, code, request, *args, **kwargs)
        except errors.InvalidGrantError:
            # Another exchange of this code deleted the grant first: both were served tokens; revoke them all.
            self.revoke_exchanged(code, request.client.client_id)
            raise

    def revoke_exchanged(self, code: str, client_id: str) -> int:
        """Revoke every token issued from ``code``; how many exchanges of it were remembered."""
        digest = code_digest(code, client_id)
        exchanges = list(RedeemedCode.objects.filter(code_digest=digest, expires__gte=timezone.now()))
        if not exchanges:
            return 0
        refresh_model = get_refresh_token_model()
        with transaction.atomic():
            for exchange in exchanges:
                if exchange.token_family is not None:
                    refresh_model.revoke_family(exchange.token_family)
                get_access_token_model().objects.filter(token_checksum=exchange.access_token_checksum).delete()
        logger.warning(
            "authorization code used again: revoked the tokens of %d exchange(s) (client %s, code %s)",
            len(exchanges),
            client_id,
            digest[:8],
        )
        return len(exchanges)
