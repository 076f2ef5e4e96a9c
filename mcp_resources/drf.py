"""Django REST framework as a source of resources: serializers for contents, viewsets for whole templates.

Install the ``drf`` extra (``pip install "django-mcp-resources[drf]"``). REST framework is imported only when a
template of this module serves a request, so importing the package (and this module) works without it.

- :class:`SerializerResourceTemplate`: a :class:`~mcp_resources.ModelResourceTemplate` whose reads answer
  ``serializer_class``'s data as ``application/json``, with the request in the serializer's context.
- :class:`ViewSetResourceTemplate` (or :func:`from_viewset`): a template declared from an existing
  ``GenericViewSet``/``ModelViewSet``: its ``get_queryset()`` (through ``filter_queryset()``), its serializer, its
  ``lookup_field``, its ``permission_classes``, versioning, content negotiation and throttles (everything of
  ``APIView.initial()`` but authentication). The permissions are evaluated for the MCP caller as for a ``GET`` of
  the REST API: ``has_permission`` for listings, completions and reads (the ``list`` and ``retrieve`` actions),
  ``has_object_permission`` for reads (``get_object()``) and for every record a listing or a completion offers. A
  denial answers what a missing record answers: nothing listed or completed, not found on read.

The MCP caller reaches REST framework as a ``rest_framework.request.Request`` around a ``GET`` copy of the Django
request with no query parameters, no body and ``Accept: application/json``, built once per request and only when a
serializer or a viewset needs it: ``request.user`` is the caller's user and ``request.auth`` its
:class:`~mcp_resources.Principal` with the interface of django-oauth-toolkit's access tokens (``scope``,
``is_valid()``, ``allow_scopes()``, ``is_expired()``), so permission classes such as
``oauth2_provider.contrib.rest_framework.TokenHasScope`` decide on the scopes the MCP endpoint validated.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from django.core.exceptions import ImproperlyConfigured, ObjectDoesNotExist, ValidationError
from django.db import models
from django.http import Http404, QueryDict

from mcp_resources.exceptions import RequestThrottled, ResourceNotFound, TemplateError
from mcp_resources.principal import Principal
from mcp_resources.protocol.uris import compile_template
from mcp_resources.resources import ModelResourceTemplate

if TYPE_CHECKING:
    from django.http import HttpRequest

_DRF_REQUEST = "_mcp_drf_request"
"""The Django request attribute holding the REST framework request built for it."""
_THROTTLED = "_mcp_drf_throttled"
"""The Django request attribute holding the (template, action) pairs whose throttles this request has counted."""
LIST = "list"
RETRIEVE = "retrieve"


class TokenPrincipal(Principal):
    """A :class:`~mcp_resources.Principal` that answers like a django-oauth-toolkit access token.

    REST framework's ``request.auth`` for an MCP caller. The scopes are those the MCP endpoint validated (expanded
    by ``SCOPE_HIERARCHY``); the expiry is the token's.
    """

    @property
    def scope(self) -> str:
        return " ".join(sorted(self.scopes))

    def is_expired(self) -> bool:
        return self.expires_at is not None and time.time() >= self.expires_at

    def allow_scopes(self, scopes: Iterable[str] | None) -> bool:
        return not scopes or set(scopes) <= self.scopes

    def is_valid(self, scopes: Iterable[str] | None = None) -> bool:
        return self.authenticated and not self.is_expired() and self.allow_scopes(scopes)


def token_principal(principal: Principal | None) -> TokenPrincipal | None:
    """``principal`` as :class:`TokenPrincipal`; ``None`` for an anonymous caller (no token, as in REST framework)."""
    if principal is None or not principal.authenticated:
        return None
    if isinstance(principal, TokenPrincipal):
        return principal
    return TokenPrincipal(**{f.name: getattr(principal, f.name) for f in dataclasses.fields(principal)})


def drf_request(request: HttpRequest) -> Any:
    """The ``rest_framework.request.Request`` of the MCP caller of ``request``, built once per request.

    It wraps a ``GET`` copy of ``request`` (permission classes decide on safe methods; the MCP request itself is a
    ``POST``), with the caller's user and :class:`TokenPrincipal` set: REST framework's authenticators never run.
    The copy has no query parameters (the MCP URL's query string is not the viewset's), no body and
    ``Accept: application/json`` (what a read answers).
    """
    built = getattr(request, _DRF_REQUEST, None)
    if built is not None:
        return built
    try:
        from rest_framework.request import Request
    except ImportError as exc:  # pragma: no cover - exercised by tests/test_drf.py in a process without DRF
        raise ImproperlyConfigured(
            'This template needs Django REST framework: pip install "django-mcp-resources[drf]"'
        ) from exc
    from django.contrib.auth.models import AnonymousUser

    clone = copy.copy(request)
    clone.method = "GET"
    meta = {**request.META, "REQUEST_METHOD": "GET", "QUERY_STRING": "", "HTTP_ACCEPT": "application/json"}
    for body_header in ("CONTENT_TYPE", "CONTENT_LENGTH"):
        meta.pop(body_header, None)
    clone.META = meta
    clone.GET = QueryDict()
    clone.POST = QueryDict()
    built = Request(clone)
    built.user = getattr(request, "user", None) or AnonymousUser()
    built.auth = token_principal(getattr(request, "mcp_principal", None))
    setattr(request, _DRF_REQUEST, built)
    return built


def render_json(data: Any) -> str:
    """``data`` as REST framework's ``JSONRenderer`` renders a response body (the same bytes, as text)."""
    from rest_framework.renderers import JSONRenderer

    return JSONRenderer().render(data).decode("utf-8")


