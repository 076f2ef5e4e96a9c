"""The ``MCP_RESOURCES`` settings dict, read through typed properties that never cache.

Reading on every access keeps ``override_settings`` working in tests; settings are never read at import time.
Every key is documented in ``docs/settings.md``: a duration ends in ``_SECONDS`` or ``_MS``, a size in bytes in
``_BYTES``, and a count names the things it counts.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings as django_settings
from django.utils.module_loading import import_string

DEFAULTS: dict[str, Any] = {
    # The endpoint
    "AUTHENTICATION_CLASS": "mcp_resources.auth.OAuth2Authentication",
    "RESOURCE_URI": None,
    "ALLOWED_ORIGINS": [],
    "MAX_REQUEST_BYTES": 1024 * 1024,
    "MAX_RESPONSE_BYTES": 1024 * 1024,
    "SERVER_INFO": {},
    "INSTRUCTIONS": None,
    # Listing
    "PAGE_SIZE": 50,
    "LIST_DEADLINE_SECONDS": 10.0,
    "PUBLIC_CACHE_TTL_MS": 0,
    "CURSOR_KEYS": [],
    "CURSOR_TTL_SECONDS": 15 * 60,
    # Sessions of protocol 2025-11-25
    "SESSION_CACHE": "default",
    "SESSION_TIMEOUT_SECONDS": 24 * 3600,
    # Subscriptions
    "SUBSCRIPTIONS": True,
    "DELIVERY_URL": None,
    "DELIVERY_RETENTION_SECONDS": 3600.0,
    "STREAMS_PER_CALLER": 10,
    "URIS_PER_LISTEN": 100,
    "STREAM_SEND_TIMEOUT_SECONDS": 10.0,
    "STREAM_KEEPALIVE_SECONDS": 15.0,
    # OAuth resource server (docs/oauth.md)
    "AUTHORIZATION_SERVERS": [],
    "ACCEPT_TOKENS_WITHOUT_RESOURCE": False,
    "SCOPE_HIERARCHY": {},
    "TOKEN_CACHE_TTL_SECONDS": 0,
}

MAX_PAGE_SIZE = 100
DEFAULT_SERVER_NAME = "django-mcp-resources"


class Settings:
    """Typed, uncached access to ``settings.MCP_RESOURCES``."""

    def _get(self, key: str) -> Any:
        configured = getattr(django_settings, "MCP_RESOURCES", None) or {}
        return configured.get(key, DEFAULTS[key])

    # The endpoint --------------------------------------------------------------------------------------------

    @property
    def authentication_class(self) -> type:
        value = self._get("AUTHENTICATION_CLASS")
        return import_string(value) if isinstance(value, str) else value

    @property
    def resource_uri(self) -> str:
        """The canonical URI of this MCP server (RFC 8707 audience); unset means derived from the request."""
        value = self._get("RESOURCE_URI")
        return str(value) if value else ""

    @property
    def allowed_origins(self) -> list[str]:
        return list(self._get("ALLOWED_ORIGINS"))

    @property
    def max_request_bytes(self) -> int:
        return int(self._get("MAX_REQUEST_BYTES"))

    @property
    def max_response_bytes(self) -> int:
        """The most bytes one result may encode to (a list page is cut to fit)."""
        return int(self._get("MAX_RESPONSE_BYTES"))

    @property
    def server_info(self) -> dict[str, Any]:
        """``serverInfo``: ``name`` (default ``django-mcp-resources``), ``version`` (default the app's), ``title``."""
        from mcp_resources import __version__

        configured = dict(self._get("SERVER_INFO") or {})
        info: dict[str, Any] = {
            "name": str(configured.get("name") or DEFAULT_SERVER_NAME),
            "version": str(configured.get("version") or __version__),
        }
        if configured.get("title"):
            info["title"] = str(configured["title"])
        return info

    @property
    def instructions(self) -> str | None:
        value = self._get("INSTRUCTIONS")
        return str(value) if value else None

    # Listing -------------------------------------------------------------------------------------------------

    @property
    def page_size(self) -> int:
        return max(1, min(int(self._get("PAGE_SIZE")), MAX_PAGE_SIZE))

    @property
    def list_deadline_seconds(self) -> float:
        return float(self._get("LIST_DEADLINE_SECONDS"))

    @property
    def public_cache_ttl_ms(self) -> int:
        """How long clients may cache answers that are the same for everyone (discover, templates, static lists)."""
        return max(0, int(self._get("PUBLIC_CACHE_TTL_MS")))

    @property
    def cursor_keys(self) -> list[str]:
        return list(self._get("CURSOR_KEYS"))

    @property
    def cursor_ttl_seconds(self) -> int:
        return int(self._get("CURSOR_TTL_SECONDS"))

    # Sessions (2025-11-25) -----------------------------------------------------------------------------------

    @property
    def session_cache(self) -> str:
        return str(self._get("SESSION_CACHE"))

    @property
    def session_timeout_seconds(self) -> int:
        return int(self._get("SESSION_TIMEOUT_SECONDS"))

    # Subscriptions -------------------------------------------------------------------------------------------

    @property
    def subscriptions(self) -> bool:
        return bool(self._get("SUBSCRIPTIONS"))

    @property
    def delivery_url(self) -> str | None:
        """The Redis URL of the log that carries change notifications; ``None``: this process's own log."""
        value = self._get("DELIVERY_URL")
        return str(value) if value else None

    @property
    def delivery_retention_seconds(self) -> float:
        return float(self._get("DELIVERY_RETENTION_SECONDS"))

    @property
    def streams_per_caller(self) -> int:
        return int(self._get("STREAMS_PER_CALLER"))

    @property
    def uris_per_listen(self) -> int:
        return int(self._get("URIS_PER_LISTEN"))

    @property
    def stream_send_timeout_seconds(self) -> float:
        return float(self._get("STREAM_SEND_TIMEOUT_SECONDS"))

    @property
    def stream_keepalive_seconds(self) -> float:
        return float(self._get("STREAM_KEEPALIVE_SECONDS"))

    # OAuth resource server -----------------------------------------------------------------------------------

    @property
    def authorization_servers(self) -> list[str]:
        """Issuer URLs for the protected resource metadata; empty means this project's own DOT server."""
        return [str(url) for url in self._get("AUTHORIZATION_SERVERS") or []]

    @property
    def accept_tokens_without_resource(self) -> bool:
        """Accept tokens issued without an RFC 8707 ``resource`` (the MCP spec says no; default False)."""
        return bool(self._get("ACCEPT_TOKENS_WITHOUT_RESOURCE"))

    @property
    def scope_hierarchy(self) -> dict[str, list[str]]:
        """Broad scope -> the narrower scopes it implies (expanded transitively)."""
        value = self._get("SCOPE_HIERARCHY") or {}
        return {str(k): [str(s) for s in v] for k, v in dict(value).items()}

    @property
    def token_cache_ttl_seconds(self) -> float:
        """Seconds a validated token may be served from the per-process cache; 0 disables the cache."""
        return max(0.0, float(self._get("TOKEN_CACHE_TTL_SECONDS") or 0))


mcp_settings = Settings()
