"""The deployment checks of ``manage.py check --deploy`` (one test per id): W010 cursor keys, W011 the 2025-11-25
session cache, W012 the subscriptions' log, W014 streams under Django's own ASGI handler, W032 an open client
registration without a throttle."""

from __future__ import annotations

import os
import subprocess
import sys
from io import StringIO
from typing import Any

import httpx2
import pytest
from django.core import checks
from django.core.cache.backends.locmem import LocMemCache
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from mcp_resources.checks import check_deployment
from tests import live
from tests.live import on_postgres

KEYED = {"CURSOR_KEYS": ["a shared secret of at least 16 bytes"]}
REDIS_CACHE = {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": "redis://127.0.0.1:6379/0"}
SHARED = {"CACHES": {"default": REDIS_CACHE}}
SHARED_LOG = {"DELIVERY_URL": "redis://127.0.0.1:6379/0"}


class LocalCache(LocMemCache):
    """A project's own subclass of the local-memory cache."""


def deploy_ids() -> list[str]:
    """The ids the app's checks report under ``check --deploy``."""
    return sorted(message.id for message in checks.run_checks(tags=["mcp_resources"], include_deployment_checks=True))


def configure(settings: Any, mcp: dict[str, Any] | None = None, **django: Any) -> None:
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, **SHARED_LOG, **(mcp or {})}
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
        assert "lands on another worker" in messages[0].msg
        if "Dummy" not in backend:
            assert "refusing initialize (429)" in messages[0].msg
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
    ("url", "subscriptions", "warned"),
    [
        (None, True, True),  # no DELIVERY_URL: the log of each process
        ("", True, True),
        ("redis://127.0.0.1:6379/0", True, False),
        (None, False, False),  # subscriptions off: no log is used
    ],
)
def test_w012_subscriptions_on_the_in_memory_log(
    settings: Any, url: str | None, subscriptions: bool, warned: bool
) -> None:
    configure(settings, {**KEYED, "SUBSCRIPTIONS": subscriptions, "DELIVERY_URL": url})
    assert [message.id for message in check_deployment()] == (["mcp_resources.W012"] if warned else [])
    if warned:
        assert checks.run_checks(tags=["mcp_resources"]) == []


application = None
"""Set by the W014 test: what ``ASGI_APPLICATION`` names."""


@pytest.mark.parametrize("kind", ["plain", "endpoint", "unset", "unimportable"])
def test_w014_streams_under_djangos_own_asgi_handler(settings: Any, kind: str, monkeypatch: Any) -> None:
    from django.core.asgi import get_asgi_application

    from mcp_resources.transport.asgi import MCPEndpoint

    app = {"plain": get_asgi_application, "endpoint": MCPEndpoint.as_asgi}.get(kind, lambda: None)()
    monkeypatch.setattr(sys.modules[__name__], "application", app)
    path = {"unset": None, "unimportable": "nowhere.asgi.application"}.get(kind, f"{__name__}.application")
    configure(settings, KEYED, ASGI_APPLICATION=path)
    messages = check_deployment()
    assert [message.id for message in messages] == (["mcp_resources.W014"] if kind == "plain" else [])
    if kind == "plain":
        assert "a thread of its own" in messages[0].msg
        assert "MCPEndpoint" in (messages[0].hint or "")
        configure(settings, {**KEYED, "SUBSCRIPTIONS": False}, ASGI_APPLICATION=path)
        assert check_deployment() == []  # no streams, no threads


def test_check_deploy_command_reports_all_three(settings: Any) -> None:
    # The demo's settings, as `manage.py check --deploy` sees them: the warnings print, and fail with
    # --fail-level WARNING (how a deployment pipeline makes them blocking).
    configure(
        settings,
        {"CURSOR_KEYS": []},
        CACHES={"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}},
    )
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "DELIVERY_URL": None}
    err = StringIO()
    call_command("check", "--deploy", "--tag", "mcp_resources", stdout=StringIO(), stderr=err)
    for id in ("W010", "W011", "W012"):
        assert f"mcp_resources.{id}" in err.getvalue()
    with pytest.raises(SystemCheckError, match=r"mcp_resources\.W010"):
        call_command("check", "--deploy", "--tag", "mcp_resources", "--fail-level", "WARNING", stdout=StringIO())


# W013: database connections under gevent. The check fires only in a process gevent has patched (a gunicorn gevent
# worker), and such a process runs no system checks: the app logs it as it starts. Each case runs in a process of
# its own, patched or not.

W013_SCRIPT = """
import os, sys
if sys.argv[1] == "patched":
    from gevent import monkey
    monkey.patch_all()
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "testproject.settings")
from django.conf import settings
settings.SILENCED_SYSTEM_CHECKS = sys.argv[2:]
import django
django.setup()
from django.core import checks
print(*(m.id for m in checks.run_checks(tags=["mcp_resources"]) if m.id == "mcp_resources.W013"))
"""


