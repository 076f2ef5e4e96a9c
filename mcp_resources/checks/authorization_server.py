"""The checks of the project's own authorization server and of discovery (E030-E032, W030, W031)."""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from django.core import checks

from mcp_resources.registries import ResourceRegistry

# The project's own authorization server and discovery (docs/oauth.md, "Your own authorization server") ----------
#
# What an MCP client that knows only the endpoint's URL needs: the endpoint's protected resource metadata at its
# well-known URL (E030, W030), an RFC 8414 document for every authorization server it names (E031), and, when this
# project issues the tokens, every scope the templates require (E032) and a way to register (W031). Only for the
# OAuth2Authentication class (or a subclass): the others publish no metadata.


def _oauth2_authentication() -> bool:
    """Whether the endpoint publishes OAuth metadata (the authentication class is ``OAuth2Authentication``) and
    there is a root URLconf to inspect."""
    from mcp_resources.auth.authentication import OAuth2Authentication
    from mcp_resources.conf import mcp_settings

    if not getattr(settings, "ROOT_URLCONF", None):
        return False

    try:
        authentication_class = mcp_settings.authentication_class
    except ImportError:
        return False  # reported as E011
    return isinstance(authentication_class, type) and issubclass(authentication_class, OAuth2Authentication)


def _static_route(pattern: Any) -> str | None:
    """The literal path a URL pattern matches (``None`` when it captures, or is not a plain route)."""
    from django.urls.resolvers import RegexPattern, RoutePattern

    if isinstance(pattern, RoutePattern):
        route = str(pattern)  # the route as written
        return None if "<" in route else route
    if isinstance(pattern, RegexPattern):
        regex = str(pattern).removeprefix("^").removesuffix(r"\Z").removesuffix("$")
        if any(char in re.sub(r"\\[./-]", "", regex) for char in "\\.*+?()[]{}|^$"):
            return None
        return re.sub(r"\\([./-])", r"\1", regex)
    return None


def mcp_endpoint_paths() -> list[str]:
    """The paths (without the leading slash) at which the root URLconf serves an ``MCPView``, literal ones only."""
    from django.urls import URLResolver, get_resolver

    from mcp_resources.transport.views import MCPView

    found: list[str] = []

    def walk(patterns: Any, prefix: str) -> None:
        for entry in patterns:
            route = _static_route(entry.pattern)
            if route is None:
                continue
            if isinstance(entry, URLResolver):
                walk(entry.url_patterns, prefix + route)
                continue
            view = getattr(entry.callback, "view_class", None)
            if isinstance(view, type) and issubclass(view, MCPView):
                found.append(prefix + route)

    walk(get_resolver().url_patterns, "")
    return list(dict.fromkeys(found))


def _view_name(view: type | None) -> str:
    return "a function view" if view is None else f"{view.__module__}.{view.__qualname__}"


def check_resource_metadata_routes() -> list[checks.CheckMessage]:
    """E030 (the endpoint's protected resource metadata is served by another view), W030 (it is not mounted)."""
    from django.urls import Resolver404, resolve

    from mcp_resources.auth.metadata import WELL_KNOWN_PATH
    from mcp_resources.transport.metadata import ProtectedResourceMetadataView

    if not _oauth2_authentication():
        return []
    messages: list[checks.CheckMessage] = []
    for endpoint in mcp_endpoint_paths():
        path_inserted = f"{WELL_KNOWN_PATH}/{endpoint.strip('/')}".rstrip("/")
        for url in dict.fromkeys([path_inserted, WELL_KNOWN_PATH]):
            try:
                match = resolve(url)
            except Resolver404:
                if url == path_inserted:
                    messages.append(
                        checks.Warning(
                            f"The MCP endpoint /{endpoint} advertises its protected resource metadata at {url} in "
                            "every 401 challenge, but nothing is mounted there: OAuth clients cannot discover its "
                            "authorization server.",
                            hint=f'Add *well_known_urlpatterns("{endpoint}") (from mcp_resources.urls) to the root '
                            "URLconf.",
                            obj="ROOT_URLCONF",
                            id="mcp_resources.W030",
                        )
                    )
                continue
            view = getattr(match.func, "view_class", None)
            if isinstance(view, type) and issubclass(view, ProtectedResourceMetadataView):
                continue
            messages.append(
                checks.Error(
                    f"{url}, the protected resource metadata of the MCP endpoint /{endpoint}, is served by "
                    f"{_view_name(view if isinstance(view, type) else None)}, which shadows the endpoint's own: "
                    "clients are told scopes and authorization servers that are not the endpoint's.",
                    hint="Put *well_known_urlpatterns(...) before the patterns that also match it (django-oauth-"
                    "toolkit's metadata_urlpatterns or include('oauth2_provider.urls') at the root), or mount "
                    "mcp_resources.auth.server_urls.authorization_server_urlpatterns() instead of them.",
                    obj="ROOT_URLCONF",
                    id="mcp_resources.E030",
                )
            )
    return messages


