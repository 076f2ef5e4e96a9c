"""Client registration under MCP's authorization rules: RFC 7591 dynamic client registration (and RFC 7592 updates)
and client ID metadata documents admit only the redirect URIs MCP allows and only the grants the server serves, and
registration is throttled per client address.

The rules (docs/oauth.md, "Who may register, and with what"):

- a redirect URI is ``https`` with a host, or ``http`` on a loopback host (``127.0.0.1``, ``[::1]``, ``localhost``,
  any port), as the MCP authorization specification states it; or one of the RFC 8252 private-use schemes the
  project adds to django-oauth-toolkit's ``ALLOWED_REDIRECT_URI_SCHEMES`` (``authorization_server_settings(
  private_use_schemes=...)``), a deviation from MCP's rule the project opts into;
- never userinfo (``https://app.example.com@evil.example.com/cb``), a fragment, a wildcard host, a backslash,
  whitespace or a control character;
- ``grant_types`` and ``response_types`` only among django-oauth-toolkit's ``OAUTH2_GRANT_TYPES_SUPPORTED`` and
  ``OAUTH2_RESPONSE_TYPES_SUPPORTED`` (what the metadata advertises and the token endpoint serves).

Refusals are RFC 7591's: ``invalid_redirect_uri`` and ``invalid_client_metadata`` (400), and 429 with
``Retry-After`` past the throttle.
"""

from __future__ import annotations

import hashlib
import math
import re
import time
from typing import Any
from urllib.parse import urlsplit

from django.core.cache import caches
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse, JsonResponse
from oauth2_provider.cimd import CIMDError, SafeMetadataFetcher
from oauth2_provider.settings import oauth2_settings
from oauth2_provider.views import DynamicClientRegistrationManagementView, DynamicClientRegistrationView

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})
WEB_SCHEMES = frozenset({"http", "https"})
_FORBIDDEN_CHARACTERS = re.compile(r"[\x00-\x20\x7f\\]")
_PERIODS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}
_THROTTLE_PREFIX = "mcp_resources:registrations:"

DEFAULT_REGISTRATION_RATE = "20/hour"
"""Registrations one client address may attempt per period (``authorization_server_urlpatterns()``'s default)."""


class RegistrationRefused(Exception):
    """Client metadata that MCP's rules or this server refuse; ``error`` is RFC 7591's code."""

    def __init__(self, error: str, description: str) -> None:
        super().__init__(description)
        self.error = error
        self.description = description


def private_use_schemes() -> frozenset[str]:
    """The RFC 8252 private-use schemes the project allows: ``ALLOWED_REDIRECT_URI_SCHEMES`` beyond http(s)."""
    return frozenset(str(scheme).lower() for scheme in oauth2_settings.ALLOWED_REDIRECT_URI_SCHEMES) - WEB_SCHEMES


def redirect_uri_problem(uri: str, private_schemes: frozenset[str] = frozenset()) -> str | None:
    """Why MCP's rules refuse ``uri`` as a redirect URI, or ``None`` when they allow it."""
    if _FORBIDDEN_CHARACTERS.search(uri):
        return "must not contain whitespace, control characters or backslashes"
    if "#" in uri:
        return "must not contain a fragment"
    try:
        parts = urlsplit(uri)
        port = parts.port
    except ValueError:
        return "is not a valid URI"
    scheme = parts.scheme.lower()
    if not scheme:
        return "must be an absolute URI"
    if "@" in parts.netloc:
        return "must not contain userinfo"
    if "*" in parts.netloc:
        return "must not name a wildcard host"
    if scheme in WEB_SCHEMES:
        host = parts.hostname or ""
        if not host or (port is None and parts.netloc.endswith(":")):
            return "must name a host"
        if scheme == "http" and host not in LOOPBACK_HOSTS:
            return "must use https, or http on a loopback host (127.0.0.1, [::1] or localhost)"
        return None
    if scheme in private_schemes:
        return None
    return f"uses the scheme {scheme!r}: only https, loopback http and the private-use schemes this server names"


def check_client_metadata(metadata: dict[str, Any]) -> None:
    """Raise :exc:`RegistrationRefused` unless ``metadata`` (RFC 7591 client metadata) follows the rules."""
    redirect_uris = metadata.get("redirect_uris", [])
    if isinstance(redirect_uris, list):
        schemes = private_use_schemes()
        for uri in redirect_uris:
            if isinstance(uri, str):
                problem = redirect_uri_problem(uri, schemes)
                if problem is not None:
                    raise RegistrationRefused("invalid_redirect_uri", f"redirect_uri {uri!r} {problem}")
    served_grants = set(oauth2_settings.OAUTH2_GRANT_TYPES_SUPPORTED)
    grant_types = metadata.get("grant_types", ["authorization_code"])
    if isinstance(grant_types, list):
        for grant in grant_types:
            if isinstance(grant, str) and grant not in served_grants:
                raise RegistrationRefused(
                    "invalid_client_metadata",
                    f"grant_type {grant!r} is not served here; served: {', '.join(sorted(served_grants))}",
                )
    served_responses = set(oauth2_settings.OAUTH2_RESPONSE_TYPES_SUPPORTED)
    response_types = metadata.get("response_types", ["code"])
    if not isinstance(response_types, list) or not all(isinstance(value, str) for value in response_types):
        raise RegistrationRefused("invalid_client_metadata", "response_types must be an array of strings")
    for response_type in response_types:
        if response_type not in served_responses:
            raise RegistrationRefused(
                "invalid_client_metadata",
                f"response_type {response_type!r} is not served here; served: {', '.join(sorted(served_responses))}",
            )


