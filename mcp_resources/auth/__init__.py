"""Authentication: who is calling, as an OAuth 2.1 resource server on django-oauth-toolkit; and what turns the
project's django-oauth-toolkit into the authorization server MCP clients find (docs/oauth.md).

``MCP_RESOURCES["AUTHENTICATION_CLASS"]`` names the class; :class:`OAuth2Authentication` is the default and
:class:`NoAuthentication` serves public resources only. The authorization-server side is
:mod:`mcp_resources.auth.server_settings` (the ``OAUTH2_PROVIDER`` block), :mod:`mcp_resources.auth.server_urls`
(its URL patterns) and :mod:`mcp_resources.auth.server_views` (the consent page). The only part of the app that
imports ``oauth2_provider``.

The names are resolved lazily, so ``settings.py`` can import :mod:`mcp_resources.auth.server_settings` before
Django is set up.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "BaseAuthentication": "mcp_resources.auth.authentication",
    "NoAuthentication": "mcp_resources.auth.authentication",
    "OAuth2Authentication": "mcp_resources.auth.authentication",
    "bearer_token": "mcp_resources.auth.authentication",
    "expand_scopes": "mcp_resources.auth.authentication",
}

__all__ = ["BaseAuthentication", "NoAuthentication", "OAuth2Authentication", "bearer_token", "expand_scopes"]

if TYPE_CHECKING:
    from mcp_resources.auth.authentication import (
        BaseAuthentication,
        NoAuthentication,
        OAuth2Authentication,
        bearer_token,
        expand_scopes,
    )


def __dir__() -> list[str]:
    # The lazy names too: dir(), autocompletion and the API reference's autodoc see every public name.
    return sorted({*globals(), *__all__})


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mcp_resources.auth' has no attribute {name!r}")
    return getattr(import_module(module), name)
