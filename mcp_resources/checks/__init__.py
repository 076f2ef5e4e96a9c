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
from mcp_resources.checks.deployment import check_database_connections, check_deployment
from mcp_resources.checks.fastpaths import check_fast_paths
from mcp_resources.checks.templates import check_metadata_fields, check_model_template, check_templates
from mcp_resources.registries import ResourceRegistry, add_freeze_check, registry

logger = logging.getLogger("mcp_resources.checks")

__all__ = [
    "check_auth_settings",
    "check_authorization_server_metadata",
    "check_authorization_server_scopes",
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
    "serving_errors",
]

SERVING_CHECKS = frozenset(
    f"mcp_resources.{id}"
    for id in (
        "E003",  # overlapping templates: a URI routes to the first, another's records are never read
        "E005",  # an unscoped model template: it would serve no rows, or (overridden carelessly) everyone's
        "E019",  # an owner path that does not lead to the user: every listing and read fails
        "E023",  # non-unique lookups: one URI listed twice in a page, and its read a generic error
        "E036",  # a public cache hint on a caller's records: a shared cache hands them to another caller
    )
)
"""The template checks that protect answers: enforced when a registry freezes (the default one at startup, any
other when a server first serves it), not only under ``manage.py check``. Silenced ids (``SILENCED_SYSTEM_CHECKS``)
are not enforced."""


def serving_errors(checked: ResourceRegistry) -> list[str]:
    """The errors of :data:`SERVING_CHECKS` for ``checked``, as ``"(id) message"`` lines (with the hint)."""
    silenced = set(getattr(settings, "SILENCED_SYSTEM_CHECKS", ()))
    return [
        f"({message.id}) {message.msg}" + (f" HINT: {message.hint}" if message.hint else "")
        for message in check_templates(checked)
        if message.id in SERVING_CHECKS and message.id not in silenced and message.is_serious()
    ]


add_freeze_check(serving_errors)


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
