"""The app's signal receivers, connected once when the app is ready (:meth:`MCPResourcesConfig.ready`).

- Model saves and deletes behind registered templates, and admin edits of static resources, become change
  notifications (:class:`~mcp_resources.subscriptions.notifier.ModelChangeNotifier`).
- A static resource registered or removed from code starts or stops its live subscription and tells listeners
  that the list changed (:data:`~mcp_resources.signals.resource_registered`, ``resource_unregistered``).
- A cached access token is evicted as soon as this process changes or deletes it, its user or its application
  (:mod:`mcp_resources.auth.tokencache`); the change is published as a change of each token concerned, so the
  streams opened with those tokens, in every process, authenticate again (a revoked token, a deactivated or deleted
  user, end them). Deleting a user or an application deletes its tokens, each with its own signal.
- A person who takes back an OAuth client's access (:data:`~mcp_resources.signals.client_revoked`) loses the
  2025-11-25 sessions they opened through it, and their GET streams end.
- A changed setting (``override_settings`` in tests) empties the token cache and forgets what was derived from it:
  the compiled listing queries and the token's loading query.
"""

from __future__ import annotations

import logging
from typing import Any

from django.apps import apps
from django.core.signals import setting_changed
from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from mcp_resources.auth import loading
from mcp_resources.auth.authentication import subject_of
from mcp_resources.auth.tokencache import token_cache
from mcp_resources.auth.tokens import application_model, live_token_checksums, token_and_user_models
from mcp_resources.listing import compiled
from mcp_resources.registries import ResourceRegistry, registry
from mcp_resources.resources import RegisteredResource
from mcp_resources.signals import client_revoked, resource_registered, resource_unregistered
from mcp_resources.subscriptions.broker import (
    notify_resource_list_changed,
    notify_resource_updated,
    publish_token_changed,
)
from mcp_resources.subscriptions.live import LiveSubscription
from mcp_resources.subscriptions.notifier import ModelChangeNotifier
from mcp_resources.transport.sessions import default_store

logger = logging.getLogger("mcp_resources.auth")


def connect() -> None:
    """Connect the receivers that need the app registry (model signals); called from ``ready()``."""
    ModelChangeNotifier(registry).connect()
    for resource in registry.iter_resources():
        if resource.live is None:  # registered before the app was ready
            _start_live(resource)
    if apps.is_installed("oauth2_provider"):
        token_model, user_model = token_and_user_models()
        post_save.connect(_evict_token, sender=token_model, dispatch_uid="mcp_resources.evict_saved_token")
        post_delete.connect(_evict_token, sender=token_model, dispatch_uid="mcp_resources.evict_deleted_token")
        post_save.connect(_user_saved, sender=user_model, dispatch_uid="mcp_resources.evict_saved_user")
        post_delete.connect(_evict_user, sender=user_model, dispatch_uid="mcp_resources.evict_deleted_user")
        post_save.connect(
            _application_saved, sender=application_model(), dispatch_uid="mcp_resources.application_saved"
        )


def _start_live(resource: RegisteredResource) -> None:
    live = LiveSubscription(resource, notify_resource_updated)
    resource.live = live
    live.start()


def _stop_live(resource: RegisteredResource) -> None:
    if resource.live is not None:
        resource.live.stop()


@receiver(resource_registered, dispatch_uid="mcp_resources.resource_registered")
def resource_was_registered(
    sender: Any,
    registry: ResourceRegistry,
    resource: RegisteredResource,
    previous: RegisteredResource | None,
    **kwargs: Any,
) -> None:
    if previous is not None:
        _stop_live(previous)  # the previous teardown runs first; the new baseline starts afresh
    _start_live(resource)
    _list_changed()


@receiver(resource_unregistered, dispatch_uid="mcp_resources.resource_unregistered")
def resource_was_unregistered(
    sender: Any, registry: ResourceRegistry, resource: RegisteredResource, **kwargs: Any
) -> None:
    _stop_live(resource)
    _list_changed()


def _list_changed() -> None:
    # Registrations while the process starts (autodiscovery, ready()) change no one's list: every process of the
    # project registers the same resources. Announcing them would send a list change to every listener whenever a
    # worker or a ``manage.py`` command starts.
    if apps.ready:
        notify_resource_list_changed()


def _evict_token(sender: Any, instance: Any, **kwargs: Any) -> None:
    checksum = getattr(instance, "token_checksum", None)
    if checksum:
        token_cache.discard(str(checksum))
        # The streams opened with it check it again, in every process, once the change is committed: a revoked
        # token (revocation endpoint, admin, connected-apps page) ends them at once.
        transaction.on_commit(lambda: publish_token_changed(str(checksum)), using=kwargs.get("using"))


def _evict_user(sender: Any, instance: Any, **kwargs: Any) -> None:
    token_cache.discard_user(instance.pk)


def _user_saved(sender: Any, instance: Any, created: bool = False, raw: bool = False, **kwargs: Any) -> None:
    """A user saved (deactivated, a new password, any field the authentication may look at): its tokens changed."""
    token_cache.discard_user(instance.pk)
    if created or raw or set(kwargs.get("update_fields") or ()) == {"last_login"}:
        return  # a new user has no tokens; a sign-in (Django's ``update_last_login``) changes nothing they rely on
    _tokens_changed(kwargs.get("using"), user=instance)


def _application_saved(sender: Any, instance: Any, created: bool = False, raw: bool = False, **kwargs: Any) -> None:
    """An application saved (a swapped model's ``is_usable()`` may refuse its tokens now): its tokens changed."""
    if not created and not raw:
        _tokens_changed(kwargs.get("using"), application=instance)


def _tokens_changed(using: str | None, **filters: Any) -> None:
    """Once the change is committed, publish a change of each unexpired token matching ``filters``: the streams opened
    with them authenticate again, in every process (evicted from this process's token cache too)."""

    def publish() -> None:
        try:
            checksums = live_token_checksums(**filters)
        except Exception:
            logger.exception("could not find the access tokens of a changed %s", ", ".join(filters))
            return
        for checksum in checksums:
            token_cache.discard(checksum)
            publish_token_changed(checksum)

    transaction.on_commit(publish, using=using)


@receiver(client_revoked, dispatch_uid="mcp_resources.client_revoked")
def client_was_revoked(sender: Any, user: Any, client_id: str, **kwargs: Any) -> None:
    subject = subject_of(user)
    if subject:
        default_store.end_client_sessions(subject, client_id)


@receiver(setting_changed, dispatch_uid="mcp_resources.setting_changed")
def setting_was_changed(sender: Any, setting: str, **kwargs: Any) -> None:
    if setting in ("MCP_RESOURCES", "OAUTH2_PROVIDER", "AUTH_USER_MODEL"):
        token_cache.clear()
    compiled.settings_changed(setting)
    loading.settings_changed(setting)
