"""An open stream's credentials (issue 28): authenticated once, then again only when the log says they changed.

A stream opened with a django-oauth-toolkit bearer token keeps the caller it authenticated and decides each update
with it (access to the URI is still asked of the server every time); every change that could make the token
refused (the token row saved or deleted, its user or its application saved, a user or an application deleted,
which deletes its tokens) travels on the delivery log as a change of the token, and the stream authenticates
again then. Credentials whose changes do not travel (a session cookie, a project's own authentication) are
authenticated again before every update, as before.

Through the project's ASGI application in-process (``tests.stream_support``), on the in-memory log.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.conf import settings as django_settings

from mcp_resources.auth import BaseAuthentication, OAuth2Authentication
from mcp_resources.auth.authentication import user_principal
from mcp_resources.exceptions import AuthenticationRequired
from mcp_resources.principal import Principal
from mcp_resources.subscriptions import notify_resource_list_changed, notify_resource_updated
from testproject.library.models import Document
from tests.stream_support import (
    ACKNOWLEDGED,
    Clock,
    Exchange,
    application,
    final_result,
    in_thread,
    list_changed,
    listen_body,
    listen_headers,
    scope,
    updated,
)

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("listening_settings", "no_stream_left_behind"),
]


def document(owner: Any) -> str:
    return f"learn://documents/{Document.objects.create(owner=owner, title='D', body='b').pk}"


async def listen(headers: dict[str, str], request_id: Any, notifications: dict[str, Any]) -> Exchange:
    """A listen stream read up to its acknowledgement."""
    stream = Exchange(application(), scope("POST", headers))
    await stream.start(listen_body(request_id, notifications))
    assert stream.status == 200, await stream.body()
    assert (await stream.event())["method"] == ACKNOWLEDGED
    return stream


async def listen_with(token: str, request_id: Any, notifications: dict[str, Any]) -> Exchange:
    return await listen(listen_headers(token), request_id, notifications)


def token_rows(user: Any) -> Any:
    from oauth2_provider.models import get_access_token_model

    return get_access_token_model().objects.filter(user=user)


# Authenticated once --------------------------------------------------------------------------------------------


async def test_updates_to_many_listeners_of_one_token_authenticate_no_one(
    alice: Any, make_token: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, every update authenticated the token again (a token lookup in the database, with the token cache
    off) before deciding access. Now the first decision authenticates the stream's caller and the later ones
    reuse it: 20 listeners of one token, 5 more updates, no authentication, every update delivered."""
    target = await in_thread(document, alice)
    token = await in_thread(make_token, alice)
    opened = [await listen_with(token, n, {"resourceSubscriptions": [target]}) for n in range(20)]
    await in_thread(notify_resource_updated, target)
    for n, stream in enumerate(opened):
        assert await stream.event() == updated(target, n)

    authenticated: list[str] = []
    real_authenticate = OAuth2Authentication.authenticate

    def counting(self: OAuth2Authentication, request: Any) -> Principal:
        authenticated.append(request.path)
        return real_authenticate(self, request)

    monkeypatch.setattr(OAuth2Authentication, "authenticate", counting)
    for _ in range(5):
        await in_thread(notify_resource_updated, target)
        for n, stream in enumerate(opened):
            assert await stream.event() == updated(target, n)
    assert authenticated == []
    for stream in opened:
        await stream.disconnect()


async def test_a_narrowed_scope_applies_to_the_next_update(alice: Any, make_token: Callable[..., str]) -> None:
    """The caller a stream keeps is the one its token authenticates now: a token whose scope is narrowed (the
    admin) is authenticated again when its change arrives, and the update published after it is withheld."""
    target = await in_thread(document, alice)
    token = await in_thread(make_token, alice)
    stream = await listen_with(token, "narrowed", {"resourceSubscriptions": [target], "resourcesListChanged": True})
    await in_thread(notify_resource_updated, target)
    assert await stream.event() == updated(target, "narrowed")

    def narrow() -> None:
        for row in token_rows(alice):
            row.scope = "notes:read"
            row.save()

    await in_thread(narrow)
    await in_thread(notify_resource_updated, target)
    await in_thread(notify_resource_list_changed)
    assert await stream.event() == list_changed("narrowed")  # the update before it was withheld
    await stream.disconnect()


