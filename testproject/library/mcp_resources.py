"""The demo's resource templates (autodiscovered like admin.py)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import HttpRequest

from mcp_resources import ModelResourceTemplate, register
from mcp_resources.drf import from_viewset
from testproject.library.api import BookmarkViewSet
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

    def get_queryset(self, request: HttpRequest) -> QuerySet[Note]:
        return Note.objects.filter(owner_id=request.user.pk)

    def get_contents(self, request: HttpRequest, obj: Any) -> Any:
        return f"# {obj.title}\n\n{obj.text}\n"


# The REST API's bookmarks viewset, as MCP resources: its queryset, serializer (JSON contents), slug lookup and
# permissions (IsAuthenticated, TokenHasScope with documents:read). Listed in slug order, which the
# (owner, slug COLLATE "C") index serves, as it serves the completion of {slug}.
BookmarkResource = register(
    from_viewset(
        BookmarkViewSet,
        name="bookmarks",
        uri_template="learn://bookmarks/{slug}",
        title="Bookmarks",
        description="The signed-in user's bookmarks, as the REST API at /api/bookmarks/ serves them.",
        ordering=("slug",),
        name_field="title",
    )
)
