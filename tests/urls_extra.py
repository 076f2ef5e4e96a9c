"""Test-only URLconf: ``/mcp`` served by an :class:`MCPServer` over a separate registry.

Used with the ``settings.ROOT_URLCONF`` fixture. The extra registry holds templates and static resources the
demo project does not have: a non-discoverable template, a template whose read fails unexpectedly, and a few
code-registered static resources that interleave (in URI order) with ``StaticResource`` rows.

:class:`RecordingMiddleware` is a project middleware for the tests that MCP requests pass through the middleware
stack: add ``"tests.urls_extra.RecordingMiddleware"`` to ``settings.MIDDLEWARE``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponseBase
from django.urls import path

from mcp_resources import MCPServer, MCPView, ResourceNotFound, ResourceRegistry, ResourceTemplate

SECRET_DETAIL = "s3cr3t-backend-detail: password=hunter2 at /srv/app/models.py"

registry = ResourceRegistry("tests-extra")


@registry.register
class VisibleTemplate(ResourceTemplate):
    name = "visible"
    uri_template = "extra://visible/{id}"
    title = "Visible template"
    mime_type = "text/plain"
    access = "public"

    def read(self, request: HttpRequest, uri: str, variables: Any) -> Any:
        if variables["id"] == "missing":
            raise ResourceNotFound()
        return f"visible {variables['id']}"


@registry.register
class HiddenTemplate(ResourceTemplate):
    name = "hidden"
    uri_template = "extra://hidden/{id}"
    access = "public"
    discoverable = False

    def read(self, request: HttpRequest, uri: str, variables: Any) -> Any:
        return f"hidden {variables['id']}"


@registry.register
class ExplodingTemplate(ResourceTemplate):
    name = "exploding"
    uri_template = "extra://boom/{id}"
    access = "public"

    def read(self, request: HttpRequest, uri: str, variables: Any) -> Any:
        raise RuntimeError(SECRET_DETAIL)


# Code-registered static resources; tests add StaticResource rows "extra://static/a", "…/c", "…/e".
STATIC_CODE_URIS = ("extra://static/b", "extra://static/d", "extra://static/f")
for _uri in STATIC_CODE_URIS:
    registry.register_resource(_uri, _uri.rsplit("/", 1)[-1], lambda uri=_uri: f"code resource {uri}")

extra_server = MCPServer(registry)

MIDDLEWARE_LOG: list[dict[str, Any]] = []
"""What :class:`RecordingMiddleware` saw of each request, in order."""


class RecordingMiddleware:
    """Records each request and its answer, as error-tracking or tracing middleware would, and marks the answer."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        user = getattr(request, "user", None)
        MIDDLEWARE_LOG.append(
            {
                "method": request.method,
                "path": request.path,
                "mcp_method": request.headers.get("Mcp-Method"),
                "user": user.get_username() if user is not None and user.is_authenticated else None,
                "status": response.status_code,
            }
        )
        response["X-Recorded-By"] = "RecordingMiddleware"
        return response


urlpatterns = [
    path("mcp", MCPView.as_view(server=extra_server)),
]
