"""Authentication: who is calling, from the ``Authorization: Bearer`` header only.

The authentication class is pluggable (``MCP_RESOURCES["AUTHENTICATION_CLASS"]``). The default,
:class:`OAuth2Authentication`, makes the endpoint an OAuth 2.1 resource server on django-oauth-toolkit: it
validates the access token, checks its audience (RFC 8707) against the canonical resource URI, sets
``request.user`` and ``request.auth`` and returns a :class:`Principal`. The token itself is validated by
django-oauth-toolkit's ``OAUTH2_VALIDATOR_CLASS`` (``validate_bearer_token``), the decision it owns. A token in the
query string or body is never looked at, a received token is never passed anywhere, and no log line contains one.

The class also answers the questions the rest of the app asks about authorization: which authorization servers
protect the endpoint (for the protected resource metadata) and what a 401/403 answer looks like.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import logging
import re
import unicodedata
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, NoReturn

from django.contrib.auth.models import AnonymousUser
from django.http import HttpResponse

from mcp_resources.auth.metadata import (
    canonical_resource_uri,
    challenge_scopes,
    normalize_resource_uri,
    resource_metadata_url,
    scopes_supported,
)
from mcp_resources.auth.tokencache import CachedToken, token_cache
from mcp_resources.conf import mcp_settings
from mcp_resources.exceptions import AuthenticationRequired, InsufficientScope
from mcp_resources.principal import ANONYMOUS, Principal

if TYPE_CHECKING:
    from django.http import HttpRequest

    from mcp_resources.registries import ResourceRegistry

logger = logging.getLogger("mcp_resources.auth")

MAX_AUTHORIZATION_LENGTH = 4096
MAX_SUBJECT_LENGTH = 256
# RFC 6750 b64token, ASCII only (the scheme is compared case-insensitively on its own).
_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")


def bearer_token(request: HttpRequest) -> str | None:
    """The bearer token from the ``Authorization`` header; ``None`` if absent; raises if malformed.

    Anything other than exactly ``Bearer <b64token>`` (a wrong scheme, several tokens, an empty value, a
    value over 4 kB, non-ASCII or control characters) is refused rather than treated as anonymous.
    """
    header = request.META.get("HTTP_AUTHORIZATION")
    if header is None:
        return None
    if len(header) > MAX_AUTHORIZATION_LENGTH:
        raise AuthenticationRequired(invalid_token=True, reason="authorization header too long")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer":
        raise AuthenticationRequired(invalid_token=True, reason="authorization header is not a Bearer token")
    token = token.lstrip(" ")
    if not _B64TOKEN.fullmatch(token):
        raise AuthenticationRequired(invalid_token=True, reason="malformed bearer token")
    return token


def expand_scopes(scopes: Iterable[str], hierarchy: Mapping[str, Iterable[str]]) -> frozenset[str]:
    """``scopes`` plus every scope they imply through ``hierarchy`` (broad -> narrower), transitively."""
    result = set(scopes)
    pending = list(result)
    while pending:
        for implied in hierarchy.get(pending.pop(), ()):
            if implied not in result:
                result.add(implied)
                pending.append(implied)
    return frozenset(result)


def valid_subject(value: object) -> bool:
    """A subject is a non-empty string of at most 256 characters without control characters."""
    return (
        isinstance(value, str)
        and 0 < len(value) <= MAX_SUBJECT_LENGTH
        and not any(unicodedata.category(char) in ("Cc", "Cs") for char in value)
    )


def _quote(value: str) -> str:
    return value.replace("\r", "").replace("\n", "").replace("\\", "\\\\").replace('"', '\\"')


def subject_of(user: Any) -> str | None:
    """The subject the configured authentication class gives ``user`` (``get_subject``; ``str(user.pk)`` without)."""
    get_subject = getattr(mcp_settings.authentication_class(), "get_subject", None)
    return get_subject(user) if get_subject is not None else str(user.pk)


def user_principal(user: Any, scopes: Iterable[str], client_id: str) -> Principal:
    """The principal a valid token of ``user`` holding ``scopes`` would give: the subject as the configured
    authentication class computes it (``get_subject``), the scopes expanded by ``SCOPE_HIERARCHY``, the audience the
    endpoint's ``RESOURCE_URI``. For callers that have no token: management commands and the test client."""
    return Principal(
        subject=subject_of(user),
        client_id=client_id,
        scopes=expand_scopes(scopes, mcp_settings.scope_hierarchy),
        audience=(mcp_settings.resource_uri,) if mcp_settings.resource_uri else (),
        authenticated=True,
    )


