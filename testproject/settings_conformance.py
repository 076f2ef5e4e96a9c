"""The conformance profile: unauthenticated, no per-user inventories, only the conformance fixtures."""

from __future__ import annotations

from testproject.settings import *  # noqa: F403
from testproject.settings import INSTALLED_APPS, MCP_RESOURCES

INSTALLED_APPS = [app for app in INSTALLED_APPS if app != "testproject.library"]
ROOT_URLCONF = "testproject.conformance.urls"  # /mcp served by the profile's server (testproject/conformance/)

MCP_RESOURCES = {
    **MCP_RESOURCES,
    "SERVER_INFO": {"name": "django-mcp-resources conformance"},
    "AUTHENTICATION_CLASS": "mcp_resources.auth.NoAuthentication",
}
