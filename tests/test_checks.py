"""System checks (one test per id) and the resource registry."""

from __future__ import annotations

import re
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core import checks
from django.core.management import call_command
from django.db import models
from django.test.utils import isolate_apps

from mcp_resources.checks import check_settings, check_templates
from mcp_resources.conf import DEFAULTS
from mcp_resources.exceptions import AlreadyRegistered, NotRegistered, RegistryFrozen
from mcp_resources.registries import ResourceRegistry, registry
from mcp_resources.resources import ModelResourceTemplate, ResourceTemplate
from mcp_resources.signals import resource_registered, resource_unregistered
from testproject.library.models import Document
from tests.live import ROOT


def ids(messages: list[checks.CheckMessage]) -> list[str]:
    return [message.id for message in messages]


class ValidDocuments(ModelResourceTemplate):
    """A template that passes every check; tests register it next to a faulty one."""

    model = Document
    name = "valid-documents"
    uri_template = "valid://documents/{id}"
    ordering = ("created", "id")

    def get_queryset(self, request: Any) -> Any:
        return Document.objects.filter(owner_id=request.user.pk)


# The default registry and the demo project ------------------------------------------------------------------


def test_demo_registry_passes():
    assert check_templates(registry) == []


def test_demo_settings_pass():
    assert check_settings() == []


def test_registered_check_passes_for_the_demo():
    assert checks.run_checks(tags=["mcp_resources"]) == []


def test_manage_py_check_passes():
    out = StringIO()
    call_command("check", stdout=out, stderr=StringIO())
    assert "System check identified no issues" in out.getvalue()


def test_valid_template_passes():
    registry = ResourceRegistry()
    registry.register(ValidDocuments)
    assert check_templates(registry) == []


# One test per check id --------------------------------------------------------------------------------------


def test_e001_uri_template_does_not_parse():
    registry = ResourceRegistry()

    @registry.register
    class Broken(ResourceTemplate):
        name = "broken"
        uri_template = "broken://x{?query}"

        def read(self, request, uri, variables):
            return ""

    messages = check_templates(registry)
    assert ids(messages) == ["mcp_resources.E001"]
    assert messages[0].obj is Broken
    assert isinstance(messages[0], checks.Error)


def test_e001_model_template_with_bad_uri_template_skips_model_checks():
    registry = ResourceRegistry()

    @registry.register
    class Broken(ModelResourceTemplate):
        model = Document
        name = "broken"
        uri_template = "no-scheme/{id}"

        def get_queryset(self, request):
            return Document.objects.none()

    assert ids(check_templates(registry)) == ["mcp_resources.E001"]


@pytest.mark.parametrize("bad_name", ["", "x" * 129, "tab\tname", "new\nline"])
def test_e002_template_name(bad_name):
    registry = ResourceRegistry()

    @registry.register
    class Unnamed(ResourceTemplate):
        name = bad_name
        uri_template = "unnamed://{id}"

        def read(self, request, uri, variables):
            return ""

    assert ids(check_templates(registry)) == ["mcp_resources.E002"]


def test_e002_accepts_a_long_printable_name():
    registry = ResourceRegistry()

    @registry.register
    class Named(ResourceTemplate):
        name = "n" * 128
        uri_template = "named://{id}"

        def read(self, request, uri, variables):
            return ""

    assert check_templates(registry) == []


def test_e003_overlapping_templates():
    registry = ResourceRegistry()

    @registry.register
    class Items(ResourceTemplate):
        name = "items"
        uri_template = "shop://items/{id}"

        def read(self, request, uri, variables):
            return ""

    @registry.register
    class Everything(ResourceTemplate):
        name = "everything"
        uri_template = "shop://{+path}"

        def read(self, request, uri, variables):
            return ""

    messages = check_templates(registry)
    assert ids(messages) == ["mcp_resources.E003"]
    assert "items" in messages[0].msg
    assert "everything" in messages[0].msg
    assert messages[0].obj is Everything


def test_e003_not_raised_for_distinct_suffixes():
    registry = ResourceRegistry()

    @registry.register
    class Json(ResourceTemplate):
        name = "json"
        uri_template = "shop://{id}.json"

        def read(self, request, uri, variables):
            return ""

    @registry.register
    class Data(ResourceTemplate):
        name = "data"
        uri_template = "shop://x/{id}/data"

        def read(self, request, uri, variables):
            return ""

    assert check_templates(registry) == []