class BaseAuthentication:
    """Identify the caller of one MCP request, and describe how to authenticate.

    ``authenticate`` returns a :class:`Principal` (``ANONYMOUS`` when no credentials were sent) and sets
    ``request.user`` and ``request.auth``; it raises :class:`AuthenticationRequired` with ``invalid_token=True``
    for credentials that were sent but are not valid.
    """

    credential_changes_published: bool = False
    """Whether every change that makes :meth:`authenticate` answer otherwise for credentials it accepted is published
    on the delivery log as a change of the bearer token (``publish_token_changed`` with the token's SHA-256, the
    ``token_checksum`` django-oauth-toolkit stores). Then an open stream authenticates its caller once and again only
    when its token's change arrives; otherwise (the default) it authenticates the caller again before every update,
    as changes to other credentials (a session cookie, an API key) reach no stream."""

    def authenticate(self, request: HttpRequest) -> Principal:
        request.user = AnonymousUser()
        request.auth = None  # type: ignore[attr-defined]
        return ANONYMOUS

    # Discovery -------------------------------------------------------------------------------------------

    def authorization_servers(self, request: HttpRequest) -> list[str]:
        """Issuers of the tokens this endpoint accepts (``authorization_servers`` in the metadata)."""
        return mcp_settings.authorization_servers

    def resource_metadata_url(self, request: HttpRequest) -> str | None:
        """The protected resource metadata URL advertised in challenges (``None``: not advertised)."""
        resource = canonical_resource_uri(request)
        return resource_metadata_url(resource) if resource else None

    # Challenges ------------------------------------------------------------------------------------------

    def challenge(self, request: HttpRequest, error: str | None, scopes: Iterable[str]) -> str:
        """The ``WWW-Authenticate`` header value for a 401 or 403 answer."""
        params: dict[str, str] = {}
        if error:
            params["error"] = error
        scope = challenge_scopes(scopes)
        if scope:
            params["scope"] = " ".join(scope)
        return self.format_challenge(request, params, self.resource_metadata_url(request))

    def format_challenge(self, request: HttpRequest, params: dict[str, str], metadata_url: str | None) -> str:
        if metadata_url:
            params = {**params, "resource_metadata": metadata_url}
        if not params:
            return "Bearer"
        return "Bearer " + ", ".join(f'{key}="{_quote(value)}"' for key, value in params.items())

    def failure_response(
        self, request: HttpRequest, exc: Exception, registry: ResourceRegistry | None = None
    ) -> HttpResponse:
        """The 401 (authentication) or 403 (insufficient scope) answer for ``exc``, with its challenge.

        A 401 names the scopes the operation needs; when it needs none in particular (or the token was refused
        before the operation was known) it names the endpoint's ``scopes_supported``.
        """
        if isinstance(exc, InsufficientScope):
            challenge = self.challenge(request, "insufficient_scope", exc.scopes)
            body = {"error": "insufficient_scope", "error_description": "The token lacks a required scope."}
            return _json(body, 403, challenge)
        assert isinstance(exc, AuthenticationRequired)
        scopes: Iterable[str] = exc.scopes
        if not exc.scopes:
            try:
                scopes = scopes_supported(registry)
            except Exception:  # the challenge must not fail because the database did
                logger.exception("could not gather scopes_supported for a challenge")
                scopes = ()
        error = "invalid_token" if exc.invalid_token else None
        challenge = self.challenge(request, error, scopes)
        if exc.invalid_token:
            body = {
                "error": "invalid_token",
                "error_description": "The access token is missing, malformed, unknown, expired or revoked.",
            }
        else:
            body = {"error": "unauthorized", "error_description": "Authentication required."}
        return _json(body, 401, challenge)


