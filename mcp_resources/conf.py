"""The ``MCP_RESOURCES`` settings dict, read through typed properties that never cache.

Reading on every access keeps ``override_settings`` working in tests; settings are never read at import time.
Every key is documented in ``docs/settings.md``.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings as django_settings
from django.utils.module_loading import import_string

DEFAULTS: dict[str, Any] = {
    "AUTHENTICATION_CLASS": "mcp_resources.auth.OAuth2Authentication",
    "RESOURCE_URI": None,
    "ALLOWED_ORIGINS": [],
    "MAX_REQUEST_BYTES": 1024 * 1024,
    "SERVER_NAME": "django-mcp-resources",
    "SERVER_VERSION": None,
    "SERVER_TITLE": None,
    "INSTRUCTIONS": None,
    "PAGE_SIZE": 50,
    "DISCOVER_TTL_MS": 0,
    "TEMPLATES_TTL_MS": 0,
    "SESSION_CACHE": "default",
    "SESSION_TIMEOUT": 24 * 3600,
    "CURSOR_KEYS": [],
    "CURSOR_TTL_SECONDS": 15 * 60,
    "PAGE_MAX_BYTES": 1024 * 1024,
    "RESULT_MAX_BYTES": 1024 * 1024,
    "LIST_DEADLINE_SECONDS": 10.0,
    "STATIC_LIST_TTL_MS": 0,
    "SUBSCRIPTIONS": True,
    "CHANNEL_LAYER": "default",
    "STREAMS_PER_CALLER": 10,
    "URIS_PER_LISTEN": 100,
    "STREAM_QUEUE_SIZE": 100,
    "STREAM_SEND_TIMEOUT_SECONDS": 10.0,
    "KEEPALIVE_SECONDS": 15.0,
    # OAuth resource server (docs/oauth.md)
    "SUBJECT_FIELD": "pk",
    "ACCEPT_TOKENS_WITHOUT_RESOURCE": False,
    "SCOPE_HIERARCHY": {},
    "AUTHORIZATION_SERVERS": [],
    "RESOURCE_NAME": None,
    "TOKEN_CACHE_TTL": 0,
    "TOKEN_CACHE_SIZE": 1024,
    "PREPARED_STATEMENTS": True,
    "ASGI_THREADS": 2,
}

MAX_PAGE_SIZE = 100
MODERN_VERSION = "2026-07-28"
LEGACY_VERSIONS = ("2025-11-25", "2025-06-18")
SUPPORTED_VERSIONS = (MODERN_VERSION, *LEGACY_VERSIONS)


class Settings:
    """Typed, uncached access to ``settings.MCP_RESOURCES``."""

    def _get(self, key: str) -> Any:
        user = getattr(django_settings, "MCP_RESOURCES", None) or {}
        return user.get(key, DEFAULTS[key])

    @property
    def user_keys(self) -> set[str]:
        return set(getattr(django_settings, "MCP_RESOURCES", None) or {})

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
    def server_info(self) -> dict[str, Any]:
        from mcp_resources import __version__

        info: dict[str, Any] = {
            "name": str(self._get("SERVER_NAME")),
            "version": str(self._get("SERVER_VERSION") or __version__),
        }
        title = self._get("SERVER_TITLE")
        if title:
            info["title"] = str(title)
        return info

    @property
    def instructions(self) -> str | None:
        value = self._get("INSTRUCTIONS")
        return str(value) if value else None

    @property
    def page_size(self) -> int:
        return max(1, min(int(self._get("PAGE_SIZE")), MAX_PAGE_SIZE))

    @property
    def discover_ttl_ms(self) -> int:
        return max(0, int(self._get("DISCOVER_TTL_MS")))

    @property
    def templates_ttl_ms(self) -> int:
        return max(0, int(self._get("TEMPLATES_TTL_MS")))

    @property
    def session_cache(self) -> str:
        return str(self._get("SESSION_CACHE"))

    @property
    def session_timeout(self) -> int:
        return int(self._get("SESSION_TIMEOUT"))

    @property
    def cursor_keys(self) -> list[str]:
        return list(self._get("CURSOR_KEYS"))

    @property
    def cursor_ttl_seconds(self) -> int:
        return int(self._get("CURSOR_TTL_SECONDS"))

    # OAuth resource server -----------------------------------------------------------------------------

    @property
    def subject_field(self) -> str:
        """The user attribute that becomes ``Principal.subject`` (``"pk"`` by default)."""
        return str(self._get("SUBJECT_FIELD") or "pk")

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
    def authorization_servers(self) -> list[str]:
        """Issuer URLs for the protected resource metadata; empty means this project's own DOT server."""
        return [str(url) for url in self._get("AUTHORIZATION_SERVERS") or []]

    @property
    def resource_name(self) -> str:
        """``resource_name`` in the protected resource metadata (default: SERVER_TITLE, else SERVER_NAME)."""
        value = self._get("RESOURCE_NAME") or self._get("SERVER_TITLE") or self._get("SERVER_NAME")
        return str(value)

    @property
    def token_cache_ttl(self) -> float:
        """Seconds a validated token may be served from the per-process cache; 0 disables the cache."""
        return max(0.0, float(self._get("TOKEN_CACHE_TTL") or 0))

    @property
    def token_cache_size(self) -> int:
        """Most tokens held by the per-process cache (least recently used ones are dropped)."""
        return max(0, int(self._get("TOKEN_CACHE_SIZE") or 0))

    @property
    def prepared_statements(self) -> bool:
        """Whether the app's fixed queries run as prepared statements on PostgreSQL (:mod:`mcp_resources.prepared`)."""
        return bool(self._get("PREPARED_STATEMENTS"))

    @property
    def asgi_threads(self) -> int:
        """Threads in which :class:`~mcp_resources.asgi.MCPApplication` runs MCP requests, per process."""
        return max(1, int(self._get("ASGI_THREADS")))

    @property
    def subscriptions(self) -> bool:
        return bool(self._get("SUBSCRIPTIONS"))

    @property
    def channel_layer(self) -> str:
        return str(self._get("CHANNEL_LAYER"))

    @property
    def streams_per_caller(self) -> int:
        return int(self._get("STREAMS_PER_CALLER"))

    @property
    def uris_per_listen(self) -> int:
        return int(self._get("URIS_PER_LISTEN"))

    @property
    def stream_queue_size(self) -> int:
        return int(self._get("STREAM_QUEUE_SIZE"))

    @property
    def stream_send_timeout(self) -> float:
        return float(self._get("STREAM_SEND_TIMEOUT_SECONDS"))

    @property
    def keepalive_seconds(self) -> float:
        return float(self._get("KEEPALIVE_SECONDS"))

    @property
    def max_page_bytes(self) -> int:
        """The tighter of ``PAGE_MAX_BYTES`` and ``RESULT_MAX_BYTES``."""
        return min(int(self._get("PAGE_MAX_BYTES")), int(self._get("RESULT_MAX_BYTES")))

    @property
    def list_deadline_seconds(self) -> float:
        return float(self._get("LIST_DEADLINE_SECONDS"))

    @property
    def static_list_ttl_ms(self) -> int:
        return max(0, int(self._get("STATIC_LIST_TTL_MS")))


mcp_settings = Settings()
