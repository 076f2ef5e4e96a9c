"""OAuth Protected Resource Metadata (RFC 9728) and the canonical resource URI (RFC 8707).

The MCP endpoint has one canonical resource URI: ``MCP_RESOURCES["RESOURCE_URI"]``, or, when that is unset, the
URL the request was made to. Tokens must carry it as their audience, and the metadata document names it as
``resource``. The document is served at the path-inserted well-known URL of that URI
(``/.well-known/oauth-protected-resource/mcp`` for ``/mcp``) and at the root one; mount both with
:func:`mcp_resources.urls.well_known_urlpatterns` (the view is :mod:`mcp_resources.transport.metadata`).

This module does not import ``oauth2_provider``: the authorization servers come from the authentication class.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from django.http import HttpRequest

from mcp_resources.conf import mcp_settings
from mcp_resources.models import StaticResource
from mcp_resources.registries import registry as default_registry

if TYPE_CHECKING:
    from mcp_resources.registries import ResourceRegistry

WELL_KNOWN_PATH = "/.well-known/oauth-protected-resource"

# Never advertised (MCP authorization: servers SHOULD NOT put offline_access in scopes_supported or a challenge).
UNADVERTISED_SCOPES = frozenset({"offline_access"})

_DEFAULT_PORTS = {"http": 80, "https": 443}


@lru_cache(maxsize=256)
def normalize_resource_uri(uri: str) -> str:
    """The comparable form of a resource URI: lowercase scheme and host, no default port, no fragment, no
    trailing slash. Returns ``""`` for anything that is not an absolute URI with a host (never matches)."""
    if not isinstance(uri, str):
        return ""
    try:
        parts = urlsplit(uri.strip())
        port = parts.port
    except ValueError:
        return ""
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if not scheme or not host or parts.username is not None or parts.password is not None:
        return ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port is None or port == _DEFAULT_PORTS.get(scheme) else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path.rstrip("/"), parts.query, ""))


def canonical_resource_uri(request: HttpRequest, endpoint_path: str | None = None) -> str:
    """This server's resource URI, normalised: ``RESOURCE_URI`` if set, else derived from the request.

    ``endpoint_path`` is the MCP endpoint's path when the request is not made to the endpoint itself (the
    metadata views); by default the request's own path is used.
    """
    configured = mcp_settings.resource_uri
    if configured:
        return normalize_resource_uri(configured)
    path = request.path if endpoint_path is None else "/" + endpoint_path.strip("/")
    return normalize_resource_uri(request.build_absolute_uri(path))


def resource_metadata_url(resource_uri: str) -> str:
    """The RFC 9728 well-known URL for ``resource_uri`` (path-inserted when the URI has a path)."""
    parts = urlsplit(resource_uri)
    path = parts.path.rstrip("/")
    return urlunsplit((parts.scheme, parts.netloc, WELL_KNOWN_PATH + path, "", ""))


def scopes_supported(registry: ResourceRegistry | None = None) -> list[str]:
    """The minimal scope set: every scope a registered template or static resource requires, sorted.

    ``offline_access`` is never advertised. Admin ``StaticResource`` rows count when they are enabled.
    """
    registry = registry or default_registry
    found: set[str] = set()
    for template in registry.templates:
        found.update(template.scopes)
    for resource in registry.iter_resources():
        found.update(resource.scopes)
    rows = StaticResource.objects.filter(enabled=True).exclude(required_scopes="")
    for value in rows.values_list("required_scopes", flat=True):
        found.update(value.split())
    return sorted(found - UNADVERTISED_SCOPES)


def challenge_scopes(scopes: Iterable[str]) -> tuple[str, ...]:
    """Scopes as they may appear in a ``WWW-Authenticate`` challenge (never ``offline_access``)."""
    return tuple(scope for scope in dict.fromkeys(scopes) if scope not in UNADVERTISED_SCOPES)


def protected_resource_metadata(
    request: HttpRequest, endpoint_path: str, registry: ResourceRegistry | None = None
) -> dict[str, Any] | None:
    """The RFC 9728 document for the endpoint at ``endpoint_path``; ``None`` when no authorization server
    protects it (the authentication class names none, e.g. ``NoAuthentication``)."""
    authenticator = mcp_settings.authentication_class()
    servers = list(authenticator.authorization_servers(request))
    if not servers:
        return None
    return {
        "resource": canonical_resource_uri(request, endpoint_path),
        "authorization_servers": servers,
        "scopes_supported": scopes_supported(registry),
        "bearer_methods_supported": ["header"],
        "resource_name": mcp_settings.server_info.get("title") or mcp_settings.server_info["name"],
    }