def test_e004_ordering_names_unknown_field():
    registry = ResourceRegistry()

    @registry.register
    class Docs(ModelResourceTemplate):
        model = Document
        name = "docs"
        uri_template = "docs://{id}"
        ordering = ("published", "id")

        def get_queryset(self, request):
            return Document.objects.filter(owner_id=request.user.pk)

    messages = check_templates(registry)
    assert ids(messages) == ["mcp_resources.E004"]
    assert "published" in messages[0].msg


def test_e004_last_ordering_field_not_unique():
    registry = ResourceRegistry()

    @registry.register
    class Docs(ModelResourceTemplate):
        model = Document
        name = "docs"
        uri_template = "docs://{id}"
        ordering = ("id", "created")

        def get_queryset(self, request):
            return Document.objects.filter(owner_id=request.user.pk)

    messages = check_templates(registry)
    assert ids(messages) == ["mcp_resources.E004"]
    assert "'created'" in messages[0].msg


def test_e004_nullable_unique_last_field():
    with isolate_apps("testproject.library"):

        class Ticket(models.Model):
            code = models.IntegerField(unique=True, null=True)

            class Meta:
                app_label = "library"

            def __str__(self) -> str:
                return str(self.code)

        registry = ResourceRegistry()

        @registry.register
        class Tickets(ModelResourceTemplate):
            model = Ticket
            name = "tickets"
            uri_template = "tickets://{code}"
            ordering = ("code",)

            def get_queryset(self, request):
                return Ticket.objects.all()

        found = ids(check_templates(registry))
    assert "mcp_resources.E004" in found
    assert set(found) == {"mcp_resources.E004", "mcp_resources.W002"}


def test_e004_empty_ordering():
    registry = ResourceRegistry()

    @registry.register
    class Docs(ModelResourceTemplate):
        model = Document
        name = "docs"
        uri_template = "docs://{id}"
        ordering = ()

        def get_queryset(self, request):
            return Document.objects.filter(owner_id=request.user.pk)

    assert ids(check_templates(registry)) == ["mcp_resources.E004"]


def test_e004_accepts_pk_and_unique_fields():
    registry = ResourceRegistry()

    @registry.register
    class Users(ModelResourceTemplate):
        model = User
        name = "users"
        uri_template = "users://{username}"
        ordering = ("date_joined", "username")

        def get_queryset(self, request):
            return User.objects.filter(pk=request.user.pk)

    @registry.register
    class Docs(ModelResourceTemplate):
        model = Document
        name = "docs"
        uri_template = "docs://{id}"
        ordering = ("pk",)

        def get_queryset(self, request):
            return Document.objects.filter(owner_id=request.user.pk)

    assert check_templates(registry) == []


def test_e005_get_queryset_not_overridden():
    registry = ResourceRegistry()

    @registry.register
    class Docs(ModelResourceTemplate):
        model = Document
        name = "docs"
        uri_template = "docs://{id}"
        ordering = ("created", "id")

    messages = check_templates(registry)
    assert ids(messages) == ["mcp_resources.E005"]
    assert messages[0].obj is Docs


def test_e006_unknown_access_policy():
    registry = ResourceRegistry()

    @registry.register
    class Secret(ResourceTemplate):
        name = "secret"
        uri_template = "secret://{id}"
        access = "private"

        def read(self, request, uri, variables):
            return ""

    assert ids(check_templates(registry)) == ["mcp_resources.E006"]


def test_e007_public_template_with_scopes():
    registry = ResourceRegistry()

    @registry.register
    class Open(ResourceTemplate):
        name = "open"
        uri_template = "open://{id}"
        access = "public"
        required_scopes = ("documents:read",)

        def read(self, request, uri, variables):
            return ""

    assert ids(check_templates(registry)) == ["mcp_resources.E007"]


