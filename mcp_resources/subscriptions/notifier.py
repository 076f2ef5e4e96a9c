"""Model saves and deletes become ``notifications/resources/updated`` after the transaction commits.

Records behind registered model templates notify their own URI only. ``StaticResource`` rows (the admin) also
announce a list change, since they are part of every caller's listing. Records inside a caller's inventory never
announce list changes: those go to every listener and would leak one user's activity to others.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any

from django.db import router, transaction
from django.db.models import Model
from django.db.models.signals import post_delete, post_save

from mcp_resources.models import StaticResource
from mcp_resources.registries import ResourceRegistry
from mcp_resources.resources import ModelResourceTemplate
from mcp_resources.subscriptions.broker import notify_resource_list_changed, notify_resource_updated

logger = logging.getLogger("mcp_resources.subscriptions")


class ModelChangeNotifier:
    """Connects ``post_save``/``post_delete`` for the models behind a registry's templates."""

    def __init__(self, registry: ResourceRegistry) -> None:
        self.registry = registry
        self._index: dict[type[Model], list[ModelResourceTemplate]] | None = None

    def index(self) -> dict[type[Model], list[ModelResourceTemplate]]:
        if self._index is None:
            index: dict[type[Model], list[ModelResourceTemplate]] = defaultdict(list)
            for template in self.registry.templates:
                if isinstance(template, ModelResourceTemplate) and template.model is not None:
                    index[template.model._meta.concrete_model or template.model].append(template)
            self._index = dict(index)
        return self._index

    def connect(self) -> None:
        post_save.connect(self.changed, dispatch_uid=f"mcp_resources.saved.{id(self)}", weak=False)
        post_delete.connect(self.changed, dispatch_uid=f"mcp_resources.deleted.{id(self)}", weak=False)

    def changed(self, sender: type[Model], instance: Model, **kwargs: Any) -> None:
        if kwargs.get("raw"):
            return
        using = kwargs.get("using") or router.db_for_write(sender)
        if isinstance(instance, StaticResource):
            uri = instance.uri
            transaction.on_commit(lambda: _static_changed(uri), using=using)
            return
        templates = self.index().get(sender._meta.concrete_model or sender)
        if not templates:
            return
        for template in templates:
            try:
                uri = template.get_uri(instance)
            except Exception:
                logger.exception("could not compute the URI of a changed %s", sender._meta.label)
                continue
            transaction.on_commit(lambda uri=uri: notify_resource_updated(uri), using=using)  # type: ignore[misc]


def _static_changed(uri: str) -> None:
    # The list first: an open stream's decision of the update then knows the row (server/static_uris.py).
    notify_resource_list_changed()
    notify_resource_updated(uri)