def _origin(url: object) -> str | None:
    from urllib.parse import urlsplit

    from mcp_resources.auth.metadata import normalize_resource_uri

    normal = normalize_resource_uri(url) if isinstance(url, str) else ""
    if not normal:
        return None
    parts = urlsplit(normal)
    return f"{parts.scheme}://{parts.netloc}"


def _local_authorization_servers() -> list[tuple[str, str]]:
    """The authorization servers the metadata names that this project serves: ``(as named, issuer path)``.

    Configured URLs (``AUTHORIZATION_SERVERS``, else django-oauth-toolkit's own settings) count when their origin is
    ``RESOURCE_URI``'s; without any, django-oauth-toolkit derives the issuer from its mounted metadata route.
    """
    from urllib.parse import urlsplit

    from mcp_resources.auth import server_urls

    configured = (getattr(settings, "MCP_RESOURCES", None) or {}).get("AUTHORIZATION_SERVERS") or []
    if not isinstance(configured, list | tuple) or not all(isinstance(url, str) for url in configured):
        return []  # reported as E017
    configured = list(configured) or server_urls.configured_issuers()
    if configured:
        ours = _origin((getattr(settings, "MCP_RESOURCES", None) or {}).get("RESOURCE_URI"))
        return [(url, urlsplit(url).path) for url in configured if ours is not None and _origin(url) == ours]
    issuer_path = server_urls.local_issuer_path()
    return [] if issuer_path is None else [(f"this project's issuer ({issuer_path or '/'})", issuer_path)]


def check_authorization_server_metadata() -> list[checks.CheckMessage]:
    """E031: an authorization server served by this project has no RFC 8414 document where clients look."""
    from mcp_resources.auth import server_urls

    if not _oauth2_authentication():
        return []
    messages: list[checks.CheckMessage] = []
    for named, issuer_path in _local_authorization_servers():
        locations = server_urls.metadata_locations(issuer_path)
        if any(server_urls.serves_metadata(location) for location in locations):
            continue
        messages.append(
            checks.Error(
                f"The protected resource metadata names the authorization server {named}, but this project serves "
                f"no authorization server metadata for it at {locations[0]} (nor at {', '.join(locations[1:])}): "
                "MCP clients fall back to guessed endpoints and fail (POST /register answers 404).",
                hint="Mount mcp_resources.auth.server_urls.authorization_server_urlpatterns() at the root of the "
                "URLconf (its RFC 8414 document is at /.well-known/oauth-authorization-server), rather than "
                "include('oauth2_provider.urls') under a prefix.",
                obj="ROOT_URLCONF",
                id="mcp_resources.E031",
            )
        )
    return messages


def _issues_the_tokens() -> bool:
    """Whether this project's django-oauth-toolkit is the MCP endpoint's authorization server."""
    from mcp_resources.auth import server_urls

    if not _oauth2_authentication() or not server_urls.authorization_endpoint_mounted():
        return False
    configured = (getattr(settings, "MCP_RESOURCES", None) or {}).get("AUTHORIZATION_SERVERS") or []
    return not configured or bool(_local_authorization_servers())


def check_authorization_server_scopes(registry: ResourceRegistry) -> list[checks.CheckMessage]:
    """E032: a template (or code-registered static resource) requires a scope the authorization server does not know."""
    from mcp_resources.auth import server_urls

    if not _issues_the_tokens():
        return []
    known = server_urls.scopes_declared()
    messages: list[checks.CheckMessage] = []
    declared: list[tuple[str, Any, tuple[str, ...]]] = [
        (type(template).__name__, type(template), template.scopes) for template in registry.templates
    ]
    declared += [(f"Static resource {resource.uri}", None, resource.scopes) for resource in registry.iter_resources()]
    for label, obj, scopes in declared:
        missing = [scope for scope in scopes if scope not in known]
        if missing:
            messages.append(
                checks.Error(
                    f"{label} requires {', '.join(map(repr, missing))}, which django-oauth-toolkit's scopes "
                    "(OAUTH2_PROVIDER['SCOPES']) do not declare: the authorization server refuses to grant it "
                    "(invalid_scope) and no client can read the resource.",
                    hint="Add it, with the description the consent page shows, to the scopes given to "
                    "authorization_server_settings() (or to OAUTH2_PROVIDER['SCOPES']).",
                    obj=obj or "MCP_RESOURCES",
                    id="mcp_resources.E032",
                )
            )
    return messages


def check_client_registration() -> list[checks.CheckMessage]:
    """W031: this project issues the tokens but an MCP client has no way to register itself."""
    from mcp_resources.auth import server_urls

    if not _issues_the_tokens() or server_urls.client_registration_open():
        return []
    return [
        checks.Warning(
            "This project's authorization server offers MCP clients no way to register themselves: client ID "
            "metadata documents are off (CIMD_ENABLED) and dynamic client registration is off (DCR_ENABLED), not "
            "mounted, or limited to signed-in users (DOT's default DCR_REGISTRATION_PERMISSION_CLASSES).",
            hint="Use authorization_server_settings() for OAUTH2_PROVIDER (both are on), or pre-register every "
            "client and silence this warning.",
            obj="OAUTH2_PROVIDER",
            id="mcp_resources.W031",
        )
    ]
