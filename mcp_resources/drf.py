"""Django REST framework as a source of resources: serializers for contents, viewsets for whole templates.

Install the ``drf`` extra (``pip install "django-mcp-resources[drf]"``). REST framework is imported only when a
template of this module serves a request, so importing the package (and this module) works without it.

- :class:`SerializerResourceTemplate`: a :class:`~mcp_resources.ModelResourceTemplate` whose reads answer
  ``serializer_class``'s data as ``application/json``, with the request in the serializer's context.
- :class:`ViewSetResourceTemplate` (or :func:`from_viewset`): a template declared from an existing
  ``GenericViewSet``/``ModelViewSet``: its ``get_queryset()`` (through ``filter_queryset()``), its serializer, its
  ``lookup_field`` and its ``permission_classes``. The permissions are evaluated for the MCP caller as for a
  ``GET`` of the REST API: ``has_permission`` for listings, completions and reads (the ``list`` and ``retrieve``
  actions), ``has_object_permission`` for reads (``get_object()``). A denial answers what a missing record
  answers: nothing listed, not found on read.

The MCP caller reaches REST framework as a ``rest_framework.request.Request`` around a ``GET`` copy of the Django
request, built once per request and only when a serializer or a viewset needs it: ``request.user`` is the caller's
user and ``request.auth`` its :class:`~mcp_resources.Principal` with the interface of django-oauth-toolkit's access
tokens (``scope``, ``is_valid()``, ``allow_scopes()``, ``is_expired()``), so permission classes such as
``oauth2_provider.contrib.rest_framework.TokenHasScope`` decide on the scopes the MCP endpoint validated.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from django.core.exceptions import ImproperlyConfigured, ObjectDoesNotExist, ValidationError
from django.db import models
from django.http import Http404

from mcp_resources.exceptions import ResourceNotFound, TemplateError
from mcp_resources.principal import Principal
from mcp_resources.protocol.uris import compile_template
from mcp_resources.resources import ModelResourceTemplate

if TYPE_CHECKING:
    from django.http import HttpRequest

_DRF_REQUEST = "_mcp_drf_request"
"""The Django request attribute holding the REST framework request built for it."""
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
    clone.META = {**request.META, "REQUEST_METHOD": "GET"}
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
    them). ``uri_template`` must hold exactly that one variable.

    Listings and completions read ``filter_queryset(get_queryset())`` of the ``list`` action after
    ``check_permissions()``; reads call ``get_object()`` of the ``retrieve`` action (which checks the object
    permissions) and render ``get_serializer(obj).data``. A denied permission lists nothing and reads not found.
    """

    viewset: ClassVar[type[Any] | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        viewset = cls.viewset
        if viewset is None:
            return
        if "model" not in cls.__dict__:
            cls.model = viewset_model(viewset) or cls.model
        if "lookup_fields" not in cls.__dict__:
            cls.lookup_fields = {lookup_kwarg(viewset): viewset.lookup_field}
        if "required_scopes" not in cls.__dict__ and getattr(viewset, "required_scopes", None) is not None:
            cls.required_scopes = tuple(viewset.required_scopes)
        if cls.uri_template:
            try:
                variables = compile_template(cls.uri_template).variables
            except TemplateError:
                return  # reported by the system checks, with every other invalid template
            if set(variables) != set(cls.lookup_fields or {}):
                raise ImproperlyConfigured(
                    f"{cls.__name__}: uri_template {cls.uri_template!r} must hold exactly the variables "
                    f"{sorted(cls.lookup_fields or {})} of the viewset's lookup"
                )

    def get_view(self, request: HttpRequest, action: str, **kwargs: Any) -> Any:
        """An instance of ``viewset`` set up for ``action`` (``"list"`` or ``"retrieve"``) of a ``GET`` by the MCP
        caller of ``request``, as REST framework's router would set it up (no authenticators, no throttles)."""
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

    def get_queryset(self, request: HttpRequest) -> models.QuerySet[Any]:
        """The viewset's ``filter_queryset(get_queryset())`` for the ``list`` action; none when it denies."""
        from rest_framework.exceptions import NotAuthenticated, PermissionDenied

        assert self.model is not None
        view = self.get_view(request, LIST)
        try:
            view.check_permissions(view.request)
        except (PermissionDenied, NotAuthenticated):
            return self.model._default_manager.none()
        queryset: models.QuerySet[Any] = view.filter_queryset(view.get_queryset())
        return queryset

    def retrieve(self, request: HttpRequest, variables: Mapping[str, Any]) -> tuple[Any, models.Model]:
        """The viewset (``retrieve`` action) and its ``get_object()`` for ``variables``; ``ResourceNotFound`` for a
        missing record and for any denial."""
        from rest_framework.exceptions import NotAuthenticated, NotFound, PermissionDenied

        kwargs = {name: variables[name] for name in self.get_lookups()}
        if any(isinstance(value, str) and "\x00" in value for value in kwargs.values()):
            raise ResourceNotFound()  # a NUL names no row, and PostgreSQL refuses to compare it
        view = self.get_view(request, RETRIEVE, **kwargs)
        try:
            view.check_permissions(view.request)
            obj = view.get_object()
        except (Http404, NotFound, PermissionDenied, NotAuthenticated, ObjectDoesNotExist, ValidationError) as exc:
            raise ResourceNotFound() from exc
        return view, obj

    def get_object(self, request: HttpRequest, variables: Mapping[str, Any]) -> models.Model:
        return self.retrieve(request, variables)[1]

    def read(self, request: HttpRequest, uri: str, variables: Any) -> Any:
        view, obj = self.retrieve(request, variables)
        return render_json(view.get_serializer(obj).data)

    def get_contents(self, request: HttpRequest, obj: models.Model) -> Any:
        kwargs = {name: getattr(obj, field) for name, field in self.get_lookups().items()}
        return render_json(self.get_view(request, RETRIEVE, **kwargs).get_serializer(obj).data)


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