async def test_a_token_whose_expiry_moves_earlier_ends_then(
    alice: Any, make_token: Callable[..., str], settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stream's end at the token's expiry follows the token's row: before, an expiry moved earlier (the admin)
    was seen only at an update after it."""
    from datetime import timedelta

    from django.utils import timezone

    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "STREAM_KEEPALIVE_SECONDS": 0.05}
    clock = Clock().install(monkeypatch)
    token = await in_thread(make_token, alice)
    stream = await listen_with(token, "sooner", {"resourcesListChanged": True})

    def expire_sooner() -> None:
        for row in token_rows(alice):
            row.expires = timezone.now() + timedelta(seconds=60)
            row.save()

    await in_thread(expire_sooner)
    await in_thread(notify_resource_list_changed)
    assert await stream.event() == list_changed("sooner")  # the token's change was applied before it
    clock.advance(61)
    assert await stream.until_closed(5) == [final_result("sooner")]
    await stream.finished()


# What ends a stream at once, without an update -----------------------------------------------------------------


async def test_deactivating_the_user_ends_the_stream_at_once(alice: Any, make_token: Callable[..., str]) -> None:
    """Before, a user made inactive was seen at the stream's next update; nothing else ended the stream. Now saving
    the user publishes a change of each of its tokens."""
    token = await in_thread(make_token, alice)
    stream = await listen_with(token, "inactive", {"resourcesListChanged": True})

    def deactivate() -> None:
        alice.is_active = False
        alice.save()

    await in_thread(deactivate)
    assert await stream.until_closed(5) == [final_result("inactive")]
    await stream.finished()


async def test_deactivating_the_user_ends_its_session_stream(alice: Any, make_token: Callable[..., str]) -> None:
    from tests.test_delivery import new_session, session_stream

    token = await in_thread(make_token, alice)
    session = await new_session(token, [])
    stream = await session_stream(token, session)

    def deactivate() -> None:
        alice.is_active = False
        alice.save(update_fields=["is_active"])

    await in_thread(deactivate)
    assert await stream.until_closed(5) == []  # a session's stream has no result to send: it just ends
    await stream.finished()


async def test_deleting_the_user_ends_the_stream_at_once(alice: Any, make_token: Callable[..., str]) -> None:
    """Deleting a user deletes its tokens (a cascade), each with its own ``post_delete``: published as a revocation."""
    token = await in_thread(make_token, alice)
    stream = await listen_with(token, "deleted", {"resourcesListChanged": True})
    await in_thread(alice.delete)
    assert await stream.until_closed(5) == [final_result("deleted")]
    await stream.finished()


async def test_deleting_the_application_ends_the_stream_at_once(alice: Any, make_token: Callable[..., str]) -> None:
    token = await in_thread(make_token, alice)
    stream = await listen_with(token, "app-deleted", {"resourcesListChanged": True})
    await in_thread(lambda: token_rows(alice).get().application.delete())
    assert await stream.until_closed(5) == [final_result("app-deleted")]
    await stream.finished()


async def test_an_application_no_longer_usable_ends_the_stream_at_once(
    alice: Any, make_token: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A swapped application model may refuse its tokens (``is_usable()``, which django-oauth-toolkit's validator
    asks): saving the application publishes a change of each of its tokens. Here the default model's
    ``is_usable()`` is replaced as such a model would override it."""
    from oauth2_provider.models import get_application_model

    token = await in_thread(make_token, alice)
    stream = await listen_with(token, "unusable", {"resourcesListChanged": True})
    monkeypatch.setattr(get_application_model(), "is_usable", lambda self, request: self.name != "disabled")

    def disable() -> None:
        app = token_rows(alice).get().application
        app.name = "disabled"
        app.save()

    await in_thread(disable)
    assert await stream.until_closed(5) == [final_result("unusable")]
    await stream.finished()


async def test_moving_the_token_to_another_application_is_published(
    alice: Any, make_token: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A token row's own change covers its application changing: its stream authenticates again."""
    from oauth2_provider.models import get_application_model

    token = await in_thread(make_token, alice)
    stream = await listen_with(token, "moved", {"resourcesListChanged": True})
    monkeypatch.setattr(get_application_model(), "is_usable", lambda self, request: self.name != "disabled")

    def move() -> None:
        row = token_rows(alice).get()
        row.application = get_application_model().objects.create(
            name="disabled", client_type="public", authorization_grant_type="authorization-code"
        )
        row.save()

    await in_thread(move)
    assert await stream.until_closed(5) == [final_result("moved")]
    await stream.finished()


# Credentials whose changes do not travel -----------------------------------------------------------------------


class SessionCookieAuthentication(BaseAuthentication):
    """A project's own authentication: the person signed in to the site by its session cookie, read from the
    session store on every call (so signing out elsewhere is seen)."""

    def authenticate(self, request: Any) -> Principal:
        from importlib import import_module

        from django.contrib.auth import SESSION_KEY, get_user_model

        key = request.COOKIES.get(django_settings.SESSION_COOKIE_NAME)
        if not key:
            return super().authenticate(request)
        user_id = import_module(django_settings.SESSION_ENGINE).SessionStore(key).get(SESSION_KEY)
        user = get_user_model()._default_manager.filter(pk=user_id, is_active=True).first()
        if user is None:
            raise AuthenticationRequired(invalid_token=True, reason="signed out")
        principal = user_principal(user, ["documents:read"], "session")
        request.user = user
        request.auth = principal
        return principal


async def test_a_session_cookie_stream_notices_the_sign_out_at_the_next_update(alice: Any, settings: Any) -> None:
    """Credentials whose changes are not published are authenticated again before every update, as before."""
    from django.test import Client

    settings.MCP_RESOURCES = {
        **settings.MCP_RESOURCES,
        "AUTHENTICATION_CLASS": f"{__name__}.SessionCookieAuthentication",
    }
    target = await in_thread(document, alice)
    client = Client()
    await in_thread(client.force_login, alice)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
    stream = await listen(listen_headers(None, cookie=cookie), "cookie", {"resourceSubscriptions": [target]})
    await in_thread(notify_resource_updated, target)
    assert await stream.event() == updated(target, "cookie")
    await in_thread(client.logout)
    await in_thread(notify_resource_updated, target)
    assert await stream.until_closed(5) == [final_result("cookie")]
    await stream.finished()


def test_a_sign_in_publishes_no_token_change_and_other_user_saves_do(
    alice: Any, make_token: Callable[..., str]
) -> None:
    """Django's ``update_last_login`` saves the user at every sign-in: that changes nothing a token relies on, so it
    costs no query and no event; any other save of the user publishes a change of each of its tokens."""
    from mcp_resources.subscriptions import broker

    make_token(alice)
    log = broker.get_log()

    def token_events_after(save: Callable[[], None]) -> int:
        start = log.last_id()
        save()
        events, _complete = log.replay(start, 100)
        return sum(event.kind == broker.TOKEN for event in events)

    assert token_events_after(lambda: alice.save(update_fields=["last_login"])) == 0
    assert token_events_after(lambda: alice.save(update_fields=["first_name"])) == 1
    assert token_events_after(alice.save) == 1