def test_e008_model_is_not_a_django_model():
    registry = ResourceRegistry()

    @registry.register
    class NoModel(ModelResourceTemplate):
        name = "no-model"
        uri_template = "nomodel://{id}"

        def get_queryset(self, request):
            return Document.objects.none()

    @registry.register
    class NotAModel(ModelResourceTemplate):
        model = dict  # type: ignore[assignment]
        name = "not-a-model"
        uri_template = "notamodel://{id}"

        def get_queryset(self, request):
            return Document.objects.none()

    assert ids(check_templates(registry)) == ["mcp_resources.E008", "mcp_resources.E008"]


def test_e009_lookup_fields_do_not_match_the_variables():
    registry = ResourceRegistry()

    @registry.register
    class Docs(ModelResourceTemplate):
        model = Document
        name = "docs"
        uri_template = "docs://{owner}/{id}"
        lookup_fields = {"id": "id"}
        ordering = ("created", "id")

        def get_queryset(self, request):
            return Document.objects.filter(owner_id=request.user.pk)

    assert ids(check_templates(registry)) == ["mcp_resources.E009"]


def test_e009_lookup_on_unknown_field():
    registry = ResourceRegistry()

    @registry.register
    class Docs(ModelResourceTemplate):
        model = Document
        name = "docs"
        uri_template = "docs://{slug}"
        ordering = ("created", "id")

        def get_queryset(self, request):
            return Document.objects.filter(owner_id=request.user.pk)

    messages = check_templates(registry)
    assert ids(messages) == ["mcp_resources.E009"]
    assert "slug" in messages[0].msg


def test_e009_accepts_related_lookups():
    registry = ResourceRegistry()

    @registry.register
    class Docs(ModelResourceTemplate):
        model = Document
        name = "docs"
        uri_template = "docs://{user}/{id}"
        lookup_fields = {"user": "owner__username", "id": "id"}
        ordering = ("created", "id")

        def get_queryset(self, request):
            return Document.objects.filter(owner_id=request.user.pk)

    assert check_templates(registry) == []


def test_e010_template_without_read():
    registry = ResourceRegistry()

    @registry.register
    class Unreadable(ResourceTemplate):
        name = "unreadable"
        uri_template = "unreadable://{id}"

    assert ids(check_templates(registry)) == ["mcp_resources.E010"]


def test_e011_authentication_class_cannot_be_imported(settings):
    settings.MCP_RESOURCES = {"AUTHENTICATION_CLASS": "mcp_resources.auth.NoSuchAuthentication"}
    assert ids(check_settings()) == ["mcp_resources.E011"]
    settings.MCP_RESOURCES = {"AUTHENTICATION_CLASS": "no_such_module.Auth"}
    assert ids(check_settings()) == ["mcp_resources.E011"]


@pytest.mark.parametrize("page_size", [0, 101, -1, "50", 2.5, True, None])
def test_e012_page_size_out_of_range(settings, page_size):
    settings.MCP_RESOURCES = {"PAGE_SIZE": page_size}
    assert ids(check_settings()) == ["mcp_resources.E012"]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("MAX_REQUEST_BYTES", -1),
        ("MAX_RESPONSE_BYTES", 1.5),
        ("CURSOR_TTL_SECONDS", True),
        ("SESSION_TIMEOUT_SECONDS", None),
        ("STREAMS_PER_CALLER", 0),
        ("URIS_PER_LISTEN", "100"),
        ("LIST_DEADLINE_SECONDS", 0),
        ("STREAM_SEND_TIMEOUT_SECONDS", -1.0),
        ("STREAM_KEEPALIVE_SECONDS", "15"),
        ("DELIVERY_RETENTION_SECONDS", 0),
        ("PUBLIC_CACHE_TTL_MS", 1.5),
        ("PUBLIC_CACHE_TTL_MS", "0"),
    ],
)
def test_e035_limits_must_be_numbers_that_admit_something(settings, key, value):
    settings.MCP_RESOURCES = {key: value}
    messages = check_settings()
    assert ids(messages) == ["mcp_resources.E035"]
    assert key in messages[0].msg
    assert repr(value) in messages[0].msg


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("DELIVERY_RETENTION_SECONDS", 0.5),
        ("LIST_DEADLINE_SECONDS", 0.000001),
        ("STREAM_KEEPALIVE_SECONDS", 1),
        ("PUBLIC_CACHE_TTL_MS", -5),
        ("MAX_REQUEST_BYTES", 10),
    ],
)
def test_e035_accepts_the_smallest_useful_values(settings, key, value):
    settings.MCP_RESOURCES = {key: value}
    assert ids(check_settings()) == []


