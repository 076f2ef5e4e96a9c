"""The demo project with its own token models (``tests.swapped_token``): revoked access tokens stay in the table,
stamped, and the access token model's default manager leaves them out, as django-oauth-toolkit allows."""

from __future__ import annotations

from testproject.settings import *  # noqa: F403
from testproject.settings import INSTALLED_APPS as DEMO_INSTALLED_APPS

INSTALLED_APPS = [*DEMO_INSTALLED_APPS, "tests.swapped_token"]
OAUTH2_PROVIDER_APPLICATION_MODEL = "oauth2_provider.Application"
OAUTH2_PROVIDER_ACCESS_TOKEN_MODEL = "swapped_token.SoftRevokedAccessToken"
OAUTH2_PROVIDER_REFRESH_TOKEN_MODEL = "swapped_token.RefreshToken"
OAUTH2_PROVIDER_ID_TOKEN_MODEL = "swapped_token.IDToken"
