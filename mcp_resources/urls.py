"""``path("mcp", include("mcp_resources.urls"))`` mounts the endpoint at ``/mcp``.

Mount the OAuth protected resource metadata (RFC 9728) for it at the server root with
``*well_known_urlpatterns("mcp")``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.urls import URLPattern, path

from mcp_resources.transport.metadata import ProtectedResourceMetadataView
from mcp_resources.transport.views import MCPView

if TYPE_CHECKING:
    from mcp_resources.registries import ResourceRegistry

app_name = "mcp_resources"

#: The endpoint, for ``path("mcp", include("mcp_resources.urls"))`` (URL name ``mcp_resources:endpoint``).
urlpatterns = [
    path("", MCPView.as_view(), name="endpoint"),
]


def well_known_urlpatterns(endpoint_path: str = "mcp", registry: ResourceRegistry | None = None) -> list[URLPattern]:
    """The protected resource metadata routes for the MCP endpoint at ``/<endpoint_path>``.

    Include them in the ROOT urlconf, unprefixed: ``/.well-known/oauth-protected-resource/<endpoint_path>``
    (the path-inserted URL the challenges advertise) and ``/.well-known/oauth-protected-resource`` (the root
    URL clients try last). Pass ``registry`` when the endpoint serves another registry than the default.
    """
    endpoint_path = endpoint_path.strip("/")
    view = ProtectedResourceMetadataView.as_view(endpoint_path=endpoint_path, registry=registry)
    patterns = [path(".well-known/oauth-protected-resource", view, name="mcp-resource-metadata")]
    if endpoint_path:
        patterns.insert(
            0,
            path(f".well-known/oauth-protected-resource/{endpoint_path}", view, name="mcp-resource-metadata-path"),
        )
    return patterns
