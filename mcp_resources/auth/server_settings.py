"""The ``OAUTH2_PROVIDER`` block that makes a project's django-oauth-toolkit an authorization server MCP clients can
use knowing only the MCP URL (docs/oauth.md, "Your own authorization server").

Import-safe in ``settings.py`` (no Django setting or model is touched)::

    from mcp_resources.auth.server_settings import authorization_server_settings

    OAUTH2_PROVIDER = authorization_server_settings({"tickets:read": "Read the tickets of your projects"})

Every value is a documented django-oauth-toolkit setting; override any of them with a dict merge
(``{**authorization_server_settings(...), "ACCESS_TOKEN_EXPIRE_SECONDS": 600}``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from django.core.exceptions import ImproperlyConfigured

_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*$")

OPEN_REGISTRATION = ("oauth2_provider.dcr.AllowAllDCRPermission",)
"""Who may register a client (RFC 7591): anyone, as MCP clients register before they have any credential."""


def authorization_server_settings(
    scopes: Mapping[str, str],
    *,
    default_scopes: Iterable[str] | None = None,
    dynamic_client_registration: bool = True,
    client_id_metadata_documents: bool = True,
    access_token_expire_seconds: int = 3600,
    refresh_token_expire_seconds: int = 30 * 24 * 3600,
    private_use_schemes: Iterable[str] = (),
) -> dict[str, Any]:
    """A fresh ``OAUTH2_PROVIDER`` dict for an MCP authorization server.

    - ``scopes``: every scope clients may ask for, with the description the consent page shows. It must include
      every ``required_scopes`` entry of the registered templates (system check ``mcp_resources.E032``).
    - ``default_scopes``: what a client gets when it asks for none (django-oauth-toolkit's default: all).
    - ``dynamic_client_registration``: open RFC 7591 registration at ``<prefix>register/`` (``DCR_ENABLED`` with
      ``AllowAllDCRPermission``), how most MCP clients register today.
    - ``client_id_metadata_documents``: clients whose ``client_id`` is an ``https`` URL are resolved by fetching
      that document (``CIMD_ENABLED``, django-oauth-toolkit's SSRF-hardened fetcher), the MCP specification's
      preferred way. Its redirect URIs, grants and response types follow the same rules as a registration.
    - ``private_use_schemes``: RFC 8252 private-use URI schemes (``"cursor"``, ``"com.example.app"``) a desktop client
      may register as redirect URIs, added to ``ALLOWED_REDIRECT_URI_SCHEMES``. MCP's rule allows only ``https`` and
      loopback ``http``: naming a scheme here is a deviation from it that the project chooses (docs/oauth.md).

    Only the authorization code grant (with refresh tokens) is served; PKCE is required and S256 is its only
    method; the authorization response carries the RFC 9207 ``iss``; tokens are stored hashed; access tokens in
    query strings are refused; a replayed refresh token revokes its family, and a replayed authorization code revokes
    the tokens issued from it (``mcp_resources.auth.validators``). The RFC 8707 ``resource`` of the
    authorization and token requests is stored on each grant and token by django-oauth-toolkit itself.
    """
    if not isinstance(scopes, Mapping) or not scopes:
        raise ImproperlyConfigured("authorization_server_settings() needs a mapping of scope names to descriptions.")
    for name, description in scopes.items():
        if not isinstance(name, str) or not name or any(char.isspace() or char == '"' for char in name):
            raise ImproperlyConfigured(f"Scope name {name!r} must be a non-empty string without spaces or quotes.")
        if not isinstance(description, str):
            raise ImproperlyConfigured(f"The description of scope {name!r} must be a string.")
    schemes = [str(scheme).lower() for scheme in private_use_schemes]
    for scheme in schemes:
        if not _SCHEME.match(scheme) or scheme in ("http", "https"):
            raise ImproperlyConfigured(f"{scheme!r} is not a private-use URI scheme (RFC 8252 section 7.1).")
    block: dict[str, Any] = {
        "SCOPES": dict(scopes),
        # The authorization code grant and refresh tokens only: no implicit, password or client-credentials grant.
        "OAUTH2_SERVER_CLASS": "oauthlib.oauth2.WebApplicationServer",
        "OAUTH2_GRANT_TYPES_SUPPORTED": ["authorization_code", "refresh_token"],
        "OAUTH2_RESPONSE_TYPES_SUPPORTED": ["code"],
        # MCP clients are mostly public clients ("none"); confidential ones authenticate the usual ways.
        "OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED": ["none", "client_secret_basic", "client_secret_post"],
        # PKCE required, S256 only (RFC 9700); RFC 9207 iss; hashed tokens; no tokens in query strings.
        "PKCE_REQUIRED": True,
        "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
        "COMPLIANT_BCP_RFC9700_PKCE_REQUIRED": True,
        "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
        "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
        "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
        "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,
        "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,
        "REFRESH_TOKEN_REUSE_PROTECTION": True,
        # django-oauth-toolkit's validator, and a replayed authorization code revokes the tokens issued from it.
        "OAUTH2_VALIDATOR_CLASS": "mcp_resources.auth.validators.OAuth2Validator",
        "COMPLIANT_BCP_RFC9700_REFRESH_TOKEN": True,
        "ACCESS_TOKEN_EXPIRE_SECONDS": access_token_expire_seconds,
        "REFRESH_TOKEN_EXPIRE_SECONDS": refresh_token_expire_seconds,
        # Native MCP clients receive the redirect on an ephemeral port of "localhost" as well as of 127.0.0.1/::1
        # (RFC 8252 section 7.3): the registered port is not compared for these hosts.
        "ALLOW_LOCALHOST_LOOPBACK": True,
        # Redirect URIs: https, loopback http, and the private-use schemes the project names (the registration rules
        # of mcp_resources.auth.registration apply on top: no plain http elsewhere, no userinfo, no fragment).
        "ALLOWED_REDIRECT_URI_SCHEMES": ["http", "https", *schemes],
        # How MCP clients register: RFC 7591 (open) and client ID metadata documents.
        "DCR_ENABLED": dynamic_client_registration,
        "DCR_REGISTRATION_PERMISSION_CLASSES": OPEN_REGISTRATION,
        "CIMD_ENABLED": client_id_metadata_documents,
        "CIMD_METADATA_FETCHER": "mcp_resources.auth.registration.MetadataFetcher",
    }
    if default_scopes is not None:
        defaults = list(default_scopes)
        unknown = sorted(set(defaults) - set(scopes))
        if unknown:
            raise ImproperlyConfigured(f"default_scopes {unknown} are not among the scopes.")
        block["DEFAULT_SCOPES"] = defaults
    return block
