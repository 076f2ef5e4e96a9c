"""What the quickstart used to hint at: django-oauth-toolkit's own URLs under ``o/`` and its metadata patterns at the
root, next to the endpoint (the trap of issue 14; ``test_checks.py`` shows the checks refuse it)."""

from __future__ import annotations

from django.urls import include, path
from mcp_resources.urls import well_known_urlpatterns
from oauth2_provider import urls as oauth2_urls

urlpatterns = [
    path("accounts/", include("django.contrib.auth.urls")),
    path("mcp", include("mcp_resources.urls")),
    *oauth2_urls.metadata_urlpatterns,
    *well_known_urlpatterns("mcp"),
    path("o/", include("oauth2_provider.urls")),
]

prefixed_only = [
    path("accounts/", include("django.contrib.auth.urls")),
    path("mcp", include("mcp_resources.urls")),
    *well_known_urlpatterns("mcp"),
    path("o/", include("oauth2_provider.urls")),
]
