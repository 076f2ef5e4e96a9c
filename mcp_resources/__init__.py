"""django-mcp-resources: make a Django project a Model Context Protocol server for resources.

The public API is importable before the app registry is ready: names are resolved lazily.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0.dev0"

_EXPORTS = {
    "ResourceTemplate": "mcp_resources.resources",
    "ModelResourceTemplate": "mcp_resources.resources",
    "RegisteredResource": "mcp_resources.resources",
    "PUBLIC": "mcp_resources.resources",
    "PROTECTED": "mcp_resources.resources",
    "ResourceRegistry": "mcp_resources.registry",
    "register": "mcp_resources.registry",
    "register_resource": "mcp_resources.registry",
    "site": "mcp_resources.registry",
    "ResourceNotFound": "mcp_resources.exceptions",
    "ResourceError": "mcp_resources.exceptions",
    "Principal": "mcp_resources.principal",
    "MCPServer": "mcp_resources.server",
}

__all__ = [*_EXPORTS, "__version__"]

if TYPE_CHECKING:
    from mcp_resources.exceptions import ResourceError, ResourceNotFound
    from mcp_resources.principal import Principal
    from mcp_resources.registry import ResourceRegistry, register, register_resource, site
    from mcp_resources.resources import (
        PROTECTED,
        PUBLIC,
        ModelResourceTemplate,
        RegisteredResource,
        ResourceTemplate,
    )
    from mcp_resources.server import MCPServer


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mcp_resources' has no attribute {name!r}")
    return getattr(import_module(module), name)
