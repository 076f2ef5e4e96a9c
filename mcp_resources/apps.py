"""App configuration: system checks, signal receivers and autodiscovery of each installed app's ``mcp_resources.py``."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class SimpleMCPResourcesConfig(AppConfig):
    """The app without autodiscovery (like ``SimpleAdminConfig``): register templates yourself."""

    name = "mcp_resources"
    verbose_name = _("MCP resources")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from mcp_resources import checks, receivers, telemetry  # importing checks registers the system checks
        from mcp_resources.registries import registry
        from mcp_resources.transport import fanout, streams

        registry.freeze()
        receivers.connect()
        checks.log_startup_warnings()
        telemetry.observe(open_streams=streams.open_stream_count, delivery_counts=fanout.delivery_counts)


class MCPResourcesConfig(SimpleMCPResourcesConfig):
    """The default app config: imports ``<app>.mcp_resources`` for every installed app, then freezes."""

    default = True

    def ready(self) -> None:
        from django.utils.module_loading import autodiscover_modules

        from mcp_resources import receivers  # noqa: F401 - receivers first: autodiscovered modules may register

        autodiscover_modules("mcp_resources")
        super().ready()
