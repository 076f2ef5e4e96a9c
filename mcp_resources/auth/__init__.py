"""Authentication: who is calling, as an OAuth 2.1 resource server on django-oauth-toolkit.

``MCP_RESOURCES["AUTHENTICATION_CLASS"]`` names the class; :class:`OAuth2Authentication` is the default and
:class:`NoAuthentication` serves public resources only. The only part of the app that imports ``oauth2_provider``.
"""

from __future__ import annotations

from mcp_resources.auth.authentication import (
    BaseAuthentication,
    NoAuthentication,
    OAuth2Authentication,
    bearer_token,
    expand_scopes,
)

__all__ = ["BaseAuthentication", "NoAuthentication", "OAuth2Authentication", "bearer_token", "expand_scopes"]
