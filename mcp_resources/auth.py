"""Authentication: who is calling, from the ``Authorization: Bearer`` header only.

The authentication class is pluggable (``MCP_RESOURCES["AUTHENTICATION_CLASS"]``). The default validates
django-oauth-toolkit access tokens, sets ``request.user`` and returns a :class:`Principal`. This is the only
module that imports ``oauth2_provider``. A token in the query string or body is never looked at.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

from django.contrib.auth.models import AnonymousUser

from mcp_resources.exceptions import AuthenticationRequired
from mcp_resources.principal import ANONYMOUS, Principal

if TYPE_CHECKING:
    from django.http import HttpRequest

logger = logging.getLogger("mcp_resources.auth")

MAX_AUTHORIZATION_LENGTH = 4096
# RFC 6750 b64token.
_BEARER = re.compile(r"^Bearer ([A-Za-z0-9\-._~+/]+=*)$")


class BaseAuthentication:
    """Identify the caller of one MCP request.

    ``authenticate`` returns a :class:`Principal` (``ANONYMOUS`` when no credentials were sent) and sets
    ``request.user``; it raises :class:`AuthenticationRequired` with ``invalid_token=True`` for credentials that
    were sent but are not valid.
    """

    def authenticate(self, request: HttpRequest) -> Principal:
        request.user = AnonymousUser()
        return ANONYMOUS

    def challenge(self, request: HttpRequest, error: str | None, scopes: tuple[str, ...]) -> str:
        """The ``WWW-Authenticate`` header value for a 401 or 403 answer."""
        params = []
        if error:
            params.append(f'error="{error}"')
        if scopes:
            params.append(f'scope="{" ".join(scopes)}"')
        return "Bearer" + ((" " + ", ".join(params)) if params else "")


class NoAuthentication(BaseAuthentication):
    """Every caller is anonymous: only public resources are served (the conformance profile uses this)."""


def bearer_token(request: HttpRequest) -> str | None:
    """The bearer token from the Authorization header; ``None`` if absent; raises if malformed."""
    header = request.META.get("HTTP_AUTHORIZATION")
    if header is None:
        return None
    if len(header) > MAX_AUTHORIZATION_LENGTH:
        raise AuthenticationRequired(invalid_token=True, reason="authorization header too long")
    match = _BEARER.match(header)
    if match is None:
        raise AuthenticationRequired(invalid_token=True, reason="malformed authorization header")
    return match.group(1)


class OAuth2Authentication(BaseAuthentication):
    """Validate django-oauth-toolkit access tokens sent as ``Authorization: Bearer``."""

    def authenticate(self, request: HttpRequest) -> Principal:
        request.user = AnonymousUser()
        token = bearer_token(request)
        if token is None:
            return ANONYMOUS
        access_token = self.validate(request, token)
        if access_token is None:
            logger.info("rejected bearer token (unknown, expired, revoked or not usable)")
            raise AuthenticationRequired(invalid_token=True, reason="invalid token")
        user = access_token.user
        if user is not None:
            request.user = user
        return self.build_principal(access_token)

    def validate(self, request: HttpRequest, token: str) -> Any:
        """Return django-oauth-toolkit's ``AccessToken`` for ``token`` if valid, else ``None``."""
        from oauth2_provider.settings import oauth2_settings
        from oauthlib.common import Request as OAuthRequest

        validator = oauth2_settings.OAUTH2_VALIDATOR_CLASS()
        oauth_request = OAuthRequest(request.build_absolute_uri(request.path), http_method=request.method or "POST")
        if not validator.validate_bearer_token(token, [], oauth_request):
            return None
        return oauth_request.access_token

    def build_principal(self, access_token: Any) -> Principal:
        user = access_token.user
        application = access_token.application
        return Principal(
            subject=str(user.pk) if user is not None else None,
            client_id=application.client_id if application is not None else None,
            scopes=frozenset(access_token.scope.split()),
            audience=tuple(access_token.resource or ()),
            authenticated=True,
        )