def _json(body: dict[str, str], status: int, challenge: str) -> HttpResponse:
    response = HttpResponse(json.dumps(body), status=status, content_type="application/json")
    response["WWW-Authenticate"] = challenge
    response["Cache-Control"] = "no-store"
    return response


class NoAuthentication(BaseAuthentication):
    """Every caller is anonymous: only public resources are served (the conformance profile uses this).

    No authorization server protects the endpoint, so no protected resource metadata is published.
    """

    def authorization_servers(self, request: HttpRequest) -> list[str]:
        return []

    def resource_metadata_url(self, request: HttpRequest) -> str | None:
        return None


class OAuth2Authentication(BaseAuthentication):
    """Validate django-oauth-toolkit access tokens sent as ``Authorization: Bearer``.

    A token is accepted when django-oauth-toolkit finds it valid (known, not expired, application usable), its
    ``resource`` includes the canonical resource URI (or it has none and ``ACCEPT_TOKENS_WITHOUT_RESOURCE`` is
    on), its user is active and that user's subject is valid. Validated tokens may be served from the bounded
    cache of :mod:`mcp_resources.auth.tokencache` for ``TOKEN_CACHE_TTL_SECONDS``.
    """

    credential_changes_published = True
    """The app's receivers publish a change of the token for every save or delete of the token row (revocation, the
    admin, a cascade from deleting its user or application), of its user and of its application
    (:mod:`mcp_resources.receivers`). A subclass (or an ``OAUTH2_VALIDATOR_CLASS``) that refuses tokens for anything
    else publishes those changes too, or sets this to ``False``."""

    token_cache_size: int = 1024
    """The most tokens the per-process cache holds (the least recently used are dropped first). Subclass to change
    it; it matters only with ``TOKEN_CACHE_TTL_SECONDS`` on."""

    def authenticate(self, request: HttpRequest) -> Principal:
        request.user = AnonymousUser()
        request.auth = None  # type: ignore[attr-defined]
        token = bearer_token(request)
        if token is None:
            return ANONYMOUS
        key = hashlib.sha256(token.encode("ascii")).hexdigest()
        ttl = mcp_settings.token_cache_ttl_seconds
        entry = token_cache.get(key) if ttl > 0 else None
        cached = entry is not None
        if entry is None:
            entry = self.validate(request, token, key)
            if ttl > 0:
                # The cache keeps its own copy of the user: this request may change the one it is given.
                kept = dataclasses.replace(entry, user=copy.copy(entry.user))
                token_cache.put(key, kept, ttl, self.token_cache_size)
        audience = self.check_audience(request, entry, key)
        if entry.user is not None:
            # A cached user is shared between requests: each request gets its own copy.
            request.user = copy.copy(entry.user) if cached else entry.user
        principal = Principal(
            subject=entry.subject,
            client_id=entry.client_id,
            scopes=expand_scopes(entry.scope.split(), mcp_settings.scope_hierarchy),
            audience=audience,
            authenticated=True,
            expires_at=entry.expires_at,
        )
        request.auth = principal  # type: ignore[attr-defined]
        return principal

    def validate(self, request: HttpRequest, token: str, key: str) -> CachedToken:
        """Validate ``token`` with django-oauth-toolkit's validator; raise :class:`AuthenticationRequired` if not.

        ``OAUTH2_VALIDATOR_CLASS().validate_bearer_token`` decides (known, not expired, application usable, resource
        allowed); the exact audience check follows in :meth:`check_audience`. The token row is loaded in one plain
        query when the validator loads it the default way (:mod:`mcp_resources.auth.loading`).
        """
        from oauth2_provider.settings import oauth2_settings
        from oauthlib.common import Request as OAuthRequest

        from mcp_resources.auth.loading import validator_class

        # django-oauth-toolkit checks a token's resource against this URI (prefix match); the exact audience
        # check follows in check_audience.
        uri = canonical_resource_uri(request) or request.build_absolute_uri(request.path)
        oauth_request = OAuthRequest(uri, http_method=request.method or "POST")
        validator = validator_class(oauth2_settings.OAUTH2_VALIDATOR_CLASS)()
        if not validator.validate_bearer_token(token, [], oauth_request):
            detail = (getattr(oauth_request, "oauth2_error", None) or {}).get("error_description")
            self.refuse(key, str(detail or "unknown, expired or revoked token"))
        access_token = oauth_request.access_token
        application = access_token.application
        client_id = application.client_id if application is not None else None
        return self.accepted(
            key, access_token.user, client_id, access_token.scope, access_token.resource, access_token.expires
        )

    def accepted(
        self, key: str, user: Any, client_id: str | None, scope: str | None, resource: Any, expires: datetime
    ) -> CachedToken:
        """What a valid token resolves to, once its user is checked (active, with a valid subject)."""
        subject = None
        if user is not None:
            if not user.is_active:
                self.refuse(key, "the token's user is inactive", client_id)
            subject = self.get_subject(user)
            if not valid_subject(subject):
                self.refuse(key, "the token's subject is empty, too long or has control characters", client_id)
        return CachedToken(
            user=user,
            client_id=client_id,
            scope=scope or "",
            resource=tuple(str(r) for r in resource or ()),
            subject=subject,
            expires_at=expires.timestamp(),
        )

    def get_subject(self, user: Any) -> str | None:
        """The stable user id that becomes ``Principal.subject``: ``str(user.pk)``. Override to use another field."""
        return None if user.pk is None else str(user.pk)

    def check_audience(self, request: HttpRequest, entry: CachedToken, key: str) -> tuple[str, ...]:
        """RFC 8707: the token's ``resource`` must include this server's canonical resource URI."""
        if not entry.resource:
            if mcp_settings.accept_tokens_without_resource:
                return ()
            self.refuse(key, "the token was issued without a resource indicator", entry.client_id)
        canonical = canonical_resource_uri(request)
        if not canonical or canonical not in {normalize_resource_uri(r) for r in entry.resource}:
            self.refuse(key, "the token was issued for another resource", entry.client_id)
        return entry.resource

    def refuse(self, key: str, reason: str, client_id: str | None = None) -> NoReturn:
        """Log why a token was refused (by its digest prefix, never the token) and raise 401."""
        logger.info("refused bearer token sha256:%s… (client %s): %s", key[:8], client_id or "-", reason)
        raise AuthenticationRequired(invalid_token=True, reason=reason)

    # Discovery and challenges ----------------------------------------------------------------------------

    def authorization_servers(self, request: HttpRequest) -> list[str]:
        """``AUTHORIZATION_SERVERS``, else django-oauth-toolkit's own issuer when its metadata is mounted."""
        configured = mcp_settings.authorization_servers
        if configured:
            return configured
        from oauth2_provider.settings import oauth2_settings

        return list(oauth2_settings.oauth2_resource_authorization_servers(request))

    def format_challenge(self, request: HttpRequest, params: dict[str, str], metadata_url: str | None) -> str:
        from oauth2_provider.www_authenticate import build_bearer_challenge

        return str(build_bearer_challenge(request, oauth2_error=params, resource_metadata_url=metadata_url))


# django-oauth-toolkit glue -------------------------------------------------------------------------------


def local_authorization_server_configured() -> bool:
    """Whether django-oauth-toolkit can name an authorization server for the metadata without a setting of ours."""
    from django.urls import NoReverseMatch, reverse
    from oauth2_provider.settings import oauth2_settings

    if oauth2_settings.OAUTH2_PROTECTED_RESOURCE_AUTHORIZATION_SERVERS or oauth2_settings.OIDC_ISS_ENDPOINT:
        return True
    try:
        reverse("oauth2_provider:oauth-server-metadata")
    except NoReverseMatch:
        return False
    return True