class SerializerResourceTemplate(ModelResourceTemplate):
    """A model template whose reads answer ``serializer_class(obj).data`` as JSON (``application/json``).

    The serializer's context holds the REST framework request of the caller (``request``), as in a view.
    Everything else (scope, listing, lookups) is :class:`~mcp_resources.ModelResourceTemplate`'s.
    """

    serializer_class: ClassVar[Any] = None
    mime_type: ClassVar[str | None] = "application/json"

    def get_serializer_context(self, request: HttpRequest) -> dict[str, Any]:
        """The serializer's context: ``{"request": <REST framework request>, "format": None, "view": None}``."""
        return {"request": drf_request(request), "format": None, "view": None}

    def get_serializer(self, request: HttpRequest, obj: models.Model) -> Any:
        if self.serializer_class is None:
            raise ImproperlyConfigured(f"{type(self).__name__} needs a serializer_class")
        return self.serializer_class(obj, context=self.get_serializer_context(request))

    def get_contents(self, request: HttpRequest, obj: models.Model) -> Any:
        return render_json(self.get_serializer(request, obj).data)


class ViewSetResourceTemplate(SerializerResourceTemplate):
    """A template declared from a REST framework ``GenericViewSet`` (``viewset``): the viewset decides.

    Derived from the viewset unless set on the class: ``model`` (its ``queryset``'s, else its serializer's
    ``Meta.model``), ``lookup_fields`` (the URI variable named like its ``lookup_url_kwarg`` or ``lookup_field``,
    looked up on ``lookup_field``) and ``required_scopes`` (its ``required_scopes``, as ``TokenHasScope`` reads
    them). ``uri_template`` holds exactly the variables of ``lookup_fields``, one of which is the viewset's own
    lookup; others (``crm://orgs/{org}/customers/{slug}``) are declared in ``lookup_fields`` too
    (``{"org": "organization__slug", "slug": "slug"}``) and reach the viewset as URL keyword arguments.

    Each action runs what ``APIView.initial()`` runs but authentication: content negotiation, versioning,
    ``check_permissions()`` and the throttles (counted once per MCP request and action). Listings and completions
    read ``filter_queryset(get_queryset())`` of the ``list`` action, and offer only the records that the
    ``retrieve`` action's permissions allow (``check_permissions()`` and ``check_object_permissions()``, record by
    record: ``object_permissions``); reads call ``get_object()`` of the ``retrieve`` action with every URI variable
    applied, and render ``get_serializer(obj).data``. A denied permission lists nothing and reads not found.
    """

    viewset: ClassVar[type[Any] | None] = None
    object_permissions: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        viewset = cls.viewset
        if viewset is None:
            return
        if "model" not in cls.__dict__:
            cls.model = viewset_model(viewset) or cls.model
        own = lookup_kwarg(viewset)
        if "lookup_fields" not in cls.__dict__:
            cls.lookup_fields = {own: viewset.lookup_field}
        lookups = dict(cls.lookup_fields or {})
        if lookups.get(own) != viewset.lookup_field:
            raise ImproperlyConfigured(
                f"{cls.__name__}: lookup_fields {lookups!r} must map the viewset's URL keyword argument {own!r} to "
                f"its lookup_field {viewset.lookup_field!r}: get_object() looks the record up so"
            )
        if "required_scopes" not in cls.__dict__ and getattr(viewset, "required_scopes", None) is not None:
            cls.required_scopes = tuple(viewset.required_scopes)
        if cls.uri_template:
            try:
                variables = compile_template(cls.uri_template).variables
            except TemplateError:
                return  # reported by the system checks, with every other invalid template
            if set(variables) != set(lookups):
                raise ImproperlyConfigured(
                    f"{cls.__name__}: uri_template {cls.uri_template!r} must hold exactly the variables "
                    f"{sorted(lookups)} of the viewset's lookup (declare the others in lookup_fields)"
                )

    def get_view(self, request: HttpRequest, action: str, **kwargs: Any) -> Any:
        """An instance of ``viewset`` set up for ``action`` (``"list"`` or ``"retrieve"``) of a ``GET`` by the MCP
        caller of ``request``, as REST framework's router would set it up; :meth:`initial` has not run yet."""
        assert self.viewset is not None, f"{type(self).__name__} needs a viewset"
        view = self.viewset()
        view.request = drf_request(request)
        view.args = ()
        view.kwargs = kwargs
        view.format_kwarg = None
        view.action = action
        view.action_map = {"get": action}
        view.detail = action == RETRIEVE
        view.headers = {}
        return view

    def initial(self, request: HttpRequest, view: Any, *, throttle: bool = True) -> None:
        """What REST framework's ``APIView.initial()`` runs before a handler, but authentication (the MCP endpoint
        authenticated the caller): the format suffix, content negotiation (the copy accepts JSON; a viewset
        without a JSON renderer gets its first one, as ``force=True`` gives it), versioning (``request.version``,
        ``request.versioning_scheme``), ``check_permissions()`` and, when ``throttle``, ``check_throttles()``:
        once per MCP request and action (a traversal reads a template several times, a stream re-checks access
        on every change). Raises REST framework's exceptions; a throttle's refusal as
        :class:`~mcp_resources.exceptions.RequestThrottled`."""
        from rest_framework.exceptions import Throttled

        drf = view.request
        view.format_kwarg = view.get_format_suffix(**view.kwargs)
        drf.accepted_renderer, drf.accepted_media_type = view.perform_content_negotiation(drf, force=True)
        drf.version, drf.versioning_scheme = view.determine_version(drf, *view.args, **view.kwargs)
        view.check_permissions(drf)
        if throttle:
            counted: set[tuple[int, str]] = request.__dict__.setdefault(_THROTTLED, set())
            if (id(self), view.action) not in counted:
                counted.add((id(self), view.action))
                try:
                    view.check_throttles(drf)
                except Throttled as exc:
                    wait = None if exc.wait is None else max(1, int(exc.wait))
                    raise RequestThrottled(data=None if wait is None else {"retryAfter": wait}) from exc

    def get_queryset(self, request: HttpRequest) -> models.QuerySet[Any]:
        """The viewset's ``filter_queryset(get_queryset())`` for the ``list`` action after :meth:`initial`; none
        when it denies (or its versioning finds no version)."""
        assert self.model is not None
        view = self.get_view(request, LIST)
        try:
            self.initial(request, view)
        except denials():
            return self.model._default_manager.none()
        queryset: models.QuerySet[Any] = view.filter_queryset(view.get_queryset())
        return queryset

    def has_object_permission(self, request: HttpRequest, obj: models.Model) -> bool:
        """Whether the ``retrieve`` action would answer ``obj``: its permissions' ``has_permission`` and
        ``has_object_permission`` (``check_permissions()``, ``check_object_permissions()``), with the record's URI
        variables as URL keyword arguments; no throttle is counted (the listing or completion counted its own)."""
        return self.has_object_permissions(request, [obj])[0]

    def has_object_permissions(self, request: HttpRequest, objs: Sequence[models.Model]) -> list[bool]:
        """:meth:`has_object_permission` for each of ``objs``: one ``retrieve`` view, set up and checked
        (:meth:`initial`, no throttle) once for the batch, then ``check_object_permissions()`` for each record with
        its URI variables as the view's URL keyword arguments."""
        if not objs:
            return []
        view = self.get_view(request, RETRIEVE, **self.uri_variables(objs[0]))
        try:
            self.initial(request, view, throttle=False)
        except denials():
            return [False] * len(objs)
        answers = []
        for obj in objs:
            view.kwargs = self.uri_variables(obj)
            try:
                view.check_object_permissions(view.request, obj)
            except denials():
                answers.append(False)
            else:
                answers.append(True)
        return answers

    def uri_variables(self, obj: models.Model) -> dict[str, Any]:
        """The URI variables of ``obj`` (each lookup's value), as the viewset's URL keyword arguments."""
        return {name: _resolve(obj, field) for name, field in self.get_lookups().items()}

    def retrieve(self, request: HttpRequest, variables: Mapping[str, Any]) -> tuple[Any, models.Model]:
        """The viewset (``retrieve`` action) and its ``get_object()`` for ``variables``; ``ResourceNotFound`` for a
        missing record and for any denial.

        Every URI variable reaches the viewset as a URL keyword argument, and those other than the viewset's own
        lookup also filter its queryset (:class:`URIVariablesFilter`, after its own filter backends): a URI that
        names another organization finds nothing. A record whose own URI is not the one read (a ``get_object()``
        override that ignores a variable) is not found either: one URI per record.
        """
        lookups = self.get_lookups()
        kwargs = {name: variables[name] for name in lookups}
        if any(isinstance(value, str) and "\x00" in value for value in kwargs.values()):
            raise ResourceNotFound()  # a NUL names no row, and PostgreSQL refuses to compare it
        view = self.get_view(request, RETRIEVE, **kwargs)
        others = {lookups[name]: kwargs[name] for name in lookups if name != lookup_kwarg(view)}
        if others:
            view.filter_backends = [*view.filter_backends, URIVariablesFilter]
            view.mcp_uri_lookups = others
        try:
            self.initial(request, view)
            obj = view.get_object()
        except (ObjectDoesNotExist, ValidationError) as exc:
            raise ResourceNotFound() from exc
        except denials() as exc:
            raise ResourceNotFound() from exc
        if others and self.get_uri(obj) != self.canonical_uri(kwargs):
            raise ResourceNotFound()
        return view, obj

    def get_object(self, request: HttpRequest, variables: Mapping[str, Any]) -> models.Model:
        return self.retrieve(request, variables)[1]

    def read(self, request: HttpRequest, uri: str, variables: Any) -> Any:
        view, obj = self.retrieve(request, variables)
        return render_json(view.get_serializer(obj).data)

    def get_contents(self, request: HttpRequest, obj: models.Model) -> Any:
        return render_json(self.get_view(request, RETRIEVE, **self.uri_variables(obj)).get_serializer(obj).data)


