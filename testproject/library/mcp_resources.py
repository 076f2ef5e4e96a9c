"""The demo's resource templates (autodiscovered like admin.py)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import HttpRequest

from mcp_resources import ModelResourceTemplate, ResourceNotFound, ResourceRepository, register
from mcp_resources.drf import from_viewset
from mcp_resources.exceptions import PageTokenRejected
from mcp_resources.resources import RepositoryPage
from testproject.library.api import BookmarkViewSet
from testproject.library.handbook import DirectoryPager, ExpiredToken
from testproject.library.models import Document, Note


@register
class DocumentResource(ModelResourceTemplate):
    model = Document
    name = "documents"
    uri_template = "learn://documents/{id}"
    title = "Documents"
    description = "The signed-in user's documents."
    mime_type = "text/plain"
    required_scopes = ("documents:read",)
    access = "protected"
    ordering = ("created", "id")
    name_field = "title"  # the listed name (Document.__str__ too): listings read no model instances
    # The caller's scope, declared: the live documents whose owner is request.user.
    queryset = Document.objects.filter(deleted_at__isnull=True)
    owner_field = "owner"

    def get_contents(self, request: HttpRequest, obj: Any) -> Any:
        return [{"text": obj.body}]


@register
class NoteResource(ModelResourceTemplate):
    model = Note
    name = "notes"
    uri_template = "learn://notes/{id}"
    title = "Notes"
    description = "The signed-in user's notes, listed after the documents."
    mime_type = "text/markdown"
    required_scopes = ("documents:read",)
    access = "protected"
    ordering = ("title", "id")
    name_field = "title"
    modified_field = "updated"  # listed as annotations.lastModified, read in the same page query

    def get_queryset(self, request: HttpRequest) -> QuerySet[Note]:
        return Note.objects.filter(owner_id=request.user.pk)

    def get_contents(self, request: HttpRequest, obj: Any) -> Any:
        return f"# {obj.title}\n\n{obj.text}\n"


# The REST API's bookmarks viewset, as MCP resources: its queryset, serializer (JSON contents), slug lookup and
# permissions (IsAuthenticated, TokenHasScope with documents:read; no object permissions, declared below). Listed
# in slug order, which the (owner, slug COLLATE "C") index serves, as it serves the completion of {slug}.
BookmarkResource = register(
    from_viewset(
        BookmarkViewSet,
        name="bookmarks",
        uri_template="learn://bookmarks/{slug}",
        title="Bookmarks",
        description="The signed-in user's bookmarks, as the REST API at /api/bookmarks/ serves them.",
        ordering=("slug",),
        name_field="title",
        # IsAuthenticated and TokenHasScope refuse no single bookmark: no per-record check, value rows are listed.
        object_permissions=False,
    )
)


@register
class HandbookRepository(ResourceRepository):
    """The handbook's pages (files shipped with the demo), the same for every reader, listed after the notes.

    The pager continues with an opaque token of its own; it travels sealed inside the client's cursor.
    """

    name = "handbook"
    uri_template = "handbook://pages/{page}"
    title = "Handbook"
    description = "The demo library's handbook, the same for every reader."
    mime_type = "text/markdown"
    required_scopes = ("documents:read",)
    shared = True  # every reader lists and reads the same pages: its public cache hint is allowed (E036)
    pager = DirectoryPager()

    def cache_control(self, request: HttpRequest) -> tuple[str, int]:
        return ("public", 60_000)  # the same pages for everyone, changed only by a deployment

    def list_page(
        self, request: HttpRequest, *, token: str | bytes | None, limit: int, prefix: str, deadline: float
    ) -> RepositoryPage:
        if token is not None and not isinstance(token, bytes):
            raise PageTokenRejected("not a token of this pager")
        try:
            files, next_token = self.pager.page(token, max_results=limit)
        except ExpiredToken as exc:
            raise PageTokenRejected(str(exc)) from None
        resources = [
            {
                "uri": self.compiled.expand({"page": file.name.removesuffix(".md")}),
                "name": file.name,
                "mimeType": "text/markdown",
                "size": file.size,
                "annotations": {"audience": ["user", "assistant"], "lastModified": file.modified},
            }
            for file in files
        ]
        return RepositoryPage(resources, next_token)

    def read(self, request: HttpRequest, uri: str, variables: Any) -> Any:
        content = self.pager.read(f"{variables['page']}.md")
        if content is None:
            raise ResourceNotFound()
        return content.decode("utf-8")
