"""Resource templates and static resources: what an application declares.

A template is a class with attributes and ``get_*`` hooks, registered with :func:`mcp_resources.register`.
This module declares; it knows nothing of how listings are paged or how changes are published.
``ModelResourceTemplate`` serves records of a Django model through a queryset that is always scoped to the
caller: declared with ``owner_field``, or computed by an overridden ``get_queryset``. Without either, the base
``get_queryset`` returns nothing (fails closed) and a system check refuses it.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from django.core.exceptions import FieldDoesNotExist, ImproperlyConfigured, ObjectDoesNotExist, ValidationError
from django.db import models

from mcp_resources import fastpaths, metadata
from mcp_resources.access import PROTECTED, PUBLIC
from mcp_resources.caching import PRIVATE_SCOPE, CacheHint, cache_hint
from mcp_resources.exceptions import ResourceNotFound
from mcp_resources.ownership import owner_of, owner_path
from mcp_resources.protocol.uris import URITemplate, compile_template

if TYPE_CHECKING:
    from django.http import HttpRequest

Contents = list[dict[str, Any]]


def normalize_contents(value: Any, *, uri: str, mime_type: str | None) -> Contents:
    """Turn what a hook returned (str, bytes, a dict or a list of them) into MCP resource contents."""
    items = value if isinstance(value, list | tuple) else [value]
    contents: Contents = []
    for item in items:
        if isinstance(item, str):
            entry: dict[str, Any] = {"text": item}
        elif isinstance(item, bytes | bytearray | memoryview):
            entry = {"blob": bytes(item)}
        elif isinstance(item, Mapping):
            entry = dict(item)
        else:
            raise TypeError(f"unsupported resource contents: {type(item).__name__}")
        if isinstance(entry.get("blob"), bytes | bytearray | memoryview):
            entry["blob"] = base64.b64encode(bytes(entry["blob"])).decode("ascii")
        if ("text" in entry) == ("blob" in entry):
            raise TypeError("each content item needs exactly one of 'text' or 'blob'")
        if "text" in entry and not isinstance(entry["text"], str):
            raise TypeError("'text' must be a string")
        if "blob" in entry and not isinstance(entry["blob"], str):
            raise TypeError("'blob' must be bytes or a base64 string")
        entry.setdefault("uri", uri)
        if mime_type and "mimeType" not in entry:
            entry["mimeType"] = mime_type
        contents.append(entry)
    if not contents:
        raise TypeError("a read must return at least one content item")
    return contents


class ResourceTemplate:
    """A family of resources described by an RFC 6570 URI template.

    Subclass, set the attributes and implement :meth:`read`, then register the class with
    :func:`mcp_resources.register`. ``parse_uri`` may be overridden to take over URI parsing. ``shared = True``
    declares that every caller who may access a protected template gets the same answers: only then may it declare
    a ``"public"`` cache hint (:attr:`per_caller`).
    """

    name: ClassVar[str] = ""
    uri_template: ClassVar[str] = ""
    title: ClassVar[str | None] = None
    description: ClassVar[str | None] = None
    mime_type: ClassVar[str | None] = None
    access: ClassVar[str] = PROTECTED
    required_scopes: ClassVar[Sequence[str]] = ()
    discoverable: ClassVar[bool] = True
    shared: ClassVar[bool] = False
    icons: ClassVar[Sequence[Mapping[str, Any]] | None] = None
    annotations: ClassVar[Mapping[str, Any] | None] = None

    def __init__(self) -> None:
        self._compiled: URITemplate | None = None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} {self.uri_template!r}>"

    @property
    def compiled(self) -> URITemplate:
        """The compiled template (compiled once; system checks report templates that do not parse)."""
        if self._compiled is None:
            self._compiled = compile_template(self.uri_template)
        return self._compiled

    @property
    def scopes(self) -> tuple[str, ...]:
        return tuple(self.required_scopes)

    def parse_uri(self, uri: str) -> Mapping[str, Any] | None:
        """Return the variables for ``uri`` (or any value ``read`` expects), or ``None`` when it does not match.

        Override to take over parsing; raise :class:`~mcp_resources.ResourceError` to refuse the URI with a
        message for the client. Whatever it returns, ``uri`` is served only when it is the
        :meth:`canonical_uri` of that value.
        """
        return self.compiled.match(uri)

    def canonical_uri(self, parsed: Any) -> str | None:
        """The one URI that names ``parsed`` (what :meth:`parse_uri` returned), or ``None`` when none does.

        One URI per record: a URI is read, subscribed to and listened to only when it is exactly (byte for byte)
        the canonical URI of what it parses to; any other spelling of the same values is not found. The default
        expands the template from the variables (from the value itself for a template with one variable, when a
        ``parse_uri`` override returns something other than a mapping). A ``parse_uri`` override that returns
        another kind of value overrides this too.
        """
        compiled = self.compiled
        variables = compiled.variables
        if (type(parsed) is dict or isinstance(parsed, Mapping)) and (
            variables[0] in parsed if len(variables) == 1 else all(name in parsed for name in variables)
        ):
            return compiled.expand(parsed)
        if len(variables) == 1 and not isinstance(parsed, Mapping):
            return self.compiled.expand({variables[0]: parsed})
        raise ImproperlyConfigured(
            f"{type(self).__name__}.parse_uri() returned {type(parsed).__name__}, which is not a mapping of the "
            f"variables {sorted(variables)}: override canonical_uri() to give the URI that names it"
        )

    def resolve_uri(self, uri: str) -> Any:
        """What :meth:`parse_uri` returns for ``uri`` when ``uri`` is its :meth:`canonical_uri`, else ``None``.

        This is how the registry routes every ``resources/read``, ``resources/subscribe`` and
        ``subscriptions/listen`` URI; not meant to be overridden (override the two it calls).
        """
        parsed = self.parse_uri(uri)
        if parsed is None or self.canonical_uri(parsed) != uri:
            return None
        return parsed

    def read(self, request: HttpRequest, uri: str, variables: Any) -> Any:
        """Return the contents of ``uri``: a str, bytes, a contents dict or a list of them.

        Raise :class:`~mcp_resources.ResourceNotFound` when the caller may not read it or it does not exist.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement read()")

    def list(self, request: HttpRequest, *, after: str | None, limit: int, prefix: str, deadline: float) -> Any:
        """List the caller's concrete resources (override to make the template an inventory source).

        Return ``(entries, has_more)`` (or an :class:`InventoryPage`): at most ``limit`` entries
        ``(key, {"uri", "name", "mimeType"})`` with keys strictly after ``after`` in byte order. The caller's
        :class:`~mcp_resources.Principal` is ``request.mcp_principal``; ``deadline`` is a
        ``time.monotonic()`` value after which work should stop. Long work should also stop once
        :func:`mcp_resources.cancellation.is_cancelled` says the client has disconnected.
        """
        raise NotImplementedError

    @property
    def lists_instances(self) -> bool:
        """Whether this template contributes concrete resources to ``resources/list``."""
        return type(self).list is not ResourceTemplate.list

    def cache_control(self, request: HttpRequest) -> tuple[str, int] | None:
        """The cache hint of this template's answers: ``(scope, ttl_ms)``, ``scope`` ``"public"`` or ``"private"``
        and ``ttl_ms`` a lifetime in milliseconds; ``None`` (the default) declares none: nothing is cached.

        It is the hint of every ``resources/read`` of the template, and counts in ``resources/templates/list`` and
        in ``resources/list`` (where a caller's own records, those of a model template or a ``list()`` callback,
        are always private and uncached). ``"public"`` is for what is the same for every caller: a template whose
        answers differ by caller (:attr:`per_caller`) that declares it is refused by ``mcp_resources.E036``, and
        its answers say ``"private"``. docs/resources.md has the table.
        """
        return None

    @property
    def per_caller(self) -> bool:
        """Whether the template's answers may differ by caller, so that no cache may share them: a protected
        template, unless it declares ``shared = True`` (every caller who may access it gets the same answers);
        a ``list()`` callback (a caller's inventory) whatever it declares. A public template answers everyone
        alike."""
        return self.access != PUBLIC and (self.lists_instances or not self.shared)

    def get_cache_hint(self, request: HttpRequest) -> CacheHint | None:
        """What :meth:`cache_control` declares, checked; raises ``ValueError`` for anything but a hint or ``None``.

        A ``"public"`` hint of a :attr:`per_caller` template comes back ``"private"`` (``mcp_resources.E036``
        reports the declaration): a shared cache never serves one caller's answer to another."""
        hint = cache_hint(self.cache_control(request), f"{type(self).__name__}.cache_control()")
        if hint is not None and not hint.private and self.per_caller:
            return CacheHint(PRIVATE_SCOPE, hint.ttl_ms)
        return hint

    def complete(self, request: HttpRequest, argument: str, value: str, context: Mapping[str, str]) -> Any:
        """Values for the URI variable ``argument`` starting with ``value`` (``completion/complete``).

        ``context`` holds the values already chosen for the template's other variables. Return a list of strings
        or a :class:`Completion` (at most 100 values are sent), or ``None`` for the default: a
        :class:`ModelResourceTemplate` completes from its caller-scoped queryset, any other template completes
        nothing (docs/resources.md#completion).
        """
        return None

    def get_descriptor(self) -> dict[str, Any]:
        """The ``ResourceTemplate`` object announced in ``resources/templates/list``."""
        descriptor: dict[str, Any] = {"uriTemplate": self.uri_template, "name": self.name}
        if self.title:
            descriptor["title"] = self.title
        if self.description:
            descriptor["description"] = self.description
        if self.mime_type:
            descriptor["mimeType"] = self.mime_type
        if self.icons:
            descriptor["icons"] = [dict(icon) for icon in self.icons]
        if self.annotations:
            descriptor["annotations"] = dict(self.annotations)
        return descriptor


