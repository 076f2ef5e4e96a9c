"""The resource registry: templates (fixed at startup) and code-registered static resources (runtime).

Like ``django.contrib.admin.site``, a default registry (:data:`registry`) is filled by autodiscovering each installed
app's ``mcp_resources.py`` and frozen when the app registry is ready. Further registries can be created for tests or
for a second endpoint. Registering or removing a static resource sends
:data:`~mcp_resources.signals.resource_registered` or :data:`~mcp_resources.signals.resource_unregistered`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from django.core.exceptions import ImproperlyConfigured

from mcp_resources import metadata
from mcp_resources.access import ACCESS_POLICIES, PUBLIC
from mcp_resources.caching import cache_hint
from mcp_resources.exceptions import AlreadyRegistered, NotRegistered, RegistryFrozen, TemplateError
from mcp_resources.protocol.uris import validate_uri
from mcp_resources.resources import RegisteredResource, ResourceTemplate
from mcp_resources.signals import resource_registered, resource_unregistered

T = TypeVar("T", bound=type[ResourceTemplate])


class ResourceRegistry:
    """Holds registered templates (by name, in registration order) and code-registered static resources."""

    def __init__(self, name: str = "default") -> None:
        self.name = name
        self._registry: dict[str, ResourceTemplate] = {}
        self._resources: dict[str, RegisteredResource] = {}
        self._frozen = False
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"<ResourceRegistry {self.name!r}: {len(self._registry)} templates>"

    # Templates -------------------------------------------------------------------------------------------

    def register(self, template_class: T) -> T:
        """Register a template class (usable as a decorator). Raises once the registry is frozen."""
        if self._frozen:
            raise RegistryFrozen(
                f"cannot register {template_class.__name__}: templates are fixed once the app registry is "
                "ready; register them in an installed app's mcp_resources.py"
            )
        if not (isinstance(template_class, type) and issubclass(template_class, ResourceTemplate)):
            raise TypeError("register() takes a ResourceTemplate subclass")
        name = template_class.name
        if name in self._registry:
            raise AlreadyRegistered(f"a template named {name!r} is already registered")
        self._registry[name] = template_class()
        return template_class

    def unregister(self, template_class: type[ResourceTemplate]) -> None:
        if self._frozen:
            raise RegistryFrozen("templates are fixed once the app registry is ready")
        current = self._registry.get(template_class.name)
        if current is None or type(current) is not template_class:
            raise NotRegistered(f"{template_class.__name__} is not registered")
        del self._registry[template_class.name]

    def is_registered(self, template_class: type[ResourceTemplate]) -> bool:
        current = self._registry.get(template_class.name)
        return current is not None and type(current) is template_class

    def freeze(self) -> None:
        """Fix the set of templates, compile and check them; called for the default registry when the app registry
        is ready, and for any other when a server first serves it (:meth:`ensure_frozen`).

        A template whose ``uri_template`` does not compile raises ``ImproperlyConfigured`` with the message of the
        system check ``mcp_resources.E001``; so does any error of the checks that protect answers
        (:func:`add_freeze_check`: overlapping templates, unscoped querysets, bad owner paths, non-unique lookups,
        public cache hints on a caller's records), each with its check's message. The process fails to start (or
        the registry is never served) under any server, which runs no system checks.
        """
        with self._lock:
            if self._frozen:
                return
            problems = [f"({TEMPLATE_DOES_NOT_COMPILE}) {message}" for message in uri_template_errors(self.templates)]
            if not problems:
                for check in _freeze_checks:
                    problems += check(self)
            if problems:
                raise ImproperlyConfigured("\n".join(problems))
            self._frozen = True

    def ensure_frozen(self) -> None:
        """Freeze the registry unless it is frozen: what a server calls before it serves the registry."""
        if not self._frozen:
            self.freeze()

    @property
    def frozen(self) -> bool:
        return self._frozen

    @property
    def templates(self) -> list[ResourceTemplate]:
        return list(self._registry.values())

    def get_template(self, name: str) -> ResourceTemplate | None:
        return self._registry.get(name)

    def match(self, uri: str) -> tuple[ResourceTemplate, Any] | None:
        """Route ``uri`` to the first template that accepts it, with the parsed value.

        A template accepts ``uri`` when its ``parse_uri`` returns a value whose ``canonical_uri`` is ``uri``, byte
        for byte (:meth:`~mcp_resources.ResourceTemplate.resolve_uri`): one URI per record.
        """
        for template in self._registry.values():
            try:
                if not uri.startswith(template.compiled.literal_prefix):
                    continue
            except ValueError:
                continue
            parsed = template.resolve_uri(uri)
            if parsed is not None:
                return template, parsed
        return None

    # Static resources from code -------------------------------------------------------------------------

    def register_resource(
        self,
        uri: str,
        name: str,
        get: Callable[[], Any],
        *,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        access: str = PUBLIC,
        required_scopes: tuple[str, ...] | list[str] = (),
        subscribe: Callable[[Callable[[], None]], Callable[[], None] | None] | None = None,
        size: int | None = None,
        cache_control: tuple[str, int] | None = None,
        annotations: dict[str, Any] | None = None,
        icons: list[dict[str, Any]] | None = None,
    ) -> Callable[[], None]:
        """Register (or replace) a static resource; returns a function that unregisters it.

        ``cache_control`` is the hint of its reads and of the listing pages that carry it, ``(scope, ttl_ms)``;
        ``annotations`` (``audience``, ``priority``, ``lastModified``: a datetime or ISO 8601 text), ``icons`` and
        ``size`` are announced in ``resources/list``. Raises ``ValueError`` for a value of the wrong shape.
        """
        validate_uri(uri)
        if access not in ACCESS_POLICIES:
            raise ValueError("access must be 'public' or 'protected'")
        if not name:
            raise ValueError("a resource needs a name")
        hint = cache_hint(cache_control, "cache_control")
        checked_annotations = metadata.check_annotations(annotations)
        checked_icons = metadata.check_icons(icons)
        size = metadata.check_size(size)
        resource = RegisteredResource(
            uri=uri,
            name=name,
            get=get,
            title=title,
            description=description,
            mime_type=mime_type,
            access=access,
            required_scopes=tuple(required_scopes),
            subscribe=subscribe,
            size=size,
            cache_control=hint,
            annotations=checked_annotations,
            icons=checked_icons,
        )
        with self._lock:
            previous = self._resources.get(uri)
            self._resources[uri] = resource
        resource_registered.send(sender=type(self), registry=self, resource=resource, previous=previous)

        def unregister() -> None:
            with self._lock:
                if self._resources.get(uri) is not resource:
                    return
                del self._resources[uri]
            resource_unregistered.send(sender=type(self), registry=self, resource=resource)

        return unregister

    def unregister_resource(self, uri: str) -> None:
        with self._lock:
            resource = self._resources.pop(uri, None)
            if resource is None:
                raise NotRegistered(f"no static resource {uri!r} is registered")
        resource_unregistered.send(sender=type(self), registry=self, resource=resource)

    def get_resource(self, uri: str) -> RegisteredResource | None:
        return self._resources.get(uri)

    def iter_resources(self) -> Iterator[RegisteredResource]:
        with self._lock:
            items = sorted(self._resources.values(), key=lambda r: r.uri.encode())
        return iter(items)


TEMPLATE_DOES_NOT_COMPILE = "mcp_resources.E001"

FreezeCheck = Callable[[ResourceRegistry], list[str]]
_freeze_checks: list[FreezeCheck] = []


def add_freeze_check(check: FreezeCheck) -> None:
    """Run ``check(registry)`` whenever a registry freezes; it returns the messages that stop it (``"(id) msg"``).

    The app's system checks that protect answers add theirs when :mod:`mcp_resources.checks` is imported (before the
    default registry freezes): the registry knows nothing of the checks themselves.
    """
    if check not in _freeze_checks:
        _freeze_checks.append(check)


def uri_template_error(template: ResourceTemplate) -> str | None:
    """Why ``template.uri_template`` does not compile (the message of check E001), or ``None`` when it does."""
    try:
        template.compiled  # noqa: B018 - compiling is the check
    except TemplateError as exc:
        return f"{type(template).__name__}.uri_template does not parse: {exc}"
    return None


def uri_template_errors(templates: Iterable[ResourceTemplate]) -> list[str]:
    return [message for message in map(uri_template_error, templates) if message is not None]


registry = ResourceRegistry()
"""The default registry, filled from each installed app's ``mcp_resources.py``."""


def register(template_class: T) -> T:
    """Register a template class in the default registry; usable as a class decorator."""
    return registry.register(template_class)


def register_resource(uri: str, name: str, get: Callable[[], Any], **kwargs: Any) -> Callable[[], None]:
    """Register a static resource in the default registry; returns its unregister function."""
    return registry.register_resource(uri, name, get, **kwargs)
