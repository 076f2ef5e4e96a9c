"""Shared helpers for the inventory suites: call contexts, page walks and the templates the tests register.

Everything here drives the real server core (``MCPServer.call``) over real registries, models and users; there
are no mocks. Templates are declared here (not in the demo's registry) so each test builds the registry it needs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any, ClassVar

import pytest
from django.contrib.auth.models import AnonymousUser
from django.db.models import QuerySet
from django.http import HttpRequest
from django.test import RequestFactory

from mcp_resources.exceptions import INTERNAL_ERROR, INVALID_PARAMS, MCPError, ResourceNotFound
from mcp_resources.principal import Principal
from mcp_resources.protocol.versions import V2026_07_28
from mcp_resources.registries import ResourceRegistry
from mcp_resources.resources import ModelResourceTemplate, ResourceTemplate
from mcp_resources.server import CallContext, MCPServer
from testproject.library.models import Document, Note, Ticket

SCOPE = "documents:read"
CLIENT = "test-client"
_DEFAULT: Any = object()


# Call contexts -------------------------------------------------------------------------------------------


def principal_for(
    user: Any = None,
    *,
    scopes: Iterable[str] = (SCOPE,),
    client_id: str | None = CLIENT,
    audience: Iterable[str] = ("http://testserver/mcp",),
    subject: Any = _DEFAULT,
) -> Principal:
    """An authenticated principal for ``user`` (``subject=None`` models a client-credentials token)."""
    if subject is _DEFAULT:
        subject = str(user.pk) if user is not None else None
    return Principal(
        subject=subject,
        client_id=client_id,
        scopes=frozenset(scopes),
        audience=tuple(audience),
        authenticated=True,
    )


def context(
    user: Any = None, *, principal: Principal | None = None, version: str = V2026_07_28, **principal_kwargs: Any
) -> CallContext:
    """A call context whose request carries ``request.user`` and ``request.mcp_principal`` like the transport's."""
    request = RequestFactory().post("/mcp")
    request.user = user if user is not None else AnonymousUser()
    if principal is None:
        principal = principal_for(user, **principal_kwargs) if user is not None else Principal()
    request.mcp_principal = principal  # type: ignore[attr-defined]
    return CallContext(request, version, principal)


def anonymous(version: str = V2026_07_28) -> CallContext:
    return context(None, version=version)


# Calls ---------------------------------------------------------------------------------------------------


def list_page(server: MCPServer, ctx: CallContext, **params: Any) -> dict[str, Any]:
    return server.call("resources/list", {k: v for k, v in params.items() if v is not None}, ctx)


