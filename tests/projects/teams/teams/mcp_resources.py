"""The team's MCP resources: what a member of a project may see of it.

A user sees the organisations they belong to, the projects they are a member of, those projects' tickets and the
tickets' attachments (binary). Membership is a many-to-many relation, so each template computes its scope in
``get_queryset()``.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import HttpRequest
from mcp_resources import ModelResourceTemplate, register, register_resource

from teams.models import Attachment, Organisation, Project, Ticket

# TODO(issue 14 point 2): declare these scopes as owner_field = "members" / "project__members" /
# "ticket__project__members" once owner_field accepts paths through many-to-many relations.


def _member(request: HttpRequest) -> Any:
    """The caller's user id, or ``None`` for a caller without a user (who sees nothing: filtering a many-to-many
    relation on ``None`` would match the rows without any member)."""
    user = request.user
    return user.pk if user.is_authenticated else None


@register
class OrganisationResource(ModelResourceTemplate):
    model = Organisation
    name = "organisations"
    uri_template = "teams://organisations/{slug}"
    title = "Organisations"
    mime_type = "text/plain"
    required_scopes = ("projects:read",)
    ordering = ("slug",)
    name_field = "name"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Organisation]:
        member = _member(request)
        if member is None:
            return Organisation.objects.none()
        return Organisation.objects.filter(members=member)

    def get_contents(self, request: HttpRequest, obj: Any) -> Any:
        return f"{obj.name} ({obj.slug})"


@register
class ProjectResource(ModelResourceTemplate):
    model = Project
    name = "projects"
    uri_template = "teams://projects/{id}"
    title = "Projects"
    mime_type = "text/plain"
    required_scopes = ("projects:read",)
    ordering = ("id",)
    name_field = "name"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Project]:
        member = _member(request)
        if member is None:
            return Project.objects.none()
        return Project.objects.filter(members=member)

    def get_contents(self, request: HttpRequest, obj: Any) -> Any:
        return f"Project {obj.name} of {obj.organisation.name}"


@register
class TicketResource(ModelResourceTemplate):
    model = Ticket
    name = "tickets"
    uri_template = "teams://tickets/{id}"
    title = "Tickets"
    mime_type = "text/markdown"
    required_scopes = ("projects:read",)
    ordering = ("created", "id")
    name_field = "title"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Ticket]:
        member = _member(request)
        if member is None:
            return Ticket.objects.none()
        return Ticket.objects.filter(project__members=member)

    def get_contents(self, request: HttpRequest, obj: Any) -> Any:
        return f"# {obj.title}\n\n{obj.body}\n"


@register
class AttachmentResource(ModelResourceTemplate):
    model = Attachment
    name = "attachments"
    uri_template = "teams://attachments/{id}"
    title = "Attachments"
    required_scopes = ("attachments:read",)
    ordering = ("id",)
    name_field = "filename"  # listings read the id and the file name, never the blob

    def get_queryset(self, request: HttpRequest) -> QuerySet[Attachment]:
        member = _member(request)
        if member is None:
            return Attachment.objects.none()
        return Attachment.objects.filter(ticket__project__members=member)

    def get_contents(self, request: HttpRequest, obj: Any) -> Any:
        return {"blob": bytes(obj.data), "mimeType": obj.content_type}


register_resource(
    "teams://about",
    "about",
    lambda: "Your organisations, projects, tickets and attachments, as MCP resources.",
    title="About this server",
    mime_type="text/plain",
)
