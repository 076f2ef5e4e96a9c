"""The fixtures the official MCP conformance suite reads (``test://...``)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from mcp_resources import ResourceTemplate, register, register_resource

# A 1x1 red PNG.
RED_PIXEL = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108020000009077"
    "53de0000000c4944415408d763f8cfc000000301010018dd8db00000000049454e44ae426082"
)

register_resource(
    "test://static-text",
    "static-text",
    lambda: "This is the content of the static text resource.",
    title="Static text resource",
    description="A static text resource for conformance testing.",
    mime_type="text/plain",
)
register_resource(
    "test://static-binary",
    "static-binary",
    lambda: RED_PIXEL,
    title="Static binary resource",
    description="A static binary (PNG) resource for conformance testing.",
    mime_type="image/png",
)
register_resource(
    "test://watched-resource",
    "watched-resource",
    lambda: "Watched resource content.",
    title="Watched resource",
    description="A resource clients may subscribe to.",
    mime_type="text/plain",
)


@register
class ConformanceTemplate(ResourceTemplate):
    name = "template"
    uri_template = "test://template/{id}/data"
    title = "Template resource"
    description = "A resource template for conformance testing."
    mime_type = "application/json"
    access = "public"

    def read(self, request: HttpRequest, uri: str, variables: Any) -> Any:
        return f'{{"id": "{variables["id"]}", "templateTest": true, "data": "Data for ID: {variables["id"]}"}}'
