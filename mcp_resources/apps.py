"""App configuration: system checks and autodiscovery of each installed app's ``mcp_resources.py``."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class SimpleMCPResourcesConfig(AppConfig):
    """The app without autodiscovery (like ``SimpleAdminConfig``): register templates yourself."""

    name = "mcp_resources"
    verbose_name = _("MCP resources")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from mcp_resources import checks  # noqa: F401 - registers the system checks
        from mcp_resources.registry import site
        from mcp_resources.subscriptions.broker import notify_resource_list_changed
        from mcp_resources.subscriptions.signals import ModelChangeNotifier

        site.freeze()
        ModelChangeNotifier(site).connect()
        site.add_listener(lambda event, uri: notify_resource_list_changed())


class MCPResourcesConfig(SimpleMCPResourcesConfig):
    """The default app config: imports ``<app>.mcp_resources`` for every installed app, then freezes."""

    default = True

    def ready(self) -> None:
        from django.utils.module_loading import autodiscover_modules

        autodiscover_modules("mcp_resources")
        super().ready()
