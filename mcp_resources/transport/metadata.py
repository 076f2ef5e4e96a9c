"""The OAuth Protected Resource Metadata view (RFC 9728): ``GET /.well-known/oauth-protected-resource[/<path>]``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import View
from django.views.decorators.csrf import csrf_exempt

from mcp_resources.auth.metadata import protected_resource_metadata

if TYPE_CHECKING:
    from collections.abc import Callable

    from django.http import HttpResponseBase

    from mcp_resources.registries import ResourceRegistry


class ProtectedResourceMetadataView(View):
    """``GET /.well-known/oauth-protected-resource[/<endpoint path>]``: the RFC 9728 document as JSON."""

    endpoint_path: str = "mcp"
    registry: ResourceRegistry | None = None
    http_method_names = ["get", "head", "options"]

    @classmethod
    def as_view(cls, **initkwargs: Any) -> Callable[..., HttpResponseBase]:
        return csrf_exempt(super().as_view(**initkwargs))

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        document = protected_resource_metadata(request, self.endpoint_path, self.registry)
        response = JsonResponse(document) if document is not None else JsonResponse({"error": "not_found"}, status=404)
        # Browser-based MCP clients fetch this document cross-origin (as django-oauth-toolkit's own view allows).
        response["Access-Control-Allow-Origin"] = "*"
        return response

    def options(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = HttpResponse(status=204)
        response["Access-Control-Allow-Origin"] = "*"
        response["Access-Control-Allow-Methods"] = "GET, OPTIONS"
        response["Access-Control-Allow-Headers"] = "MCP-Protocol-Version"
        return response
