"""The URL patterns of the project's own authorization server, for the root URLconf::

    from mcp_resources.auth.server_urls import authorization_server_urlpatterns
    from mcp_resources.urls import well_known_urlpatterns

    urlpatterns = [
        path("mcp", include("mcp_resources.urls")),
        *well_known_urlpatterns("mcp"),
        *authorization_server_urlpatterns(),
    ]

They mount, in django-oauth-toolkit's ``oauth2_provider`` namespace (its views reverse their names there):

- ``/.well-known/oauth-authorization-server`` (RFC 8414, at the root where MCP clients look for it: the issuer is
  the origin);
- ``<prefix>authorize/`` (sign-in, then :class:`~mcp_resources.auth.server_views.ConsentView`), ``<prefix>token/``,
  ``<prefix>revoke_token/``;
- ``<prefix>connected/`` (:class:`~mcp_resources.auth.server_views.ConnectedAppsView`: the AI clients a signed-in
  person authorized, and taking one back);
- ``<prefix>register/`` (RFC 7591 dynamic client registration, served when ``DCR_ENABLED``, under MCP's redirect
  rules and a throttle per client address: :mod:`mcp_resources.auth.registration`) and its RFC 7592 management
  route.

Not mounted: django-oauth-toolkit's protected resource metadata view (the endpoint's own is
:func:`mcp_resources.urls.well_known_urlpatterns`), its application management pages, OIDC, introspection and the
device flow. Add any of them from ``oauth2_provider.urls`` under the same namespace if the project needs them.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.urls import NoReverseMatch, Resolver404, URLPattern, URLResolver, include, path, resolve, reverse

from mcp_resources.auth.registration import (
    DEFAULT_REGISTRATION_RATE,
    ClientConfigurationView,
    ClientRegistrationView,
    parse_rate,
)
from mcp_resources.auth.server_views import ConnectedAppsView, ConsentView

NAMESPACE = "oauth2_provider"
METADATA_PATH = "/.well-known/oauth-authorization-server"
OIDC_DISCOVERY_PATH = "/.well-known/openid-configuration"


def authorization_server_urlpatterns(
    prefix: str = "o/",
    *,
    registration_rate: str | None = DEFAULT_REGISTRATION_RATE,
    registration_cache: str = "default",
) -> list[URLPattern | URLResolver]:
    """The authorization server's routes: RFC 8414 metadata at the root, its endpoints under ``prefix``.

    ``registration_rate`` (``"20/hour"``; ``None``: no throttle) bounds the client registrations one client address
    may attempt per period, counted in the Django cache ``registration_cache``.
    """
    from oauth2_provider import urls as dot_urls
    from oauth2_provider import views as dot_views

    parse_rate(registration_rate)  # a malformed rate or an unknown cache fails here, at startup
    if registration_rate is not None and registration_cache not in getattr(settings, "CACHES", {"default": {}}):
        raise ImproperlyConfigured(f"registration_cache {registration_cache!r} is not an alias of CACHES.")

    prefix = prefix.strip("/")
    prefix = f"{prefix}/" if prefix else ""
    # The issuer is the origin: only the root document (not the path-inserted form, which would describe an issuer
    # of any path asked for).
    metadata = [p for p in dot_urls.metadata_urlpatterns if p.name == "oauth-server-metadata"]
    endpoints: list[URLPattern | URLResolver] = [
        path("authorize/", ConsentView.as_view(), name="authorize"),
        path("token/", dot_views.TokenView.as_view(), name="token"),
        path("revoke_token/", dot_views.RevokeTokenView.as_view(), name="revoke-token"),
        path(
            "register/",
            ClientRegistrationView.as_view(rate=registration_rate, cache_alias=registration_cache),
            name="dcr-register",
        ),
        path("register/<str:client_id>/", ClientConfigurationView.as_view(), name="dcr-register-management"),
        path("connected/", ConnectedAppsView.as_view(), name="connected-apps"),
    ]
    patterns: list[URLPattern | URLResolver] = [*metadata, path(prefix, include(endpoints))]
    return [path("", include((patterns, NAMESPACE)))]


# What the system checks ask (mcp_resources.checks, "The project's own authorization server") ---------------


def authorization_endpoint_mounted() -> bool:
    """Whether this project serves django-oauth-toolkit's authorization endpoint (it issues the tokens)."""
    try:
        reverse(f"{NAMESPACE}:authorize")
    except NoReverseMatch:
        return False
    return True


