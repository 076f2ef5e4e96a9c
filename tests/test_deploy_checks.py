"""The deployment checks of ``manage.py check --deploy`` (one test per id): W010 cursor keys, W011 the 2025-11-25
session cache, W012 the subscriptions' channel layer."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core import checks
from django.core.cache.backends.locmem import LocMemCache
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from mcp_resources.checks import check_deployment

KEYED = {"CURSOR_KEYS": ["a shared secret of at least 16 bytes"]}
REDIS_CACHE = {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": "redis://127.0.0.1:6379/0"}
REDIS_LAYER = {
    "BACKEND": "channels_redis.core.RedisChannelLayer",
    "CONFIG": {"hosts": [{"address": "redis://127.0.0.1:6379/0", "max_connections": 1000}]},  # not W005
}
SHARED = {"CACHES": {"default": REDIS_CACHE}, "CHANNEL_LAYERS": {"default": REDIS_LAYER}}


class LocalCache(LocMemCache):
    """A project's own subclass of the local-memory cache."""


def deploy_ids() -> list[str]:
    """The ids the app's checks report under ``check --deploy``."""
    return sorted(message.id for message in checks.run_checks(tags=["mcp_resources"], include_deployment_checks=True))


def configure(settings: Any, mcp: dict[str, Any] | None = None, **django: Any) -> None:
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, **(mcp or {})}
    for name, value in {**SHARED, **django}.items():
        setattr(settings, name, value)


def test_a_shared_deployment_passes(settings: Any) -> None:
    configure(settings, KEYED)
    assert check_deployment() == []
    assert deploy_ids() == []


def test_w010_cursor_keys_unset(settings: Any) -> None:
    configure(settings, {"CURSOR_KEYS": []})
    [message] = check_deployment()
    assert message.id == "mcp_resources.W010"
    assert message.level == checks.WARNING
    assert "each process seals pagination cursors with a random key" in message.msg
    assert "mcp_cursor_key" in (message.hint or "")
    assert deploy_ids() == ["mcp_resources.W010"]
    # Only a deployment check: `manage.py check` and runserver say nothing.
    assert checks.run_checks(tags=["mcp_resources"]) == []


@pytest.mark.parametrize(
    ("backend", "warned"),
    [
        ("django.core.cache.backends.locmem.LocMemCache", True),
        ("django.core.cache.backends.dummy.DummyCache", True),
        ("tests.test_deploy_checks.LocalCache", True),  # a subclass is per process too
        ("django.core.cache.backends.db.DatabaseCache", False),
        ("django.core.cache.backends.redis.RedisCache", False),
        ("django.core.cache.backends.filebased.FileBasedCache", False),
    ],
)
def test_w011_sessions_in_a_per_process_cache(settings: Any, backend: str, warned: bool) -> None:
    caches = {"default": REDIS_CACHE, "mcp": {"BACKEND": backend, "LOCATION": "x"}}
    configure(settings, {**KEYED, "SESSION_CACHE": "mcp"}, CACHES=caches)
    messages = check_deployment()
    assert [message.id for message in messages] == (["mcp_resources.W011"] if warned else [])
    if warned:
        assert "'mcp'" in messages[0].msg
        assert "404 Session not found" in messages[0].msg
        assert deploy_ids() == ["mcp_resources.W011"]
        assert checks.run_checks(tags=["mcp_resources"]) == []


def test_w011_follows_the_session_cache_alias(settings: Any) -> None:
    # The default alias's local cache does not matter when the sessions live elsewhere.
    caches = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}, "shared": REDIS_CACHE}
    configure(settings, {**KEYED, "SESSION_CACHE": "shared"}, CACHES=caches)
    assert check_deployment() == []
    configure(settings, {**KEYED, "SESSION_CACHE": "default"}, CACHES=caches)
    assert [message.id for message in check_deployment()] == ["mcp_resources.W011"]


@pytest.mark.parametrize(
    ("layers", "subscriptions", "warned"),
    [
        (None, True, True),  # no CHANNEL_LAYERS: the app's process-local fallback
        ({"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}, True, True),
        ({"default": REDIS_LAYER}, True, False),
        ({"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}, "mcp": REDIS_LAYER}, True, "default"),
        (None, False, False),  # subscriptions off: no layer is used
    ],
)
def test_w012_subscriptions_on_the_in_memory_layer(
    settings: Any, layers: dict[str, Any] | None, subscriptions: bool, warned: bool | str
) -> None:
    configure(settings, {**KEYED, "SUBSCRIPTIONS": subscriptions}, CHANNEL_LAYERS=layers)
    assert [message.id for message in check_deployment()] == (["mcp_resources.W012"] if warned else [])
    if warned == "default":
        # The alias the subscriptions use decides.
        configure(settings, {**KEYED, "CHANNEL_LAYER": "mcp"}, CHANNEL_LAYERS=layers)
        assert check_deployment() == []
    if warned:
        assert checks.run_checks(tags=["mcp_resources"]) == []


def test_check_deploy_command_reports_all_three(settings: Any) -> None:
    # The demo's settings, as `manage.py check --deploy` sees them: the warnings print, and fail with
    # --fail-level WARNING (how a deployment pipeline makes them blocking).
    configure(
        settings,
        {"CURSOR_KEYS": []},
        CACHES={"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}},
        CHANNEL_LAYERS=None,
    )
    err = StringIO()
    call_command("check", "--deploy", "--tag", "mcp_resources", stdout=StringIO(), stderr=err)
    for id in ("W010", "W011", "W012"):
        assert f"mcp_resources.{id}" in err.getvalue()
    with pytest.raises(SystemCheckError, match=r"mcp_resources\.W010"):
        call_command("check", "--deploy", "--tag", "mcp_resources", "--fail-level", "WARNING", stdout=StringIO())