@pytest.mark.parametrize("keys", [["short"], "a-single-string-of-enough-bytes", [None], [b"x" * 15]])
def test_e029_cursor_keys_must_be_a_list_of_long_secrets(settings, keys):
    settings.MCP_RESOURCES = {"CURSOR_KEYS": keys}
    assert ids(check_settings()) == ["mcp_resources.E029"]


@pytest.mark.parametrize("keys", [[], ["k" * 16], [b"k" * 32, "another-secret-of-enough-bytes"]])
def test_e029_accepts_long_secrets(settings, keys):
    settings.MCP_RESOURCES = {"CURSOR_KEYS": keys}
    assert check_settings() == []


@pytest.mark.parametrize("page_size", [1, 50, 100])
def test_e012_accepts_page_sizes_in_range(settings, page_size):
    settings.MCP_RESOURCES = {"PAGE_SIZE": page_size}
    assert check_settings() == []


def test_e013_listing_template_must_be_protected_and_discoverable():
    registry = ResourceRegistry()

    @registry.register
    class PublicInventory(ResourceTemplate):
        name = "public-inventory"
        uri_template = "inv://public/{id}"
        access = "public"

        def read(self, request, uri, variables):
            return ""

        def list(self, request, *, after, limit, prefix, deadline):
            return [], False

    @registry.register
    class HiddenInventory(ResourceTemplate):
        name = "hidden-inventory"
        uri_template = "inv://hidden/{id}"
        discoverable = False

        def read(self, request, uri, variables):
            return ""

        def list(self, request, *, after, limit, prefix, deadline):
            return [], False

    assert ids(check_templates(registry)) == ["mcp_resources.E013", "mcp_resources.E013"]


def public_hint(self: Any, request: Any) -> tuple[str, int]:
    return ("public", 60_000)


def test_e036_public_cache_hint_on_answers_that_differ_by_caller():
    """A public hint on a protected model template, a list() callback or a protected template (or repository) not
    declared shared is refused with the reason; a public template and a shared one may declare it."""
    registry = ResourceRegistry()
    registry.register(type("PublicDocuments", (ValidDocuments,), {"cache_control": public_hint}))

    def read(self: Any, request: Any, uri: str, variables: Any) -> str:
        return ""

    def inventory(self: Any, request: Any, *, after: Any, limit: int, prefix: str, deadline: float) -> Any:
        return [], False

    def template(name: str, **attrs: Any) -> type[ResourceTemplate]:
        attrs = {"name": name, "uri_template": f"{name}://{{id}}", "read": read, "cache_control": public_hint, **attrs}
        return registry.register(type(name.title(), (ResourceTemplate,), attrs))

    template("inventory", list=inventory)
    template("shared-inventory", list=inventory, shared=True)  # a caller's inventory can't be shared
    template("protected")
    template("handbook", shared=True)
    template("forecast", access="public")
    messages = check_templates(registry)
    assert [(m.id, m.obj.__name__) for m in messages] == [
        ("mcp_resources.E036", "PublicDocuments"),
        ("mcp_resources.E036", "Inventory"),
        ("mcp_resources.E036", "Shared-Inventory"),
        ("mcp_resources.E036", "Protected"),
    ]
    assert (
        "declares a public cache hint ('public', 60000), but a protected model template serves each caller's "
        "own records" in messages[0].msg
    )
    assert "its list() callback lists each caller's own inventory" in messages[1].msg
    assert "a protected template answers each caller on its own unless it declares shared = True" in messages[3].msg
    assert messages[3].hint is not None
    assert "set shared = True" in messages[3].hint


def test_e036_a_hook_that_needs_a_caller_is_left_to_the_request_time_rule():
    """A cache_control() that reads the caller cannot be asked at startup: no message, and at request time a
    public answer of it still says private (tests/test_cache_hints.py)."""
    registry = ResourceRegistry()

    def per_user(self: Any, request: Any) -> tuple[str, int]:
        return ("public", 1_000) if request.user.is_staff else ("private", 0)

    def failing(self: Any, request: Any) -> tuple[str, int]:
        return ("public", 1_000) if request.mcp_principal.subject.startswith("a") else ("private", 0)

    registry.register(type("PerUser", (ValidDocuments,), {"cache_control": per_user}))
    registry.register(
        type("Failing", (ValidDocuments,), {"name": "failing", "uri_template": "f://{id}", "cache_control": failing})
    )
    assert check_templates(registry) == []


