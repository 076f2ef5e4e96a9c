"""The checks of the ``MCP_RESOURCES`` setting (W001, E011, E012, E029, E035) and of the resource server's
OAuth settings (E015-E018, W003, W004)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks
from django.utils.module_loading import import_string

from mcp_resources.conf import DEFAULTS


def check_settings() -> list[checks.CheckMessage]:
    messages: list[checks.CheckMessage] = []
    configured = getattr(settings, "MCP_RESOURCES", None) or {}
    for key in sorted(set(configured) - set(DEFAULTS)):
        messages.append(
            checks.Warning(
                f"Unknown MCP_RESOURCES setting {key!r}.",
                hint="Every setting is listed in docs/settings.md.",
                id="mcp_resources.W001",
                obj="MCP_RESOURCES",
            )
        )
    value = configured.get("AUTHENTICATION_CLASS", DEFAULTS["AUTHENTICATION_CLASS"])
    if isinstance(value, str):
        try:
            import_string(value)
        except ImportError as exc:
            messages.append(
                checks.Error(
                    f"MCP_RESOURCES['AUTHENTICATION_CLASS'] cannot be imported: {exc}",
                    id="mcp_resources.E011",
                    obj="MCP_RESOURCES",
                )
            )
    keys = configured.get("CURSOR_KEYS", DEFAULTS["CURSOR_KEYS"])
    if not isinstance(keys, list | tuple) or any(not _cursor_key_ok(key) for key in keys):
        messages.append(
            checks.Error(
                "MCP_RESOURCES['CURSOR_KEYS'] must be a list of secrets of at least 16 bytes each (str or bytes).",
                hint="`python manage.py mcp_cursor_key` prints a fresh key.",
                id="mcp_resources.E029",
                obj="MCP_RESOURCES",
            )
        )
    page_size = configured.get("PAGE_SIZE", DEFAULTS["PAGE_SIZE"])
    if not isinstance(page_size, int) or isinstance(page_size, bool) or not 1 <= page_size <= 100:
        messages.append(
            checks.Error(
                "MCP_RESOURCES['PAGE_SIZE'] must be an integer from 1 to 100.",
                id="mcp_resources.E012",
                obj="MCP_RESOURCES",
            )
        )
    messages.extend(_check_limits(configured))
    return messages


POSITIVE_INTEGER_SETTINGS = (
    "MAX_REQUEST_BYTES",
    "MAX_RESPONSE_BYTES",
    "CURSOR_TTL_SECONDS",
    "SESSION_TIMEOUT_SECONDS",
    "STREAMS_PER_CALLER",
    "URIS_PER_LISTEN",
)
"""Sizes, counts and lifetimes that must be integers of at least 1 (E035)."""

POSITIVE_NUMBER_SETTINGS = (
    "LIST_DEADLINE_SECONDS",
    "STREAM_SEND_TIMEOUT_SECONDS",
    "STREAM_KEEPALIVE_SECONDS",
    "DELIVERY_RETENTION_SECONDS",
)
"""Durations that must be numbers above 0 (E035)."""


def _check_limits(configured: dict[str, Any]) -> list[checks.CheckMessage]:
    """E035: a limit that is not a number, or one that would admit nothing (``DELIVERY_RETENTION_SECONDS`` 0 keeps
    nothing to resume from; ``MAX_REQUEST_BYTES`` 0 refuses every request)."""
    hint = "docs/settings.md gives each setting's unit."
    messages: list[checks.CheckMessage] = []
    for key in (*POSITIVE_INTEGER_SETTINGS, *POSITIVE_NUMBER_SETTINGS, "PUBLIC_CACHE_TTL_MS"):
        value = configured.get(key, DEFAULTS[key])
        integer = key not in POSITIVE_NUMBER_SETTINGS
        usable = not isinstance(value, bool) and isinstance(value, int if integer else int | float)
        if key in POSITIVE_INTEGER_SETTINGS:
            usable, wanted = usable and value >= 1, "an integer of at least 1"
        elif key in POSITIVE_NUMBER_SETTINGS:
            usable, wanted = usable and value > 0, "a number of seconds above 0"
        else:
            wanted = "an integer"
        if not usable:
            messages.append(_setting_error(f"MCP_RESOURCES[{key!r}] must be {wanted}, not {value!r}.", "E035", hint))
    return messages


def _cursor_key_ok(key: object) -> bool:
    if isinstance(key, str):
        key = key.encode()
    return isinstance(key, bytes) and len(key) >= 16


def _setting_error(message: str, id: str, hint: str | None = None) -> checks.CheckMessage:
    return checks.Error(message, hint=hint, obj="MCP_RESOURCES", id=f"mcp_resources.{id}")


def _absolute_http_url(value: object) -> bool:
    from urllib.parse import urlsplit

    if not isinstance(value, str):
        return False
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for an invalid port
    except ValueError:
        return False
    return (
        parts.scheme in ("http", "https")
        and bool(parts.hostname)
        and not parts.fragment
        and "#" not in value
        and parts.username is None
        and parts.password is None
    )


def check_auth_settings() -> list[checks.CheckMessage]:
    """The resource-server settings: resource URI, scope hierarchy, servers, token cache."""
    messages: list[checks.CheckMessage] = []
    configured = getattr(settings, "MCP_RESOURCES", None) or {}

    resource_uri = configured.get("RESOURCE_URI", DEFAULTS["RESOURCE_URI"])
    if resource_uri not in (None, "") and not _absolute_http_url(resource_uri):
        messages.append(
            _setting_error(
                f"MCP_RESOURCES['RESOURCE_URI'] is {resource_uri!r}, not an absolute http(s) URI.",
                "E015",
                "Give the endpoint's public URL, e.g. 'https://mcp.example.com/mcp' (no fragment, no userinfo).",
            )
        )

    hierarchy = configured.get("SCOPE_HIERARCHY", DEFAULTS["SCOPE_HIERARCHY"])
    if not isinstance(hierarchy, dict) or not all(
        isinstance(broad, str)
        and isinstance(narrower, list | tuple)
        and all(isinstance(scope, str) and scope and " " not in scope for scope in narrower)
        for broad, narrower in hierarchy.items()
    ):
        messages.append(
            _setting_error(
                "MCP_RESOURCES['SCOPE_HIERARCHY'] must map scope names to lists of the scopes they imply.",
                "E016",
                "For example {'documents': ['documents:read', 'documents:write']}.",
            )
        )

    servers = configured.get("AUTHORIZATION_SERVERS", DEFAULTS["AUTHORIZATION_SERVERS"])
    if not isinstance(servers, list | tuple) or not all(_absolute_http_url(url) for url in servers):
        messages.append(
            _setting_error(
                "MCP_RESOURCES['AUTHORIZATION_SERVERS'] must be a list of issuer URLs.",
                "E017",
                "For example ['https://auth.example.com']; leave it empty to name this project's own server.",
            )
        )

    value = configured.get("TOKEN_CACHE_TTL_SECONDS", DEFAULTS["TOKEN_CACHE_TTL_SECONDS"])
    if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
        messages.append(_setting_error("MCP_RESOURCES['TOKEN_CACHE_TTL_SECONDS'] must be a number >= 0.", "E018"))
    messages.extend(_check_token_cache_size())

    if configured.get("ACCEPT_TOKENS_WITHOUT_RESOURCE"):
        messages.append(
            checks.Warning(
                "MCP_RESOURCES['ACCEPT_TOKENS_WITHOUT_RESOURCE'] is on: tokens issued for no particular resource "
                "are accepted, which the MCP authorization spec forbids.",
                hint="Have clients send the RFC 8707 resource parameter and turn the setting off.",
                obj="MCP_RESOURCES",
                id="mcp_resources.W003",
            )
        )
    messages.extend(_check_authorization_server(configured))
    return messages


def _check_token_cache_size() -> list[checks.CheckMessage]:
    """E018 too: the authentication class's ``token_cache_size`` (a class attribute a subclass sets) must be an
    integer >= 0, or a cached validation would fail in the request that makes it."""
    from mcp_resources.conf import mcp_settings

    try:
        authentication_class = mcp_settings.authentication_class
    except ImportError:
        return []  # reported as E011
    if not isinstance(authentication_class, type) or not hasattr(authentication_class, "token_cache_size"):
        return []
    size = authentication_class.token_cache_size
    if isinstance(size, int) and not isinstance(size, bool) and size >= 0:
        return []
    name = f"{authentication_class.__module__}.{authentication_class.__qualname__}"
    return [_setting_error(f"{name}.token_cache_size must be an integer >= 0, not {size!r}.", "E018")]


def _check_authorization_server(configured: dict[str, Any]) -> list[checks.CheckMessage]:
    from mcp_resources.auth.authentication import OAuth2Authentication, local_authorization_server_configured
    from mcp_resources.conf import mcp_settings

    if configured.get("AUTHORIZATION_SERVERS"):
        return []
    try:
        authentication_class = mcp_settings.authentication_class
    except ImportError:
        return []  # reported as E011
    if not (isinstance(authentication_class, type) and issubclass(authentication_class, OAuth2Authentication)):
        return []
    if local_authorization_server_configured():
        return []
    return [
        checks.Warning(
            "The protected resource metadata names no authorization server, so MCP clients cannot discover "
            "where to get a token.",
            hint="Set MCP_RESOURCES['AUTHORIZATION_SERVERS'], or mount django-oauth-toolkit's "
            "metadata_urlpatterns (RFC 8414) at the root of your URLconf.",
            obj="MCP_RESOURCES",
            id="mcp_resources.W004",
        )
    ]
