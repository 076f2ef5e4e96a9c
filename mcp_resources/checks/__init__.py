"""System checks: refuse at startup what would otherwise fail at request time.

Each check is a pure function of a registry (and settings); ids are listed in ``docs/checks.md``. This module
registers them with Django (tag ``mcp_resources``); the modules beside it hold them by subject.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core import checks

from mcp_resources.checks.authorization_server import (
    check_authorization_server_metadata,
    check_authorization_server_scopes,
    check_client_registration,
    check_resource_metadata_routes,
    mcp_endpoint_paths,
)
from mcp_resources.checks.configuration import check_auth_settings, check_settings
from mcp_resources.checks.deployment import check_channel_layer, check_database_connections, check_deployment
from mcp_resources.checks.fastpaths import check_fast_paths
from mcp_resources.checks.templates import check_metadata_fields, check_model_template, check_templates
from mcp_resources.registries import registry

logger = logging.getLogger("mcp_resources.checks")

__all__ = [
    "check_auth_settings",
    "check_authorization_server_metadata",
    "check_authorization_server_scopes",
    "check_channel_layer",
    "check_client_registration",
    "check_database_connections",
    "check_deployment",
    "check_fast_paths",
    "check_metadata_fields",
    "check_model_template",
    "check_resource_metadata_routes",
    "check_settings",
    "check_templates",
    "log_startup_warnings",
    "mcp_endpoint_paths",
]


@checks.register("mcp_resources")
def mcp_resources_check(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    return check_templates(registry) + check_settings()


@checks.register("mcp_resources")
def mcp_resources_fast_paths_check(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    return check_fast_paths(registry)


@checks.register("mcp_resources")
def mcp_resources_auth_check(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    return check_auth_settings()


@checks.register("mcp_resources")
def mcp_resources_channel_layer_check(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    return check_channel_layer()


@checks.register("mcp_resources")
def mcp_resources_database_connections_check(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    return check_database_connections()


# Registered with deploy=True: ``manage.py check --deploy`` runs it, development servers never warn.
@checks.register("mcp_resources", deploy=True)
def mcp_resources_deployment_check(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    return check_deployment()


@checks.register("mcp_resources")
def mcp_resources_authorization_server_check(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    return (
        check_resource_metadata_routes()
        + check_authorization_server_metadata()
        + check_authorization_server_scopes(registry)
        + check_client_registration()
    )


def log_startup_warnings() -> None:
    """Log what a server's process would otherwise never hear: servers run no system checks.

    Called once as the app starts; today only W013 (database connections under gevent), which can fire only in a
    process that gevent has patched. A check silenced in ``SILENCED_SYSTEM_CHECKS`` stays silent.
    """
    silenced = set(getattr(settings, "SILENCED_SYSTEM_CHECKS", ()))
    for message in check_database_connections():
        if message.id not in silenced:
            logger.warning("%s", message)