@pytest.mark.parametrize("key", ["PAGESIZE", "PAGE_MAX_BYTES", "TOKEN_CACHE_SIZE"])
def test_w001_unknown_setting(settings, key):
    """An unknown key warns, a typo and a key of a development version alike."""
    settings.MCP_RESOURCES = {"PAGE_SIZE": 10, key: 10}
    messages = check_settings()
    assert ids(messages) == ["mcp_resources.W001"]
    assert isinstance(messages[0], checks.Warning)
    assert repr(key) in messages[0].msg
    assert messages[0].hint == "Every setting is listed in docs/settings.md."


def test_at_most_25_settings_each_documented_in_order():
    """The settings stay few, and docs/settings.md has a heading for each, in the order of ``DEFAULTS``."""
    headings = re.findall(r"^## ([A-Z_]+)$", (ROOT / "docs" / "settings.md").read_text(), flags=re.MULTILINE)
    assert len(DEFAULTS) <= 25
    assert headings == list(DEFAULTS)


def test_w002_nullable_ordering_field():
    registry = ResourceRegistry()

    @registry.register
    class Docs(ModelResourceTemplate):
        model = Document
        name = "docs"
        uri_template = "docs://{id}"
        ordering = ("deleted_at", "id")

        def get_queryset(self, request):
            return Document.objects.filter(owner_id=request.user.pk)

    messages = check_templates(registry)
    assert ids(messages) == ["mcp_resources.W002"]
    assert isinstance(messages[0], checks.Warning)


def test_settings_absent_or_empty_pass(settings):
    settings.MCP_RESOURCES = {}
    assert check_settings() == []
    del settings.MCP_RESOURCES
    assert check_settings() == []


# ResourceRegistry -------------------------------------------------------------------------------------------


def _template(name: str, uri_template: str) -> type[ResourceTemplate]:
    def read(self, request, uri, variables):
        return uri

    return type(name.title(), (ResourceTemplate,), {"name": name, "uri_template": uri_template, "read": read})


def test_register_returns_the_class_and_instantiates_it():
    registry = ResourceRegistry()
    cls = _template("things", "t://things/{id}")
    assert registry.register(cls) is cls
    assert registry.is_registered(cls)
    assert [type(t) for t in registry.templates] == [cls]
    assert isinstance(registry.get_template("things"), cls)
    assert registry.get_template("nothing") is None


def test_templates_keep_registration_order():
    registry = ResourceRegistry()
    names = ["zeta", "alpha", "mid"]
    for name in names:
        registry.register(_template(name, f"{name}://{{id}}"))
    assert [t.name for t in registry.templates] == names


def test_duplicate_names_raise_already_registered():
    registry = ResourceRegistry()
    registry.register(_template("things", "t://things/{id}"))
    other = _template("things", "t://other/{id}")
    with pytest.raises(AlreadyRegistered):
        registry.register(other)
    assert not registry.is_registered(other)
    assert registry.get_template("things").uri_template == "t://things/{id}"


def test_register_refuses_non_templates():
    registry = ResourceRegistry()
    with pytest.raises(TypeError):
        registry.register(object)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        registry.register(_template("x", "x://{id}")())  # type: ignore[arg-type]


def test_registering_after_freeze_raises():
    registry = ResourceRegistry()
    cls = _template("things", "t://things/{id}")
    registry.register(cls)
    registry.freeze()
    assert registry.frozen
    with pytest.raises(RegistryFrozen):
        registry.register(_template("more", "t://more/{id}"))
    with pytest.raises(RegistryFrozen):
        registry.unregister(cls)
    assert registry.is_registered(cls)


def test_default_registry_is_frozen_once_apps_are_ready():
    assert registry.frozen
    with pytest.raises(RegistryFrozen):
        registry.register(_template("late", "late://{id}"))


