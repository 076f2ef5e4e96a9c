"""Change notifications: publishing (:func:`notify_resource_updated`, :func:`notify_resource_list_changed`),
live resources and model saves. Fan-out goes through a channel layer: in-memory by default, Redis for several
processes. The streams that deliver notifications are transport (:mod:`mcp_resources.transport.streams`)."""

from __future__ import annotations

from mcp_resources.subscriptions.broker import notify_resource_list_changed, notify_resource_updated

__all__ = ["notify_resource_list_changed", "notify_resource_updated"]