def parse_rate(rate: str | None) -> tuple[int, int] | None:
    """``"20/hour"`` as ``(20, 3600)``; ``None`` (no throttle) as ``None``."""
    if rate is None:
        return None
    count, _, period = str(rate).partition("/")
    seconds = _PERIODS.get(period.strip().lower().rstrip("s"))
    if not count.strip().isdigit() or int(count) < 1 or seconds is None:
        raise ImproperlyConfigured(
            f"Registration rate {rate!r} must read '<count>/<second|minute|hour|day>', e.g. '20/hour', or be None."
        )
    return int(count), seconds


def throttle_key(address: str, period: int, now: float) -> str:
    """The cache key counting the registrations of ``address`` in the window of ``period`` seconds around ``now``."""
    digest = hashlib.sha256(address.encode()).hexdigest()
    return f"{_THROTTLE_PREFIX}{digest}:{period}:{int(now // period)}"


def _error(error: str, description: str, status: int = 400) -> JsonResponse:
    response = JsonResponse({"error": error, "error_description": description}, status=status)
    response["Cache-Control"] = "no-store"
    return response


class ClientRegistrationView(DynamicClientRegistrationView):
    """``POST <prefix>register/``: django-oauth-toolkit's RFC 7591 registration, under MCP's rules and a throttle.

    ``rate`` (``"20/hour"``, ``None`` for no throttle) bounds the registrations one client address may attempt per
    period, counted in the Django cache ``cache_alias``; :meth:`get_client_address` says what an address is.
    """

    rate: str | None = DEFAULT_REGISTRATION_RATE
    cache_alias: str = "default"

    def get_client_address(self, request: HttpRequest) -> str:
        """The address registrations are counted by: ``REMOTE_ADDR`` (behind a proxy, override this to read the
        address the proxy forwards, as the proxy sets it)."""
        return str(request.META.get("REMOTE_ADDR") or "")

    def throttle(self, request: HttpRequest) -> int | None:
        """Count this attempt; the seconds to wait when the address is past its rate, else ``None``."""
        parsed = parse_rate(self.rate)
        if parsed is None:
            return None
        limit, period = parsed
        now = time.time()
        window = int(now // period)
        key = throttle_key(self.get_client_address(request), period, now)
        cache = caches[self.cache_alias]
        cache.add(key, 0, timeout=period + 1)
        try:
            count = int(cache.incr(key))
        except ValueError:  # evicted between add and incr
            cache.set(key, 1, timeout=period + 1)
            count = 1
        if count <= limit:
            return None
        return max(1, math.ceil((window + 1) * period - now))

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        wait = self.throttle(request)
        if wait is not None:
            throttled = _error("temporarily_unavailable", "Too many registrations from this address", status=429)
            throttled["Retry-After"] = str(wait)
            return throttled
        refused = _refusal(request)
        if refused is not None:
            return refused
        response: HttpResponse = super().post(request, *args, **kwargs)
        return response


class ClientConfigurationView(DynamicClientRegistrationManagementView):
    """``<prefix>register/<client_id>/``: django-oauth-toolkit's RFC 7592 management; an update (``PUT``) follows the
    registration rules."""

    def put(self, request: HttpRequest, client_id: str, *args: Any, **kwargs: Any) -> HttpResponse:
        authenticated = self._authenticate_registration_request(request, client_id)
        if isinstance(authenticated, HttpResponse):
            return authenticated
        refused = _refusal(request)
        if refused is not None:
            return refused
        response: HttpResponse = super().put(request, client_id, *args, **kwargs)
        return response


def _refusal(request: HttpRequest) -> HttpResponse | None:
    """The RFC 7591 error for a registration body that breaks the rules (malformed JSON is left to the toolkit)."""
    import json

    try:
        metadata = json.loads(request.body)
    except ValueError:
        return None
    if not isinstance(metadata, dict):
        return None
    try:
        check_client_metadata(metadata)
    except RegistrationRefused as refused:
        return _error(refused.error, refused.description)
    return None


class MetadataFetcher(SafeMetadataFetcher):
    """django-oauth-toolkit's SSRF-hardened fetcher of client ID metadata documents (``CIMD_METADATA_FETCHER``); a
    document whose redirect URIs, grant types or response types break the registration rules is refused (the
    client is then unknown, as for any invalid document)."""

    def fetch(self, client_id: str) -> tuple[dict[str, Any], int]:
        metadata, max_age = self.fetch_document(client_id)
        if not isinstance(metadata, dict):
            raise CIMDError("client metadata must be a JSON object")
        try:
            check_client_metadata(metadata)
        except RegistrationRefused as refused:
            raise CIMDError(f"{refused.error}: {refused.description}") from refused
        return metadata, max_age

    def fetch_document(self, client_id: str) -> tuple[dict[str, Any], int]:
        """The document and its max age, as django-oauth-toolkit's fetcher gets them (override to fetch through an
        egress proxy)."""
        document, max_age = super().fetch(client_id)
        return document, int(max_age)
