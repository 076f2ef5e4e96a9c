"""Change notifications: publishing (:func:`notify_resource_updated`, :func:`notify_resource_list_changed`),
live resources, model signals and the streams that deliver them (``subscriptions/listen`` and the legacy GET
stream). Fan-out goes through a channel layer: in-memory by default, Redis for several processes."""

from __future__ import annotations

from mcp_resources.subscriptions.broker import notify_resource_list_changed, notify_resource_updated

__all__ = ["notify_resource_list_changed", "notify_resource_updated"]