def local_issuer_path() -> str | None:
    """The path of the issuer django-oauth-toolkit names for this project when nothing is configured (what its
    ``oauth2_resource_authorization_servers`` derives from the mounted metadata route), or ``None``."""
    try:
        metadata = reverse(f"{NAMESPACE}:oauth-server-metadata")
    except NoReverseMatch:
        return None
    return metadata[: -len(METADATA_PATH)]


def configured_issuers() -> list[str]:
    """django-oauth-toolkit's own settings naming the authorization servers (absolute URLs), in its order."""
    from oauth2_provider.settings import oauth2_settings

    if oauth2_settings.OAUTH2_PROTECTED_RESOURCE_AUTHORIZATION_SERVERS:
        return [str(url) for url in oauth2_settings.OAUTH2_PROTECTED_RESOURCE_AUTHORIZATION_SERVERS]
    if oauth2_settings.OIDC_ISS_ENDPOINT:
        return [str(oauth2_settings.OIDC_ISS_ENDPOINT)]
    return []


def metadata_locations(issuer_path: str) -> list[str]:
    """Where MCP clients look for the metadata of an issuer with path ``issuer_path`` (RFC 8414 section 3.1, then
    OpenID Connect Discovery, in the MCP specification's order)."""
    issuer_path = issuer_path.rstrip("/")
    if not issuer_path:
        return [METADATA_PATH, OIDC_DISCOVERY_PATH]
    return [METADATA_PATH + issuer_path, OIDC_DISCOVERY_PATH + issuer_path, issuer_path + OIDC_DISCOVERY_PATH]


def serves_metadata(path_: str) -> bool:
    """Whether ``path_`` resolves, in the root URLconf, to django-oauth-toolkit's RFC 8414 view (or to its OpenID
    Connect discovery view when OIDC is on)."""
    from oauth2_provider import views as dot_views
    from oauth2_provider.settings import oauth2_settings

    view = resolved_view_class(path_)
    if view is None:
        return False
    if issubclass(view, dot_views.OAuthServerMetadataView):
        return True
    return bool(oauth2_settings.OIDC_ENABLED) and issubclass(view, dot_views.ConnectDiscoveryInfoView)


def resolved_view_class(path_: str) -> type | None:
    """The class-based view ``path_`` resolves to in the root URLconf (``None``: no route, or a function view)."""
    try:
        match = resolve(path_)
    except Resolver404:
        return None
    view: Any = getattr(match.func, "view_class", None)
    return view if isinstance(view, type) else None


def scopes_declared() -> set[str]:
    """Every scope django-oauth-toolkit's scopes backend knows (``SCOPES`` by default)."""
    from oauth2_provider.scopes import get_scopes_backend

    return set(get_scopes_backend().get_all_scopes())


def client_registration_open() -> bool:
    """Whether an MCP client that knows nothing but the metadata can register: client ID metadata documents, or
    dynamic client registration mounted and not limited to signed-in users (django-oauth-toolkit's default)."""
    from oauth2_provider.settings import oauth2_settings

    return bool(oauth2_settings.CIMD_ENABLED) or dynamic_registration_open()


def dynamic_registration_open() -> bool:
    """Whether anyone may register a client with RFC 7591: registration mounted, on, and not limited to signed-in
    users (django-oauth-toolkit's default permission)."""
    from oauth2_provider.settings import oauth2_settings

    if not oauth2_settings.DCR_ENABLED:
        return False
    try:
        reverse(f"{NAMESPACE}:dcr-register")
    except NoReverseMatch:
        return False
    permissions = [
        cls if isinstance(cls, str) else f"{cls.__module__}.{cls.__qualname__}"
        for cls in oauth2_settings.DCR_REGISTRATION_PERMISSION_CLASSES
    ]
    return permissions != ["oauth2_provider.dcr.IsAuthenticatedDCRPermission"]


def registration_rate() -> str | None:
    """The throttle of the mounted RFC 7591 registration view (``None``: none, or not this package's view)."""
    try:
        match = resolve(reverse(f"{NAMESPACE}:dcr-register"))
    except (NoReverseMatch, Resolver404):
        return None
    view: Any = getattr(match.func, "view_class", None)
    if not (isinstance(view, type) and issubclass(view, ClientRegistrationView)):
        return None
    initkwargs: dict[str, Any] = getattr(match.func, "view_initkwargs", {}) or {}
    rate = initkwargs.get("rate", view.rate)
    return None if rate is None else str(rate)
