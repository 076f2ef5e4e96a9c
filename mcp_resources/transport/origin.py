"""``Host`` and ``Origin`` validation against DNS rebinding.

``Host`` is checked through Django's ``ALLOWED_HOSTS`` even when no middleware asks for it. An ``Origin``, when
present, must be listed in ``MCP_RESOURCES["ALLOWED_ORIGINS"]`` (exact ``scheme://host[:port]`` values, or
``scheme://*.domain`` wildcards as ``CSRF_TRUSTED_ORIGINS`` uses), or be the request's own origin on a host
that ``ALLOWED_HOSTS`` names explicitly: the catch-all ``"*"`` never vouches for an Origin.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.http import HttpRequest
from django.utils.http import is_same_domain

from mcp_resources.conf import mcp_settings

_DEBUG_HOSTS = [".localhost", "127.0.0.1", "[::1]"]


def origin_allowed(request: HttpRequest, origin: str) -> bool:
    """True when the browser origin ``origin`` may call this endpoint."""
    try:
        parts = urlsplit(origin)
        parts.port  # noqa: B018 - raises ValueError for an invalid port
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path or parts.query:
        return False
    for allowed in mcp_settings.allowed_origins:
        if allowed == "*" or allowed == origin:
            return True
        allowed_parts = urlsplit(allowed)
        if (
            allowed_parts.scheme == parts.scheme
            and allowed_parts.netloc.startswith("*.")
            and is_same_domain(parts.netloc, allowed_parts.netloc[1:])
        ):
            return True
    explicit_hosts = [h for h in settings.ALLOWED_HOSTS if h != "*"]
    if settings.DEBUG and not settings.ALLOWED_HOSTS:
        explicit_hosts = _DEBUG_HOSTS
    host = parts.hostname
    if ":" in host:
        host = f"[{host}]"
    if not any(is_same_domain(host, pattern) for pattern in explicit_hosts):
        return False
    scheme = "https" if request.is_secure() else "http"
    return origin.lower() == f"{scheme}://{request.get_host()}".lower()