class ModelResourceTemplate(ResourceTemplate):
    """A template whose resources are rows of ``model``, fetched through the caller-scoped ``get_queryset``.

    ``lookup_fields`` maps template variables to model lookups (default: each variable to the field of the same
    name). ``ordering`` is the keyset for listings and must end in a unique, non-null field.

    Scope: set ``owner_field`` (a path of relations to the user model: ``"owner"``, ``"project__members"``,
    ``"team__memberships__user"``) to serve the rows of ``queryset`` (default: every row of ``model``) that it
    links to ``request.user``, each once; or override ``get_queryset``.

    Listing cost (both optional): ``name_field`` names the field whose value is the listed ``name`` (default
    ``None``: ``str(obj)``); when it is set and ``get_resource``, ``get_uri`` and ``get_resource_name`` are not
    overridden, listings read only the ordering, lookup and name columns and build no model instances.
    ``list_fields`` declares the fields the overridden listing hooks read: listings then load only those (plus the
    ordering and lookup fields) with ``QuerySet.only()``.

    Per-record permission (optional): ``object_permissions = True`` declares that :meth:`has_object_permission`
    decides each record the queryset holds, as a viewset's object permissions do. Reads answer not found for a
    record it refuses, and listings and completions leave such records out: they check every record they would
    offer, one by one (model instances, never value rows or compiled queries).

    Metadata (both optional): ``modified_field`` names a date or datetime field listed as
    ``annotations.lastModified``, ``size_field`` an integer field listed as ``size`` (the content's bytes); both
    are read in the page query.
    """

    model: ClassVar[type[models.Model] | None] = None
    queryset: ClassVar[models.QuerySet[Any] | None] = None
    owner_field: ClassVar[str | None] = None
    ordering: ClassVar[Sequence[str]] = ("pk",)
    lookup_fields: ClassVar[Mapping[str, str] | None] = None
    listable: ClassVar[bool] = True
    requires_subject: ClassVar[bool] = True
    name_field: ClassVar[str | None] = None
    list_fields: ClassVar[Sequence[str] | None] = None
    modified_field: ClassVar[str | None] = None
    size_field: ClassVar[str | None] = None
    fast_paths: ClassVar[frozenset[str]] = fastpaths.ALL
    object_permissions: ClassVar[bool] = False
    _targets: dict[str, models.Field[Any, Any] | None] | None = None
    _fast_paths_from: ClassVar[type[ModelResourceTemplate] | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Settle ``fast_paths``: as declared in the class body, else those of the class it inherits them from
        that none of the hooks this class defines anew stands in front of (:mod:`mcp_resources.fastpaths`)."""
        super().__init_subclass__(**kwargs)
        if "fast_paths" in cls.__dict__:
            declared = frozenset(cls.__dict__["fast_paths"])
            unknown = sorted(declared - fastpaths.ALL)
            if unknown:
                raise ImproperlyConfigured(
                    f"{cls.__name__}.fast_paths names unknown fast paths {unknown}: "
                    f"choose among {sorted(fastpaths.ALL)}"
                )
            cls.fast_paths = declared
            cls._fast_paths_from = cls
            return
        origin = cls._fast_paths_from or ModelResourceTemplate
        cls.fast_paths = origin.fast_paths & fastpaths.granted(cls, origin)

    @property
    def lists_instances(self) -> bool:
        return self.listable and self.model is not None

    @property
    def per_caller(self) -> bool:
        """A protected model template serves each caller's own records (its queryset is scoped to the caller),
        whatever it declares."""
        return self.access != PUBLIC

    def get_resource(self, request: HttpRequest, obj: models.Model) -> dict[str, Any]:
        """The ``Resource`` listed for ``obj``: uri, name, the template's mime type, and ``annotations.lastModified``
        and ``size`` from ``modified_field`` and ``size_field`` when they are set (and the record has a value)."""
        resource: dict[str, Any] = {"uri": self.get_uri(obj), "name": self.get_resource_name(obj)}
        if self.mime_type:
            resource["mimeType"] = self.mime_type
        if self.modified_field is not None:
            modified = _resolve(obj, self.modified_field)
            if modified is not None:
                resource["annotations"] = {"lastModified": metadata.last_modified(modified)}
        if self.size_field is not None:
            size = _resolve(obj, self.size_field)
            if size is not None:
                resource["size"] = int(size)
        return resource

    def base_queryset(self) -> models.QuerySet[Any]:
        """A fresh copy of ``queryset`` (default: every row of ``model``), before the owner's scope."""
        if self.queryset is not None:
            return self.queryset.all()
        assert self.model is not None
        return self.model._default_manager.all()

    @property
    def fixed_rows(self) -> bool:
        """Whether :meth:`base_queryset` cannot change from one request to the next: ``queryset`` is declared, or the
        model's default manager is Django's own ``Manager`` (a manager of the project's may filter per request: a
        tenant held in a context variable, ``timezone.now()``). Only such rows are compiled once and run again."""
        if self.queryset is not None:
            return True
        return self.model is not None and type(self.model._default_manager) is models.Manager

    def get_queryset(self, request: HttpRequest) -> models.QuerySet[Any]:
        """Return the records this caller may see.

        With ``owner_field``: the rows of ``queryset`` that it links to ``request.user`` (none for an anonymous
        caller); through a many-to-many or a reverse foreign key, an ``EXISTS`` subquery keeps each row once.
        Without it, override this method: the base returns no rows (fails closed).
        """
        assert self.model is not None
        if self.owner_field is not None:
            owner = owner_of(request)
            if owner is not None:
                return self.base_queryset().filter(owner_path(self.model, self.owner_field).scope(owner))
        return self.model._default_manager.none()

    def get_lookups(self) -> dict[str, str]:
        if self.lookup_fields is not None:
            return dict(self.lookup_fields)
        return {var: var for var in self.compiled.variables}

    def canonical_uri(self, parsed: Any) -> str | None:
        """The template expanded from the variables converted as their lookup fields convert them.

        ``learn://documents/01`` parses to ``{"id": "01"}``, which the integer field takes as ``1``: its canonical
        URI is ``learn://documents/1``, so ``01`` (like ``%31``, ``+1``, ``1_0``, or digits of other scripts) is
        not found. Text that no field value converts from names no record (``None``). No query is made.
        """
        if not isinstance(parsed, Mapping):
            return super().canonical_uri(parsed)
        converted = dict(parsed)
        for variable, target in self._lookup_targets().items():
            if target is not None and variable in converted:
                try:
                    converted[variable] = target.to_python(converted[variable])
                except (ValidationError, ValueError, TypeError, OverflowError):
                    return None
        return super().canonical_uri(converted)

    def _lookup_targets(self) -> dict[str, models.Field[Any, Any] | None]:
        """The model field each variable's lookup ends in (``None`` when it ends elsewhere), found once."""
        if self._targets is None:
            assert self.model is not None
            self._targets = {var: _target_field(self.model, lookup) for var, lookup in self.get_lookups().items()}
        return self._targets

    def get_object(self, request: HttpRequest, variables: Mapping[str, Any]) -> models.Model:
        """Fetch the record for ``variables`` from the scoped queryset, or raise ``ResourceNotFound``."""
        lookups = {field: variables[var] for var, field in self.get_lookups().items()}
        if any(isinstance(value, str) and "\x00" in value for value in lookups.values()):
            # A NUL (from "%00") names no row, and PostgreSQL refuses to compare it (DataError, not a miss).
            raise ResourceNotFound()
        try:
            obj = self.get_queryset(request).get(**lookups)
        except (ObjectDoesNotExist, ValidationError, ValueError, TypeError, OverflowError) as exc:
            raise ResourceNotFound() from exc
        if self.object_permissions and not self.has_object_permission(request, obj):
            raise ResourceNotFound()
        return obj

    def has_object_permission(self, request: HttpRequest, obj: models.Model) -> bool:
        """Whether the caller may read ``obj``, a record of its queryset; consulted only when the template declares
        ``object_permissions = True``, for reads, listings and completions alike. The default allows every one."""
        return True

    def has_object_permissions(self, request: HttpRequest, objs: Sequence[models.Model]) -> list[bool]:
        """:meth:`has_object_permission` for each of ``objs`` (a batch a listing page or a completion reads);
        override to decide a batch with less work than one call per record, with the same answers."""
        return [self.has_object_permission(request, obj) for obj in objs]

    @property
    def decides_readers_in_one_query(self) -> bool:
        """Whether :meth:`get_readers` may answer for several callers at once: access comes from ``owner_field``
        and ``fast_paths`` holds ``"batched_readers"`` (no override of ``get_queryset``, ``get_object`` or ``read``
        took it off), and no per-record permission (``object_permissions``) decides."""
        return (
            self.owner_field is not None
            and fastpaths.BATCHED_READERS in self.fast_paths
            and not self.object_permissions
        )

    readers_per_query: ClassVar[int] = 500
    """How many callers :meth:`get_readers` decides in one query (one selected column each): a record shared by
    thousands of readers is decided in several queries, under PostgreSQL's 1,664 columns and SQLite's 2,000."""

    def get_readers(self, variables: Mapping[str, Any], owners: Sequence[Any]) -> set[Any]:
        """Which of ``owners`` (user primary keys) may read the record for ``variables``, in one query for each
        ``readers_per_query`` of them.

        The same answer as :meth:`get_object` through each owner's queryset, for templates where
        :attr:`decides_readers_in_one_query`; change notifications use it to re-check many subscribers at once.
        """
        assert self.model is not None
        assert self.owner_field is not None
        lookups = {field: variables[var] for var, field in self.get_lookups().items()}
        if not owners or any(isinstance(value, str) and "\x00" in value for value in lookups.values()):
            return set()
        path = owner_path(self.model, self.owner_field)
        unique = list(dict.fromkeys(owners))
        size = max(1, self.readers_per_query)
        readers: set[Any] = set()
        for start in range(0, len(unique), size):
            chunk = unique[start : start + size]
            names = [f"mcp_reader_{index}" for index in range(len(chunk))]
            flags: dict[str, Any] = {}
            for name, owner in zip(names, chunk, strict=True):
                condition = path.scope(owner)
                flags[name] = (
                    condition if path.many_valued else models.ExpressionWrapper(condition, models.BooleanField())
                )
            try:
                rows = list(self.base_queryset().filter(**lookups).annotate(**flags).values_list(*names)[:2])
            except (ValidationError, ValueError, TypeError, OverflowError):
                return set()
            if len(rows) != 1:
                return set()  # no record, or several (get_object finds none of them)
            readers.update(owner for owner, allowed in zip(chunk, rows[0], strict=True) if allowed)
        return readers

    def get_contents(self, request: HttpRequest, obj: models.Model) -> Any:
        """What ``resources/read`` returns for ``obj``: a str, bytes, a contents dict or a list of them."""
        return str(obj)

    def get_uri(self, obj: models.Model) -> str:
        """The URI of ``obj``, expanded from the template with the object's lookup fields."""
        values = {var: _resolve(obj, field) for var, field in self.get_lookups().items()}
        return self.compiled.expand(values)

    def get_resource_name(self, obj: models.Model) -> str:
        """The listed ``name`` of ``obj``: the ``name_field`` value when it is set, else ``str(obj)``."""
        if self.name_field is not None:
            return str(getattr(obj, self.name_field))
        return str(obj)

    def read(self, request: HttpRequest, uri: str, variables: Any) -> Any:
        obj = self.get_object(request, variables)
        return self.get_contents(request, obj)


def _target_field(model: type[models.Model], lookup: str) -> models.Field[Any, Any] | None:
    """The concrete field that ``lookup`` (``a__b``, forward relations only) compares, or ``None``."""
    current: Any = model
    names = lookup.split("__")
    for index, name in enumerate(names):
        try:
            field = current._meta.pk if name == "pk" else current._meta.get_field(name)
        except FieldDoesNotExist:
            return None  # a transform or a lookup such as __iexact: compared as text
        if index == len(names) - 1:
            return field if isinstance(field, models.Field) and field.concrete else None
        if not field.is_relation or field.many_to_many or field.one_to_many or field.related_model is None:
            return None
        current = field.related_model
    return None


def _resolve(obj: models.Model, lookup: str) -> Any:
    value: Any = obj
    for attr in lookup.split("__"):
        value = getattr(value, attr)
    return value


@dataclass
class Completion:
    """What a ``complete`` hook may return: ``values`` (at most 100 are sent), the ``total`` number of matching
    values when it is known, and whether more exist than ``values`` holds."""

    values: list[str]
    total: int | None = None
    has_more: bool = False


class ResourceRepository(ResourceTemplate):
    """A template whose resources come from an external pager that continues with an opaque token of its own (an
    object store, a search or HTTP API, another service); docs/resources.md, "Repositories".

    Implement :meth:`list_page` and :meth:`read`, and register the class like any template. Its ``uri_template``
    routes reads (with ``parse_uri``, ``canonical_uri`` and ``resolve_uri`` as for every template) and describes
    the listed URIs; :meth:`cache_control` gives the hint of its listing and reads. A repository is a listing
    source: protected and discoverable (``mcp_resources.E013``), listed after the static resources in registration
    order, under the page size, byte and prefix limits of every source. It is keyed by the caller unless it declares
    ``shared = True``; only a shared repository may declare a ``"public"`` hint (``mcp_resources.E036``).
    """

    def list_page(
        self, request: HttpRequest, *, token: str | bytes | None, limit: int, prefix: str, deadline: float
    ) -> Any:
        """Return one batch of the pager: a :class:`RepositoryPage` (or a pair ``(resources, next_token)``).

        ``token`` is ``None`` for the first batch, then a ``next_token`` this method returned, given back
        unchanged (it travels sealed in the client's cursor); ``next_token`` is ``None`` (or empty) after the last
        batch, else a ``str`` or ``bytes`` of at most 1,024 bytes. ``limit`` is how many entries the page has room
        for (a hint: a longer batch is cut and resumed), ``prefix`` the requested URI prefix (entries outside it
        are dropped), ``deadline`` a ``time.monotonic()`` value to stop backend work by. Each resource holds
        ``uri`` (of this template, in its one spelling) and ``name``, and may hold ``title``, ``description``,
        ``mimeType``, ``size``, ``annotations`` and ``icons``. Raise
        :class:`~mcp_resources.exceptions.PageTokenRejected` when the pager refuses ``token``; any other exception
        is an upstream failure (a generic error for the client, the detail in the log).
        """
        raise NotImplementedError

    @property
    def lists_instances(self) -> bool:
        return type(self).list_page is not ResourceRepository.list_page

    @property
    def per_caller(self) -> bool:
        """A repository is keyed by the caller unless it declares ``shared = True`` (the same pages and contents for
        every caller who may access it, like the demo's handbook)."""
        return self.access != PUBLIC and not self.shared


@dataclass
class RepositoryPage:
    """What a repository's ``list_page`` returns: ``resources`` (dicts) and the pager's ``next_token``."""

    resources: list[dict[str, Any]]
    next_token: str | bytes | None = None


ResourceGetter = Callable[[], Any]


@dataclass
class InventoryPage:
    """What a ``list`` callback returns: ``entries`` of ``(key, resource)`` and whether more exist."""

    entries: list[tuple[str, dict[str, Any]]]
    has_more: bool = False


@dataclass(eq=False)
class RegisteredResource:
    """A concrete resource registered from code with :func:`mcp_resources.register_resource`.

    ``get`` is called on every read (reads are always live) and returns a str, bytes, a contents dict or a list
    of them.
    """

    uri: str
    name: str
    get: ResourceGetter
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    access: str = PUBLIC
    required_scopes: tuple[str, ...] = ()
    subscribe: Callable[[Callable[[], None]], Callable[[], None] | None] | None = None
    size: int | None = None
    cache_control: CacheHint | None = None
    annotations: dict[str, Any] | None = None
    icons: list[dict[str, Any]] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    live: Any = field(default=None, repr=False)

    @property
    def scopes(self) -> tuple[str, ...]:
        return tuple(self.required_scopes)

    def get_cache_hint(self) -> CacheHint | None:
        """The declared cache hint (``None``: nothing is cached)."""
        return self.cache_control

    def get_descriptor(self) -> dict[str, Any]:
        """The ``Resource`` object announced in ``resources/list``."""
        descriptor: dict[str, Any] = {"uri": self.uri, "name": self.name}
        if self.title:
            descriptor["title"] = self.title
        if self.description:
            descriptor["description"] = self.description
        if self.mime_type:
            descriptor["mimeType"] = self.mime_type
        if self.size is not None:
            descriptor["size"] = self.size
        if self.annotations:
            descriptor["annotations"] = dict(self.annotations)
        if self.icons:
            descriptor["icons"] = [dict(icon) for icon in self.icons]
        return descriptor

    def read(self, request: HttpRequest) -> Any:
        return self.get()
