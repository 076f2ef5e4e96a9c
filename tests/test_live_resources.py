"""Live resources: ``register_resource(..., get, subscribe)`` and their contract (docs/subscriptions.md, "Live
resources from code").

Each rule, line by line: reads are always live; identical consecutive values are not pushed, compared on
their serialized form against the last value dispatched for that URI only (the table: A,A,A -> 1; A,B,A -> 3;
A,B,B,C -> 3); a value that cannot be serialized is pushed and the baseline dropped; re-registering runs the
previous teardown first, clears the baseline and the next push always goes out; a ``subscribe`` without a
teardown logs a warning; unregistering tears down and removes; a debug line says when a push was suppressed.

Pushes are counted by the resource's live subscription (``registry.get_resource(uri).live``), and end to end on a
real ``subscriptions/listen`` stream served by ``MCPEndpoint`` over the test's registry.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

import pytest
from django.test import RequestFactory
from django.urls import path

from mcp_resources.exceptions import NotRegistered, ResourceNotFound
from mcp_resources.protocol.versions import V2026_07_28
from mcp_resources.registries import ResourceRegistry
from mcp_resources.server import CallContext, MCPServer
from mcp_resources.subscriptions.live import LiveSubscription
from mcp_resources.transport import MCPEndpoint, MCPView
from tests.conftest import urlconf
from tests.stream_support import Exchange, in_thread, listen_body, listen_headers, scope, updated

URI = "app://cart"
LOGGER = "mcp_resources.subscriptions"


class Store:
    """A store with the shape the seed describes: ``subscribe(on_change)`` returns the unsubscribe function."""

    def __init__(self, value: Any = "A", name: str = "store", log: list[str] | None = None) -> None:
        self.value = value
        self.name = name
        self.log = log if log is not None else []
        self.listeners: list[Callable[[], None]] = []
        self.gets = 0

    def get(self) -> Any:
        self.gets += 1
        if isinstance(self.value, Exception):
            raise self.value
        return self.value

    def subscribe(self, on_change: Callable[[], None]) -> Callable[[], None]:
        self.log.append(f"subscribe {self.name}")
        self.listeners.append(on_change)

        def teardown() -> None:
            self.log.append(f"teardown {self.name}")
            self.listeners.remove(on_change)

        return teardown

    def set(self, value: Any) -> None:
        """Change the value and tell every subscriber (``on_change`` takes no value)."""
        self.value = value
        for listener in list(self.listeners):
            listener()


def register(registry: ResourceRegistry, store: Store, uri: str = URI, **kwargs: Any) -> Callable[[], None]:
    return registry.register_resource(uri, store.name, store.get, subscribe=store.subscribe, **kwargs)


def live(registry: ResourceRegistry, uri: str = URI) -> LiveSubscription | None:
    """The live subscription of the resource registered at ``uri`` (``None`` when nothing is registered there)."""
    resource = registry.get_resource(uri)
    return None if resource is None else resource.live


def pushes(registry: ResourceRegistry, uri: str = URI) -> int:
    subscription = live(registry, uri)
    assert subscription is not None, f"{uri} is not registered"
    return int(subscription.pushes)


def read(server: MCPServer, uri: str = URI) -> dict[str, Any]:
    request = RequestFactory().post("/mcp")
    return server.call("resources/read", {"uri": uri}, CallContext(request, V2026_07_28))


# Identical consecutive values ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["A", "A", "A"], 1),
        (["A", "B", "A"], 3),
        (["A", "B", "B", "C"], 3),
        (["A"], 1),
        (["A", "B", "C", "D"], 4),
        (["A", "A", "B", "B", "A", "A"], 3),
    ],
)
def test_the_dedup_table(values: list[str], expected: int) -> None:
    registry = ResourceRegistry()
    store = Store(value=None)
    register(registry, store)
    for value in values:
        store.set(value)
    assert pushes(registry) == expected


def test_the_comparison_is_on_the_serialized_form() -> None:
    registry = ResourceRegistry()
    store = Store(value="A")
    register(registry, store, mime_type="text/plain")
    store.set("A")
    store.set({"text": "A"})  # the same contents once normalized
    store.set([{"text": "A", "uri": URI, "mimeType": "text/plain"}])
    assert pushes(registry) == 1
    store.set(b"A")  # a blob is another value
    store.set({"text": "A", "mimeType": "text/markdown"})
    assert pushes(registry) == 3


def test_compared_per_uri_only() -> None:
    registry = ResourceRegistry()
    cart, page = Store("A", "cart"), Store("A", "page")
    register(registry, cart, "app://cart")
    register(registry, page, "app://page")
    cart.set("A")
    page.set("A")  # the same value as the cart's last push: still the page's first
    cart.set("A")  # the page's push in between does not reset the cart's baseline
    page.set("B")
    cart.set("B")
    assert (pushes(registry, "app://cart"), pushes(registry, "app://page")) == (2, 2)


def test_the_baseline_is_the_last_dispatched_value_not_a_history() -> None:
    registry = ResourceRegistry()
    store = Store()
    register(registry, store)
    for value in ("A", "B", "A", "B", "B", "A"):
        store.set(value)
    assert pushes(registry) == 5


def test_suppressed_pushes_are_logged_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    registry = ResourceRegistry()
    store = Store()
    register(registry, store)
    store.set("A")
    assert not [r for r in caplog.records if "push suppressed" in r.getMessage()]
    store.set("A")
    store.set("B")
    store.set("B")
    suppressed = [r for r in caplog.records if "push suppressed (value unchanged)" in r.getMessage()]
    assert len(suppressed) == 2
    assert all(r.levelno == logging.DEBUG and r.name == LOGGER and URI in r.getMessage() for r in suppressed)


# Values that cannot be compared ----------------------------------------------------------------------------------


def _circular() -> dict[str, Any]:
    value: dict[str, Any] = {"text": "A"}
    value["_meta"] = {"self": value}
    return value


@pytest.mark.parametrize(
    "unserializable",
    [object(), [object()], {"text": "A", "_meta": {"when": object()}}, {"text": "A", "_meta": {"x": math.nan}}],
    ids=["object", "list-of-object", "nested-object", "nan"],
)
def test_an_unserializable_value_is_pushed_and_the_baseline_dropped(unserializable: Any) -> None:
    registry = ResourceRegistry()
    store = Store()
    register(registry, store)
    store.set("A")
    store.set(unserializable)
    assert pushes(registry) == 2
    assert live(registry).baseline is None
    store.set(unserializable)  # still cannot be compared: pushed again
    assert pushes(registry) == 3
    store.set("A")  # the same as the last *comparable* push, but the baseline was dropped: pushed
    assert pushes(registry) == 4
    store.set("A")
    assert pushes(registry) == 4


def test_a_circular_value_is_pushed() -> None:
    registry = ResourceRegistry()
    store = Store()
    register(registry, store)
    store.set("A")
    store.set(_circular())
    store.set("A")
    assert pushes(registry) == 3


def test_get_raising_on_a_push_fails_open(caplog: pytest.LogCaptureFixture) -> None:
    registry = ResourceRegistry()
    store = Store()
    register(registry, store)
    store.set("A")
    store.set(RuntimeError("backend down"))  # on_change does not raise into the store
    assert pushes(registry) == 2
    assert live(registry).baseline is None
    errors = [r for r in caplog.records if r.name == LOGGER and r.levelno >= logging.WARNING]
    assert len(errors) == 1
    assert URI in errors[0].getMessage()
    assert errors[0].exc_info is not None
    store.set("A")
    store.set("A")
    assert pushes(registry) == 3


# Re-registration, unregistration, teardown ---------------------------------------------------------------------------


def test_reregistration_tears_down_first_then_subscribes_and_always_pushes_next() -> None:
    registry = ResourceRegistry()
    log: list[str] = []
    first, second = Store("A", "first", log), Store("A", "second", log)
    register(registry, first)
    first.set("A")
    first.set("A")
    assert pushes(registry) == 1
    old_live = live(registry)
    register(registry, second)
    assert log == ["subscribe first", "teardown first", "subscribe second"]
    assert first.listeners == []
    new_live = live(registry)
    assert new_live is not old_live
    assert (new_live.pushes, new_live.baseline) == (0, None)
    second.set("A")  # unchanged since the last push, but the baseline was cleared: it goes out
    assert pushes(registry) == 1
    second.set("A")
    assert pushes(registry) == 1
    assert registry.get_resource(URI).name == "second"


def test_a_replaced_registrations_late_callback_pushes_nothing() -> None:
    registry = ResourceRegistry()
    captured: list[Callable[[], None]] = []

    def leaky_subscribe(on_change: Callable[[], None]) -> None:
        captured.append(on_change)  # returns no teardown: the source keeps calling

    registry.register_resource(URI, "old", lambda: "old value", subscribe=leaky_subscribe)
    old_live = live(registry)
    store = Store("A", "new")
    register(registry, store)
    captured[0]()
    captured[0]()
    assert (old_live.pushes, pushes(registry)) == (0, 0)
    store.set("A")
    assert pushes(registry) == 1  # the stale callback did not set the new baseline either


@pytest.mark.django_db  # a read of an unknown URI looks for a StaticResource row
def test_unregister_tears_down_and_removes() -> None:
    registry = ResourceRegistry()
    log: list[str] = []
    store = Store("A", "cart", log)
    unregister = register(registry, store)
    late = store.listeners[0]
    unregister()
    assert log == ["subscribe cart", "teardown cart"]
    assert registry.get_resource(URI) is None
    assert live(registry) is None
    assert [r.uri for r in registry.iter_resources()] == []
    gets = store.gets
    late()  # a callback arriving after the teardown: no read, no push
    assert store.gets == gets
    unregister()  # idempotent: no second teardown
    assert log == ["subscribe cart", "teardown cart"]
    server = MCPServer(registry)
    with pytest.raises(ResourceNotFound):
        read(server)


def test_unregister_removes_only_its_own_registration() -> None:
    registry = ResourceRegistry()
    log: list[str] = []
    first, second = Store("A", "first", log), Store("B", "second", log)
    unregister_first = register(registry, first)
    unregister_second = register(registry, second)
    unregister_first()  # stale: the URI belongs to the second registration now
    assert log == ["subscribe first", "teardown first", "subscribe second"]
    assert registry.get_resource(URI).name == "second"
    second.set("C")
    assert pushes(registry) == 1
    unregister_second()
    assert log[-1] == "teardown second"
    assert registry.get_resource(URI) is None


def test_unregister_resource_by_uri() -> None:
    registry = ResourceRegistry()
    log: list[str] = []
    store = Store("A", "cart", log)
    register(registry, store)
    registry.unregister_resource(URI)
    assert log == ["subscribe cart", "teardown cart"]
    assert registry.get_resource(URI) is None
    with pytest.raises(NotRegistered):
        registry.unregister_resource(URI)


def test_a_failing_teardown_is_logged_and_the_resource_still_goes(caplog: pytest.LogCaptureFixture) -> None:
    registry = ResourceRegistry()

    def subscribe(on_change: Callable[[], None]) -> Callable[[], None]:
        def teardown() -> None:
            raise RuntimeError("store gone")

        return teardown

    unregister = registry.register_resource(URI, "cart", lambda: "A", subscribe=subscribe)
    unregister()
    assert registry.get_resource(URI) is None
    assert any("teardown" in r.getMessage() and r.levelno >= logging.ERROR for r in caplog.records)


def test_subscribe_returning_none_warns(caplog: pytest.LogCaptureFixture) -> None:
    registry = ResourceRegistry()
    captured: list[Callable[[], None]] = []
    unregister = registry.register_resource(
        URI, "cart", lambda: "A", subscribe=lambda on_change: captured.append(on_change)
    )
    warnings = [r for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]
    assert len(warnings) == 1
    message = warnings[0].getMessage()
    assert URI in message
    assert "teardown" in message
    captured[0]()
    assert pushes(registry) == 1
    unregister()
    assert registry.get_resource(URI) is None


def test_a_pull_only_resource_has_no_subscription_and_no_warning(caplog: pytest.LogCaptureFixture) -> None:
    registry = ResourceRegistry()
    unregister = registry.register_resource(URI, "cart", lambda: "A")
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert live(registry).teardown is None
    unregister()


# Reads are always live ------------------------------------------------------------------------------------------------


def test_reads_are_always_live() -> None:
    registry = ResourceRegistry()
    store = Store("A")
    register(registry, store)
    server = MCPServer(registry)
    assert read(server)["contents"] == [{"uri": URI, "text": "A"}]
    assert read(server)["contents"] == [{"uri": URI, "text": "A"}]
    assert store.gets == 2  # no cache: every read calls get()
    store.value = "B"  # changed without telling anyone
    assert read(server)["contents"] == [{"uri": URI, "text": "B"}]
    assert store.gets == 3
    store.set("C")  # a push re-reads get() too
    assert store.gets == 4
    assert read(server)["contents"] == [{"uri": URI, "text": "C"}]
    assert store.gets == 5


# End to end: the notifications that reach a listener ------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_only_the_deduplicated_pushes_reach_a_listener(settings: Any) -> None:
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "STREAM_KEEPALIVE_SECONDS": 30}
    registry = ResourceRegistry("live-e2e")
    log: list[str] = []
    cart, page = Store("A", "cart", log), Store("home", "page", log)
    register(registry, cart, "app://cart")
    register(registry, page, "app://page")
    from testproject.asgi import django_asgi_app

    settings.ROOT_URLCONF = urlconf(path("mcp", MCPView.as_view(server=MCPServer(registry))))
    app = MCPEndpoint.as_asgi(django_asgi_app)
    stream = await Exchange(app, scope("POST", listen_headers())).start(
        listen_body("live", {"resourceSubscriptions": ["app://cart", "app://page", "app://unknown"]})
    )
    assert stream.status == 200
    ack = await stream.event()
    assert ack["params"]["notifications"] == {"resourceSubscriptions": ["app://cart", "app://page"]}

    # pushes: A, B, A, B, C. Each push is read before the next change (a stream coalesces updates of one URI that
    # wait for it at once); a suppressed push that sent anything would come before the sentinel.
    for value, pushed in zip("AAABAABBC", (1, 0, 0, 1, 1, 0, 1, 0, 1), strict=True):
        await in_thread(cart.set, value)
        if pushed:
            assert await stream.event() == updated("app://cart", "live")
    await in_thread(page.set, "checkout")  # the sentinel
    assert await stream.event() == updated("app://page", "live")
    assert pushes(registry, "app://cart") == 5

    # Re-registered (a hot reload): the first push goes out although the value is unchanged.
    replacement = Store("C", "cart-reloaded", log)
    await in_thread(lambda: register(registry, replacement, "app://cart"))
    await in_thread(cart.set, "Z")  # the old source was torn down: nothing
    await in_thread(replacement.set, "C")
    assert await stream.event() == updated("app://cart", "live")
    await in_thread(replacement.set, "C")
    await in_thread(page.set, "paid")
    assert await stream.event() == updated("app://page", "live")
    await stream.silent(0.2)
    await stream.disconnect()