def run_w013(patched: bool, *silenced: str, **env: str) -> tuple[str, str]:
    """The W013 ids ``check`` reports, and what the app logged as it started, in a fresh process."""
    done = subprocess.run(
        [sys.executable, "-c", W013_SCRIPT, "patched" if patched else "plain", *silenced],
        cwd=live.ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip(), done.stderr


@pytest.mark.parametrize("max_age", ["60", "none"])
def test_w013_persistent_connections_under_gevent(max_age: str) -> None:
    reported, logged = run_w013(True, MCP_TEST_CONN_MAX_AGE=max_age, MCP_TEST_DB_POOL="0")
    assert reported == "mcp_resources.W013"
    shown = "60" if max_age == "60" else "None"
    assert f"(mcp_resources.W013) DATABASES['default'] keeps its connections open (CONN_MAX_AGE {shown})" in logged
    assert "Django's connection pool" in logged  # the hint
    assert logged.count("mcp_resources.W013") == 1


def test_w013_is_silent_without_gevent_or_with_connections_closed() -> None:
    assert run_w013(False, MCP_TEST_CONN_MAX_AGE="60") == ("", "")  # not patched: threads, not greenlets
    assert run_w013(True, MCP_TEST_CONN_MAX_AGE="0", MCP_TEST_DB_POOL="0") == ("", "")


def test_w013_is_silent_with_djangos_pool() -> None:
    if not on_postgres():
        pytest.skip("Django's connection pool is PostgreSQL's")
    assert run_w013(True, MCP_TEST_CONN_MAX_AGE="0", MCP_TEST_DB_POOL="1") == ("", "")


def test_w013_silenced_is_not_logged() -> None:
    reported, logged = run_w013(True, "mcp_resources.W013", MCP_TEST_CONN_MAX_AGE="60", MCP_TEST_DB_POOL="0")
    assert reported == "mcp_resources.W013"  # run_checks reports it; `manage.py check` and the start skip it
    assert "W013" not in logged


def test_w013_is_logged_by_a_gunicorn_gevent_worker(demo_project: live.Project) -> None:
    """A real gevent worker that keeps connections open says so in its log as it loads the project; one as
    docs/deployment.md configures it (connections closed, or Django's pool on PostgreSQL) says nothing."""
    advised = live.Server(demo_project, name="gevent-advised", kind="gevent").start()
    try:
        healthy = httpx2.get(advised.base + "/.well-known/oauth-protected-resource/mcp", timeout=10)
        assert healthy.status_code == 200
    finally:
        advised.stop()
    assert "W013" not in advised.logged()
    if on_postgres():
        return  # live.Server gives a gevent worker on PostgreSQL the pool, as the docs advise
    persistent = live.Server(demo_project, name="gevent-persistent", kind="gevent", env={"MCP_TEST_CONN_MAX_AGE": "60"})
    persistent.start()
    try:
        assert httpx2.get(persistent.base + "/.well-known/oauth-protected-resource/mcp", timeout=10).status_code == 200
    finally:
        persistent.stop()
    assert persistent.logged().count("(mcp_resources.W013) DATABASES['default'] keeps its connections open") == 1


# W032: an open client registration without a throttle ---------------------------------------------------------


def _authorization_server(settings: Any, **urls: Any) -> None:
    from django.urls import include, path

    from mcp_resources.auth.server_urls import authorization_server_urlpatterns
    from mcp_resources.urls import well_known_urlpatterns
    from tests.conftest import urlconf

    settings.ROOT_URLCONF = urlconf(
        path("mcp", include("mcp_resources.urls")),
        *well_known_urlpatterns("mcp"),
        *authorization_server_urlpatterns(**urls),
    )


def test_w032_open_registration_without_a_throttle(settings: Any) -> None:
    configure(settings, KEYED)
    _authorization_server(settings, registration_rate=None)
    [message] = check_deployment()
    assert message.id == "mcp_resources.W032"
    assert "anyone register an OAuth client" in message.msg
    assert "registration_rate" in (message.hint or "")
    assert deploy_ids() == ["mcp_resources.W032"]
    assert "mcp_resources.W032" not in [m.id for m in checks.run_checks(tags=["mcp_resources"])]


def test_w032_is_silent_with_a_throttle_or_a_closed_registration(settings: Any) -> None:
    from oauth2_provider import urls as dot_urls

    configure(settings, KEYED)
    _authorization_server(settings)  # the default rate, 20 an hour
    assert check_deployment() == []
    _authorization_server(settings, registration_rate=None)
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "DCR_ENABLED": False}
    assert check_deployment() == []
    settings.OAUTH2_PROVIDER = {
        **settings.OAUTH2_PROVIDER,
        "DCR_ENABLED": True,
        "DCR_REGISTRATION_PERMISSION_CLASSES": ("oauth2_provider.dcr.IsAuthenticatedDCRPermission",),
    }
    assert check_deployment() == []
    # django-oauth-toolkit's own registration view (no throttle) mounted instead of the package's: warned.
    from django.urls import include, path

    from tests.conftest import urlconf

    settings.OAUTH2_PROVIDER = {
        **settings.OAUTH2_PROVIDER,
        "DCR_REGISTRATION_PERMISSION_CLASSES": ("oauth2_provider.dcr.AllowAllDCRPermission",),
    }
    settings.ROOT_URLCONF = urlconf(
        path("mcp", include("mcp_resources.urls")),
        path("", include((dot_urls.urlpatterns, "oauth2_provider"))),
    )
    assert "mcp_resources.W032" in [message.id for message in check_deployment()]
