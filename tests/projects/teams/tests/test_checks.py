"""The package's system checks, as installed, catch the traps a team fell into on its first day (issue 14): the
quickstart's former hint (django-oauth-toolkit's URLs and metadata patterns, its default settings) is refused with
the check ids docs/checks.md names, and the project as it is passes."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest
from django.core import checks

import urls_former_hint

DOT_DEFAULTS: dict[str, Any] = {}  # django-oauth-toolkit's own defaults: SCOPES read/write, no registration


def check_ids() -> set[str]:
    return {message.id for message in checks.run_checks(tags=["mcp_resources"]) if message.id}


def urlconf(patterns: list[Any]) -> ModuleType:
    module = ModuleType("urlconf")
    module.urlpatterns = patterns  # type: ignore[attr-defined]
    return module


def test_the_project_passes() -> None:
    assert check_ids() == set()


def test_the_former_hint_is_refused(settings: Any) -> None:
    settings.ROOT_URLCONF = "urls_former_hint"
    settings.OAUTH2_PROVIDER = DOT_DEFAULTS
    assert check_ids() == {
        "mcp_resources.E030",  # django-oauth-toolkit's protected-resource view answers instead of the endpoint's
        "mcp_resources.E032",  # projects:read and attachments:read are not among its SCOPES
        "mcp_resources.W031",  # registration is off
    }


@pytest.mark.parametrize("oauth2_provider", ["defaults", "shipped"])
def test_toolkit_urls_under_a_prefix_name_an_issuer_without_metadata(settings: Any, oauth2_provider: str) -> None:
    settings.ROOT_URLCONF = urlconf(urls_former_hint.prefixed_only)
    if oauth2_provider == "defaults":
        settings.OAUTH2_PROVIDER = DOT_DEFAULTS
    assert "mcp_resources.E031" in check_ids()  # the issuer is .../o: /.well-known/oauth-authorization-server/o
