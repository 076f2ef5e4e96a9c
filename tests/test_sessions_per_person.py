"""Sessions capped per person (issue 27, failure 3): one user who registers nine OAuth clients and opens sessions
through each cannot push anyone else's idle session out, with the default cache (``LocMemCache``, ``MAX_ENTRIES``
300, which culls) and with Redis.

Through the real endpoint (``/public/mcp`` of tests/urls_sessions.py, the default session store) with Django's test
client: ``initialize`` with a token of each client, then ``ping`` on the other users' sessions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.core.cache import caches
from django.test import Client

from mcp_resources.auth.tokens import issue_access_token
from mcp_resources.transport.sessions import SessionStore, session_cache
from tests import live
from tests.conftest import RESOURCE
from tests.test_sessions import initialize, ping

pytestmark = pytest.mark.django_db

CLIENTS = 9
ATTEMPTS_PER_CLIENT = 32  # 288 initialize requests, as in the issue


@pytest.fixture(params=["locmem", "redis"])
def cache_kind(request: pytest.FixtureRequest, settings: Any) -> Iterator[str]:
    settings.ROOT_URLCONF = "tests.urls_sessions"
    if request.param == "redis":
        with live.redis_database() as url:
            settings.CACHES = {
                **settings.CACHES,
                "sessions": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url},
            }
            settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "SESSION_CACHE": "sessions"}
            yield "redis"
    else:
        settings.CACHES = {**settings.CACHES, "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
        settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "SESSION_CACHE": "default"}
        caches["default"].clear()
        session_cache().clear()
        yield "locmem"
        session_cache().clear()


def tokens_of(user: Any, clients: int) -> list[str]:
    """One token through each of ``clients`` OAuth clients the user registered and consented to."""
    return [
        issue_access_token(user, "documents:read", [RESOURCE], 3600, f"client {n} of {user}") for n in range(clients)
    ]


def test_one_person_with_nine_clients_evicts_no_one(
    cache_kind: str, alice: Any, bob: Any, make_token: Callable[..., str], django_user_model: Any
) -> None:
    http = Client()
    idle = {}
    for user in (alice, bob):
        token = make_token(user)
        idle[token] = initialize(http, token=token)["Mcp-Session-Id"]
    mallory = django_user_model.objects.create_user("mallory", password="mallory")
    statuses = [
        initialize(http, token=token).status_code
        for token in tokens_of(mallory, CLIENTS)
        for _ in range(ATTEMPTS_PER_CLIENT)
    ]
    cap = SessionStore().person_capacity(session_cache())
    assert cap == (10 if cache_kind == "locmem" else 32)  # a fifth of the culling cache's sixth; else 32
    # The cap counts mallory across her nine clients; the rest is refused, and nothing of anyone else's moves.
    assert statuses.count(200) == cap
    assert statuses.count(429) == CLIENTS * ATTEMPTS_PER_CLIENT - cap
    assert [ping(http, session, token=token) for token, session in idle.items()] == [200, 200]


def test_a_full_culling_cache_refuses_rather_than_evicts(
    cache_kind: str, alice: Any, make_token: Callable[..., str], django_user_model: Any
) -> None:
    """Everyone together at the store's bound on a culling backend: the next person is refused (429), every session
    held stays. On Redis (no bound but each person's), they all get theirs."""
    http = Client()
    alices_token = make_token(alice)
    alices = initialize(http, token=alices_token)["Mcp-Session-Id"]
    store = SessionStore()
    total = store.authenticated_capacity(session_cache())
    per_person = store.person_capacity(session_cache())
    opened: list[tuple[str, str]] = []
    refused = 0
    for n in range(8):
        person = django_user_model.objects.create_user(f"person{n}", password="x")
        [token] = tokens_of(person, 1)
        for _ in range(per_person):
            response = initialize(http, token=token)
            if response.status_code == 200:
                opened.append((token, response["Mcp-Session-Id"]))
            else:
                assert response.status_code == 429
                refused += 1
    if cache_kind == "locmem":
        assert total == 50
        assert len(opened) == total - 1  # alice holds the other one
        assert refused == 8 * per_person - (total - 1)
    else:
        assert total is None
        assert (len(opened), refused) == (8 * per_person, 0)
    assert ping(http, alices, token=alices_token) == 200
    assert {ping(http, session, token=token) for token, session in opened} == {200}


def test_other_entries_of_the_default_cache_cull_no_session(
    alice: Any, make_token: Callable[..., str], settings: Any
) -> None:
    """What other code writes to the default ``LocMemCache`` (the registration throttle, django-oauth-toolkit's
    client ID metadata backoff, the project's own entries: one per URL an outsider makes up) makes that cache cull;
    the sessions live in a store of their own and stay."""
    settings.ROOT_URLCONF = "tests.urls_sessions"
    session_cache().clear()
    http = Client()
    token = make_token(alice)
    session = initialize(http, token=token)["Mcp-Session-Id"]
    for n in range(3000):
        caches["default"].set(f"oauth2_provider:cimd:backoff:{n}", True, 60)
    assert ping(http, session, token=token) == 200
    session_cache().clear()