class URIVariablesFilter:
    """A REST framework filter backend that applies the URI variables other than the viewset's own lookup
    (``view.mcp_uri_lookups``, lookup to value) to the ``retrieve`` action's queryset, after the viewset's own
    filter backends: ``get_object()`` then looks the record up among the records those variables name."""

    def filter_queryset(self, request: Any, queryset: models.QuerySet[Any], view: Any) -> models.QuerySet[Any]:
        return queryset.filter(**view.mcp_uri_lookups)


def denials() -> tuple[type[Exception], ...]:
    """What REST framework raises for an answer the MCP caller gets as not found: a denied permission, a missing
    record, a version the viewset does not serve (404 or 406 in the REST API)."""
    from rest_framework.exceptions import NotAcceptable, NotAuthenticated, NotFound, PermissionDenied

    return (PermissionDenied, NotAuthenticated, NotFound, NotAcceptable, Http404)


def _resolve(obj: models.Model, lookup: str) -> Any:
    """The value of ``lookup`` (``a__b``) for ``obj``, through its related objects."""
    value: Any = obj
    for attr in lookup.split("__"):
        value = getattr(value, attr)
    return value


def lookup_kwarg(viewset: type[Any]) -> str:
    """The URL keyword argument of ``viewset``'s detail routes (``lookup_url_kwarg``, else ``lookup_field``)."""
    return str(getattr(viewset, "lookup_url_kwarg", None) or viewset.lookup_field)


def viewset_model(viewset: type[Any]) -> type[models.Model] | None:
    """The model of ``viewset``: its ``queryset``'s, else its ``serializer_class``'s ``Meta.model``."""
    queryset = getattr(viewset, "queryset", None)
    if queryset is not None:
        return queryset.model
    meta = getattr(getattr(viewset, "serializer_class", None), "Meta", None)
    return getattr(meta, "model", None)


def from_viewset(
    viewset: type[Any], *, name: str, uri_template: str, **attributes: Any
) -> type[ViewSetResourceTemplate]:
    """A :class:`ViewSetResourceTemplate` class for ``viewset``; register it with :func:`mcp_resources.register`::

        register(from_viewset(BookmarkViewSet, name="bookmarks", uri_template="learn://bookmarks/{slug}"))

    ``attributes`` set any other template attribute (``title``, ``required_scopes``, ``ordering``, ...).
    """
    namespace = {"viewset": viewset, "name": name, "uri_template": uri_template, **attributes}
    namespace.setdefault("__module__", getattr(viewset, "__module__", __name__))
    return type(f"{viewset.__name__}Template", (ViewSetResourceTemplate,), namespace)