def test_unregister_and_is_registered():
    registry = ResourceRegistry()
    cls = _template("things", "t://things/{id}")
    registry.register(cls)
    registry.unregister(cls)
    assert not registry.is_registered(cls)
    assert registry.templates == []
    with pytest.raises(NotRegistered):
        registry.unregister(cls)
    # The name can be used again once free.
    registry.register(_template("things", "t://again/{id}"))


def test_unregister_refuses_a_different_class_with_the_same_name():
    registry = ResourceRegistry()
    registered = _template("things", "t://things/{id}")
    impostor = _template("things", "t://things/{id}")
    registry.register(registered)
    assert not registry.is_registered(impostor)
    with pytest.raises(NotRegistered):
        registry.unregister(impostor)
    assert registry.is_registered(registered)


def test_match_routes_to_the_template():
    registry = ResourceRegistry()
    registry.register(_template("things", "t://things/{id}"))
    registry.register(_template("data", "t://data/{id}/raw"))
    template, variables = registry.match("t://data/7/raw")
    assert template.name == "data"
    assert variables == {"id": "7"}
    assert registry.match("t://things/") is None
    assert registry.match("t://elsewhere/1") is None
    # Percent-escapes that are not UTF-8 route nowhere (and raise nothing).
    assert registry.match("t://things/%FF") is None


def test_register_resource_and_get():
    registry = ResourceRegistry()
    registry.register_resource("app://b", "b", lambda: "B", mime_type="text/plain", title="Bee")
    registry.register_resource("app://a", "a", lambda: "A", access="protected", required_scopes=["s"])
    resource = registry.get_resource("app://b")
    assert resource is not None
    assert resource.read(None) == "B"
    assert resource.get_descriptor() == {"uri": "app://b", "name": "b", "title": "Bee", "mimeType": "text/plain"}
    assert registry.get_resource("app://a").scopes == ("s",)
    assert [r.uri for r in registry.iter_resources()] == ["app://a", "app://b"]


@pytest.mark.parametrize(
    ("uri", "name", "kwargs"),
    [
        ("no-scheme", "n", {}),
        ("", "n", {}),
        ("app://x", "", {}),
        ("app://x", "n", {"access": "private"}),
    ],
)
def test_register_resource_validates(uri, name, kwargs):
    registry = ResourceRegistry()
    with pytest.raises(ValueError):
        registry.register_resource(uri, name, lambda: "", **kwargs)
    assert list(registry.iter_resources()) == []


def test_register_resource_returns_an_unregister_function():
    registry = ResourceRegistry()
    unregister = registry.register_resource("app://x", "x", lambda: "x")
    assert registry.get_resource("app://x") is not None
    unregister()
    assert registry.get_resource("app://x") is None
    unregister()  # idempotent
    assert registry.get_resource("app://x") is None


class Events:
    """Records ``resource_registered`` / ``resource_unregistered`` for one registry as (event, uri, previous uri)."""

    def __init__(self, registry: ResourceRegistry) -> None:
        self.registry = registry
        self.seen: list[tuple[str, str, str | None]] = []
        self.previous: list[Any] = []  # the ``previous`` argument of each registration

    def registered(self, sender: Any, registry: ResourceRegistry, resource: Any, previous: Any, **kwargs: Any) -> None:
        if registry is self.registry:
            self.seen.append(("registered", resource.uri, previous.uri if previous is not None else None))
            self.previous.append(previous)

    def unregistered(self, sender: Any, registry: ResourceRegistry, resource: Any, **kwargs: Any) -> None:
        if registry is self.registry:
            self.seen.append(("unregistered", resource.uri, None))


@pytest.fixture
def listen():
    """``listen(registry)``: an :class:`Events` connected to the registry signals for the test."""
    connected: list[Events] = []

    def connect(registry: ResourceRegistry) -> Events:
        events = Events(registry)
        resource_registered.connect(events.registered)
        resource_unregistered.connect(events.unregistered)
        connected.append(events)
        return events

    yield connect
    for events in connected:
        resource_registered.disconnect(events.registered)
        resource_unregistered.disconnect(events.unregistered)