def walk(
    server: MCPServer,
    ctx: CallContext | Callable[[], CallContext],
    *,
    prefix: str | None = None,
    max_pages: int = 1000,
    between: Callable[[int, dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Every page of one traversal (each page's result); ``between(index, page)`` runs after each page."""
    pages: list[dict[str, Any]] = []
    cursor = None
    for index in range(max_pages):
        current = ctx() if callable(ctx) else ctx
        page = list_page(server, current, prefix=prefix, cursor=cursor)
        pages.append(page)
        if between is not None:
            between(index, page)
        cursor = page.get("nextCursor")
        if cursor is None:
            return pages
    raise AssertionError(f"the traversal did not end within {max_pages} pages")


def uris(pages: Iterable[dict[str, Any]]) -> list[str]:
    return [resource["uri"] for page in pages for resource in page["resources"]]


def rpc_error(call: Callable[[], Any]) -> MCPError:
    """Run ``call``; it must fail with a protocol error, which is returned."""
    with pytest.raises(MCPError) as info:
        call()
    return info.value


INVALID_CURSOR_DATA = {
    "detail": "The cursor may come from another server process or from an expired traversal: "
    "list again without a cursor."
}
"""``error.data`` of every refused cursor, whatever the cause (written out: the wire text is the contract)."""


def assert_invalid_cursor(call: Callable[[], Any]) -> None:
    error = rpc_error(call)
    assert (error.code, error.message, error.data) == (INVALID_PARAMS, "Invalid cursor", INVALID_CURSOR_DATA)


def assert_generic_internal_error(call: Callable[[], Any], message: str = "Internal error") -> None:
    error = rpc_error(call)
    assert (error.code, error.message, error.data) == (INTERNAL_ERROR, message, None)


def assert_cut_by_the_deadline(call: Callable[[], Any]) -> None:
    """``call`` (a listing whose query sleeps a second, under a 0.2 s deadline) fails with the generic internal
    error because PostgreSQL cancelled the query at its statement timeout: a query left to finish would end past
    the deadline, which answers "Request timed out" instead."""
    from psycopg.errors import QueryCanceled

    error = rpc_error(call)
    assert (error.code, error.message, error.data) == (INTERNAL_ERROR, "Internal error", None)
    causes = []
    cause: BaseException | None = error
    while cause is not None:
        causes.append(cause)
        cause = cause.__cause__ or cause.__context__
    assert any(isinstance(cause, QueryCanceled) for cause in causes), causes


def configure(settings: Any, **values: Any) -> None:
    """Set ``MCP_RESOURCES`` keys through pytest-django's ``settings`` fixture (restored after the test)."""
    settings.MCP_RESOURCES = {**(getattr(settings, "MCP_RESOURCES", None) or {}), **values}


# Expected inventories ------------------------------------------------------------------------------------


def document_uri(doc: Document | int) -> str:
    return f"learn://documents/{doc if isinstance(doc, int) else doc.pk}"


def note_uri(note: Note | int) -> str:
    return f"learn://notes/{note if isinstance(note, int) else note.pk}"


def expected_documents(owner: Any) -> list[str]:
    """The owner's live documents in the listing order: (created, id)."""
    docs = Document.objects.filter(owner=owner, deleted_at__isnull=True)
    return [document_uri(d) for d in sorted(docs, key=lambda d: (d.created, d.pk))]


def handbook_uris() -> list[str]:
    """The demo's handbook pages (its repository, listed after the notes, the same for every reader)."""
    from testproject.library.handbook import DirectoryPager

    return [f"handbook://pages/{name.removesuffix('.md')}" for name in DirectoryPager().names()]


def expected_notes(owner: Any) -> list[str]:
    """The owner's notes in the listing order: title in byte (code point) order, then id."""
    notes = Note.objects.filter(owner=owner)
    return [note_uri(n) for n in sorted(notes, key=lambda n: (n.title.encode(), n.pk))]


# Templates -----------------------------------------------------------------------------------------------


class DocumentSource(ModelResourceTemplate):
    model = Document
    name = "documents"
    uri_template = "learn://documents/{id}"
    mime_type = "text/plain"
    required_scopes = (SCOPE,)
    ordering = ("created", "id")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Document]:
        return Document.objects.filter(owner_id=request.user.pk, deleted_at__isnull=True)

    def get_contents(self, request: HttpRequest, obj: Any) -> Any:
        return obj.body


class DeclaredDocumentSource(DocumentSource):
    """``DocumentSource`` with its scope declared (``owner_field``) instead of computed, listed from value rows."""

    name_field = "title"
    queryset = Document.objects.filter(deleted_at__isnull=True)
    owner_field = "owner"
    get_queryset = ModelResourceTemplate.get_queryset  # the base: it serves the declared scope


class NoteSource(ModelResourceTemplate):
    model = Note
    name = "notes"
    uri_template = "learn://notes/{id}"
    mime_type = "text/markdown"
    required_scopes = (SCOPE,)
    ordering = ("title", "id")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Note]:
        return Note.objects.filter(owner_id=request.user.pk)

    def get_contents(self, request: HttpRequest, obj: Any) -> Any:
        return obj.text


class TicketSource(ModelResourceTemplate):
    """Tickets of the projects the caller is a member of: ``owner_field`` through a many-to-many."""

    model = Ticket
    name = "tickets"
    uri_template = "learn://tickets/{id}"
    mime_type = "text/plain"
    required_scopes = (SCOPE,)
    ordering = ("created", "id")
    name_field = "title"
    owner_field = "project__members"

    def get_contents(self, request: HttpRequest, obj: Any) -> Any:
        return obj.body


class TeamTicketSource(TicketSource):
    """Tickets of the projects of the caller's teams: a forward foreign key, then a reverse one (memberships)."""

    name = "team-tickets"
    uri_template = "learn://team-tickets/{id}"
    owner_field = "project__team__memberships__user"


def computed(template: type[ModelResourceTemplate]) -> type[ModelResourceTemplate]:
    """The reference for a declared scope: the same template, its scope computed by an overridden ``get_queryset``
    that filters on the plain join and keeps each row once with ``pk__in`` (another way to write the semi-join),
    and so listed through the ORM, never through the compiled query."""
    path = template.owner_field
    assert path is not None

    def get_queryset(self: ModelResourceTemplate, request: HttpRequest) -> QuerySet[Any]:
        assert self.model is not None
        joined = self.base_queryset().filter(**{path: request.user.pk})
        return self.model._default_manager.filter(pk__in=joined.values("pk"))

    return type(f"Computed{template.__name__}", (template,), {"owner_field": None, "get_queryset": get_queryset})


def ticket_uri(ticket: Ticket | int, template: type[ModelResourceTemplate] = TicketSource) -> str:
    return template.uri_template.replace("{id}", str(ticket if isinstance(ticket, int) else ticket.pk))


def expected_tickets(user: Any, template: type[ModelResourceTemplate] = TicketSource) -> list[str]:
    """The tickets ``template`` lists for ``user``, each once, in the listing order: (created, id)."""
    path = template.owner_field
    assert path is not None
    tickets = {t.pk: t for t in Ticket.objects.filter(**{path: user.pk})}
    return [ticket_uri(t, template) for t in sorted(tickets.values(), key=lambda t: (t.created, t.pk))]


class GenericSource(ResourceTemplate):
    """A generic ``list()`` source over an in-memory collection; records every call it receives.

    Subclasses set ``items`` (``(key, resource)`` pairs in any order) or override :meth:`produce` to return
    exactly what the test wants the callback to return.
    """

    name = "things"
    uri_template = "learn://things/{id}"
    required_scopes = (SCOPE,)
    items: ClassVar[list[tuple[str, dict[str, Any]]]] = []
    delay: ClassVar[float] = 0.0

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[dict[str, Any]] = []

    def list(self, request: HttpRequest, *, after: str | None, limit: int, prefix: str, deadline: float) -> Any:
        self.calls.append(
            {
                "after": after,
                "limit": limit,
                "prefix": prefix,
                "deadline": deadline,
                "principal": getattr(request, "mcp_principal", None),
                "at": time.monotonic(),
            }
        )
        if self.delay:
            time.sleep(self.delay)
        return self.produce(after=after, limit=limit, prefix=prefix)

    def produce(self, *, after: str | None, limit: int, prefix: str) -> Any:
        rows = sorted(self.items, key=lambda item: item[0].encode())
        rows = [
            (key, resource)
            for key, resource in rows
            if (after is None or key.encode() > after.encode()) and resource["uri"].startswith(prefix)
        ]
        return rows[:limit], len(rows) > limit

    def read(self, request: HttpRequest, uri: str, variables: Any) -> Any:
        return f"thing {variables['id']}"


class MineSource(GenericSource):
    """A generic source over the caller's documents, owned by ``principal.subject`` (zero-padded id keys)."""

    name = "mine"
    uri_template = "learn://mine/{id}"

    def produce(self, *, after: str | None, limit: int, prefix: str) -> Any:
        raise AssertionError("list() is overridden")

    def list(self, request: HttpRequest, *, after: str | None, limit: int, prefix: str, deadline: float) -> Any:
        principal = request.mcp_principal  # type: ignore[attr-defined]
        if not principal.subject:
            raise AssertionError("a verified subject is required")
        rows = Document.objects.filter(owner_id=int(principal.subject), deleted_at__isnull=True).order_by("id")
        if after is not None:
            rows = rows.filter(id__gt=int(after))
        entries = [(f"{d.pk:012d}", {"uri": f"learn://mine/{d.pk:012d}", "name": d.title}) for d in rows]
        entries = [(k, r) for k, r in entries if r["uri"].startswith(prefix)]
        return entries[:limit], len(entries) > limit

    def read(self, request: HttpRequest, uri: str, variables: Any) -> Any:
        principal = request.mcp_principal  # type: ignore[attr-defined]
        try:
            return Document.objects.get(pk=int(variables["id"]), owner_id=int(principal.subject or 0)).body
        except (Document.DoesNotExist, ValueError) as exc:
            raise ResourceNotFound() from exc


def thing(key: str, **extra: Any) -> tuple[str, dict[str, Any]]:
    return key, {"uri": f"learn://things/{key}", "name": f"Thing {key}", **extra}


def server_for(*templates: type[ResourceTemplate], name: str = "tests") -> MCPServer:
    """A server over a fresh registry holding ``templates`` in this order."""
    registry = ResourceRegistry(name)
    for template in templates:
        registry.register(template)
    return MCPServer(registry)


def source(server: MCPServer, name: str) -> Any:
    template = server.registry.get_template(name)
    assert template is not None
    return template
