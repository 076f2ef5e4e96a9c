"""The team's MCP resources: what a member of a project may see of it.

A user sees the organisations they belong to, the projects they are a member of, those projects' tickets and the
tickets' attachments (binary). Membership is a many-to-many relation: each template declares the path from its
records to the user (``owner_field``), which the package turns into an ``EXISTS`` semi-join (no repeated rows) and
lists through its compiled page query.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from mcp_resources import ModelResourceTemplate, register, register_resource

from teams.models import Attachment, Organisation, Project, Ticket


@register
class OrganisationResource(ModelResourceTemplate):
    model = Organisation
    owner_field = "members"
    name = "organisations"
    uri_template = "teams://organisations/{slug}"
    title = "Organisations"
    mime_type = "text/plain"
    required_scopes = ("projects:read",)
    ordering = ("slug",)
    name_field = "name"

    def get_contents(self, request: HttpRequest, obj: Any) -> Any:
        return f"{obj.name} ({obj.slug})"


@register
class ProjectResource(ModelResourceTemplate):
    model = Project
    owner_field = "members"
    name = "projects"
    uri_template = "teams://projects/{id}"
    title = "Projects"
    mime_type = "text/plain"
    required_scopes = ("projects:read",)
    ordering = ("id",)
    name_field = "name"

    def get_contents(self, request: HttpRequest, obj: Any) -> Any:
        return f"Project {obj.name} of {obj.organisation.name}"


@register
class TicketResource(ModelResourceTemplate):
    model = Ticket
    owner_field = "project__members"
    name = "tickets"
    uri_template = "teams://tickets/{id}"
    title = "Tickets"
    mime_type = "text/markdown"
    required_scopes = ("projects:read",)
    ordering = ("created", "id")
    name_field = "title"

    def get_contents(self, request: HttpRequest, obj: Any) -> Any:
        return f"# {obj.title}\n\n{obj.body}\n"


@register
class AttachmentResource(ModelResourceTemplate):
    model = Attachment
    owner_field = "ticket__project__members"
    name = "attachments"
    uri_template = "teams://attachments/{id}"
    title = "Attachments"
    required_scopes = ("attachments:read",)
    ordering = ("id",)
    name_field = "filename"  # listings read the id and the file name, never the blob

    def get_contents(self, request: HttpRequest, obj: Any) -> Any:
        return {"blob": bytes(obj.data), "mimeType": obj.content_type}


register_resource(
    "teams://about",
    "about",
    lambda: "Your organisations, projects, tickets and attachments, as MCP resources.",
    title="About this server",
    mime_type="text/plain",
)