def test_stale_unregister_does_not_remove_a_replacement(listen):
    registry = ResourceRegistry()
    events = listen(registry)
    first = registry.register_resource("app://x", "x", lambda: "one")
    replaced = registry.get_resource("app://x")
    second = registry.register_resource("app://x", "x", lambda: "two")
    first()  # replaced already: must not remove the second registration
    assert registry.get_resource("app://x").read(None) == "two"
    assert events.seen == [("registered", "app://x", None), ("registered", "app://x", "app://x")]
    assert events.previous == [None, replaced]  # the replacement names the resource it replaced
    second()
    assert registry.get_resource("app://x") is None
    assert events.seen[-1] == ("unregistered", "app://x", None)


def test_unregister_resource(listen):
    registry = ResourceRegistry()
    events = listen(registry)
    unregister = registry.register_resource("app://x", "x", lambda: "x")
    registry.unregister_resource("app://x")
    assert registry.get_resource("app://x") is None
    with pytest.raises(NotRegistered):
        registry.unregister_resource("app://x")
    unregister()  # already gone: no second event
    assert events.seen == [("registered", "app://x", None), ("unregistered", "app://x", None)]


def test_signal_receivers_see_every_event_in_order(listen):
    registry = ResourceRegistry()
    first, second = listen(registry), listen(registry)
    other = listen(ResourceRegistry("other"))
    undo_a = registry.register_resource("app://a", "a", lambda: "")
    registry.register_resource("app://b", "b", lambda: "")
    undo_a()
    expected = [("registered", "app://a", None), ("registered", "app://b", None), ("unregistered", "app://a", None)]
    assert first.seen == expected
    assert second.seen == expected
    assert other.seen == []  # each signal names its registry


def test_static_resources_can_be_registered_after_freeze():
    registry = ResourceRegistry()
    registry.freeze()
    unregister = registry.register_resource("app://live", "live", lambda: "x")
    assert registry.get_resource("app://live") is not None
    unregister()


# mcp_resources.E033 / E034: the metadata fields of a model template ----------------------------------------------


@pytest.mark.parametrize("field", ["title", "nothing", "owner", "owner__username"])
def test_e033_modified_field_is_not_a_date_or_datetime_field(field):
    registry = ResourceRegistry()
    registry.register(type("Dated", (ValidDocuments,), {"modified_field": field}))
    messages = check_templates(registry)
    assert ids(messages) == ["mcp_resources.E033"]
    assert f"modified_field {field!r}" in messages[0].msg


@pytest.mark.parametrize("field", ["created", "deleted_at", "owner__last_login", "owner__date_joined"])
def test_e033_accepts_dates_and_datetimes_through_forward_relations(field):
    registry = ResourceRegistry()
    registry.register(type("Dated", (ValidDocuments,), {"modified_field": field}))
    assert check_templates(registry) == []


@pytest.mark.parametrize("field", ["title", "created", "nothing", "owner__username"])
def test_e034_size_field_is_not_an_integer_field(field):
    registry = ResourceRegistry()
    registry.register(type("Sized", (ValidDocuments,), {"size_field": field}))
    messages = check_templates(registry)
    assert ids(messages) == ["mcp_resources.E034"]
    assert f"size_field {field!r}" in messages[0].msg


@pytest.mark.parametrize("field", ["id", "owner__id"])
def test_e034_accepts_integer_fields(field):
    registry = ResourceRegistry()
    registry.register(type("Sized", (ValidDocuments,), {"size_field": field}))
    assert check_templates(registry) == []


def test_e013_a_repository_must_be_protected_and_discoverable():
    from mcp_resources.resources import ResourceRepository

    registry = ResourceRegistry()

    @registry.register
    class PublicShelf(ResourceRepository):
        name = "public-shelf"
        uri_template = "shelf://public/{id}"
        access = "public"

        def read(self, request, uri, variables):
            return ""

        def list_page(self, request, *, token, limit, prefix, deadline):
            return [], None

    @registry.register
    class UnlistedShelf(ResourceRepository):  # no list_page(): not a listing source, nothing to refuse
        name = "unlisted-shelf"
        uri_template = "shelf://unlisted/{id}"
        access = "public"

        def read(self, request, uri, variables):
            return ""

    messages = check_templates(registry)
    assert ids(messages) == ["mcp_resources.E013"]
    assert messages[0].obj is PublicShelf
    assert "implements list_page()" in messages[0].msg
