"""Shared fixtures: users, access tokens, live servers. ``MCP_TEST_DB=postgres`` runs the suite on PostgreSQL
(required when ``CI`` is set)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import pytest

from tests import live
from tests.wire_support import binding  # noqa: F401 (a fixture for every test module)

RESOURCE = "http://127.0.0.1:8000/mcp"
"""The demo's ``RESOURCE_URI`` in tests: tokens bound to it are accepted by requests to ``testserver``."""


def urlconf(*patterns: Any) -> ModuleType:
    """A root URLconf module made of ``patterns`` (``settings.ROOT_URLCONF`` also takes a module)."""
    module = ModuleType("tests.urlconf")
    module.urlpatterns = list(patterns)  # type: ignore[attr-defined]
    return module


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("MCP_TEST_DB") != "postgres":
        return
    import psycopg

    try:
        psycopg.connect("host=127.0.0.1 port=5432 dbname=test user=postgres connect_timeout=3").close()
    except psycopg.OperationalError as exc:
        if os.environ.get("CI"):
            raise pytest.UsageError(f"CI requires PostgreSQL on 127.0.0.1:5432: {exc}") from exc
        config._mcp_skip_reason = f"PostgreSQL is not reachable on 127.0.0.1:5432 ({exc})"  # type: ignore[attr-defined]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = getattr(config, "_mcp_skip_reason", None)
    if reason:
        for item in items:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture
def anyio_backend() -> str:
    """``@pytest.mark.anyio`` tests run on asyncio."""
    return "asyncio"


@pytest.fixture(autouse=True)
def _registration_throttle_reset() -> None:
    """Each test starts with the test client's address (127.0.0.1) owing no client registrations: the demo's
    registration throttle counts in the process's default cache, which would carry counts across tests."""
    import time

    from django.core.cache import caches

    from mcp_resources.auth.registration import DEFAULT_REGISTRATION_RATE, parse_rate, throttle_key

    period = parse_rate(DEFAULT_REGISTRATION_RATE)[1]  # type: ignore[index]
    now = time.time()
    caches["default"].delete_many([throttle_key("127.0.0.1", period, at) for at in (now - period, now)])


@pytest.fixture(autouse=True)
def _sessions_reset() -> Iterator[None]:
    """Each test starts with no 2025-11-25 session in the process's per-process session stores: a person holds a
    bounded number of sessions (replaced only once a minute old), and the suite opens many for alice in a burst."""
    yield
    from mcp_resources.transport.sessions import _private_caches

    for store in _private_caches.values():
        store.clear()


# Users and tokens ------------------------------------------------------------------------------------------


@pytest.fixture(scope="session", autouse=True)
def _fast_password_hashing() -> Iterator[None]:
    """A cheap password hasher for every user the tests create (Django's default takes about a second a user)."""
    from django.test.utils import override_settings

    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        yield


@pytest.fixture
def alice(db: None) -> Any:
    """A user ``alice`` (password ``alice``)."""
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user("alice", password="alice")


@pytest.fixture
def bob(db: None) -> Any:
    """A user ``bob`` (password ``bob``)."""
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user("bob", password="bob")


@pytest.fixture
def make_token(db: None) -> Callable[..., str]:
    """``make_token(user, scope="documents:read", *, resource=RESOURCE, expires_in=3600)``: a django-oauth-toolkit
    access token bound (RFC 8707) to ``resource``, what ``manage.py mcp_token`` issues."""
    from mcp_resources.auth.tokens import issue_access_token

    def make(user: Any, scope: str = "documents:read", *, resource: str = RESOURCE, expires_in: float = 3600) -> str:
        return issue_access_token(user, scope, [resource], expires_in, "tests")  # type: ignore[arg-type]

    return make


# Live servers ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo_project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[live.Project]:
    """The demo project with its demo data (``load_demo_data``), in a fresh database of this module's own.

    A module that needs another setup (a Redis database, other demo data, a superuser) defines its own
    ``demo_project`` with :func:`tests.live.project`; ``demo_server`` then serves that one."""
    with live.project(tmp_path_factory.mktemp("project")) as project:
        yield project


@pytest.fixture(scope="module")
def demo_server(demo_project: live.Project) -> Iterator[live.Server]:
    """The demo project under uvicorn (``testproject.asgi``: Channels' routers, ``MCPEndpoint``, Django's ASGI
    handler), as ``make demo`` serves it; the app logs at INFO (``demo_server.logged()``)."""
    server = live.Server(demo_project, name="uvicorn", env={"MCP_LOG_LEVEL": "INFO"}).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def gevent_server(demo_project: live.Project) -> Iterator[live.Server]:
    """``demo_project`` under gunicorn's gevent worker (``testproject.wsgi``; Django's pool on PostgreSQL), the WSGI
    deployment docs/deployment.md advises, on the same database (and Redis, if any) as ``demo_server``; the app logs
    at INFO."""
    server = live.Server(demo_project, name="gevent", kind="gevent", env={"MCP_LOG_LEVEL": "INFO"}).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    """A Redis database of this module's own (``live.redis_database()``), empty before and after."""
    with live.redis_database() as url:
        yield url


# Several workers -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workers_project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[live.Project]:
    """The demo with an inventory of 2,000+ records (:data:`tests.live.INVENTORY`), Redis-shared sessions and
    notifications, and responses that name their worker (:func:`tests.live.workers_project`)."""
    with live.workers_project(tmp_path_factory.mktemp("workers")) as project:
        yield project


CURSOR_KEY = "a-cursor-key-every-worker-of-the-test-deployment-shares"


@pytest.fixture(scope="module")
def two_workers(workers_project: live.Project) -> Iterator[Callable[..., live.Server]]:
    """``two_workers(kind, keyed=True)``: ``workers_project`` served by two worker processes of gunicorn
    (``"gunicorn"``: ``testproject.wsgi``, gthread; ``"gevent"``: its gevent worker) or uvicorn (``"uvicorn"``:
    ``testproject.asgi``, ``--workers 2``).
    ``keyed``: both workers share one ``CURSOR_KEYS`` secret; otherwise each seals with its own random key (the
    default). Each server starts on first use, once per module, and is returned when both workers answer; any
    client (the Python SDK, the TypeScript SDK) can walk it. ``server.tokens("alice")`` gives bearer tokens."""
    servers: dict[tuple[str, bool], live.Server] = {}

    def start(kind: str, keyed: bool = True) -> live.Server:
        if (kind, keyed) not in servers:
            env = {"MCP_CURSOR_KEYS": CURSOR_KEY} if keyed else {}
            name = f"{kind}-2-workers-{'keyed' if keyed else 'unkeyed'}"
            server = live.Server(workers_project, name=name, kind=kind, workers=2, env=env).start()
            servers[(kind, keyed)] = server
            live.wait_for_workers(server)
        return servers[(kind, keyed)]

    try:
        yield start
    finally:
        for server in servers.values():
            server.stop()


@pytest.fixture
def listening_settings(settings: Any) -> None:
    """The settings of the stream suites: the test resource, keep-alives out of the way, streams per caller raised."""
    settings.MCP_RESOURCES = {
        **settings.MCP_RESOURCES,
        "RESOURCE_URI": RESOURCE,
        "STREAM_KEEPALIVE_SECONDS": 30,
        "STREAMS_PER_CALLER": 1000,
    }


@pytest.fixture
def no_stream_left_behind() -> Iterator[None]:
    """Fail a test that leaves a stream open in this process."""
    from mcp_resources.transport import streams

    yield
    assert dict(streams._open_streams) == {}
