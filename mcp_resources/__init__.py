"""django-mcp-resources: make a Django project a Model Context Protocol server for resources.

Everything a project writes against is importable from here (docs/api.md lists every public import path). The
names are resolved lazily, so importing the package before the app registry is ready is safe.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0.dev0"

_EXPORTS = {
    # Declaring resources
    "ResourceTemplate": "mcp_resources.resources",
    "ModelResourceTemplate": "mcp_resources.resources",
    "RegisteredResource": "mcp_resources.resources",
    "InventoryPage": "mcp_resources.resources",
    "Completion": "mcp_resources.resources",
    "ResourceRepository": "mcp_resources.resources",
    "RepositoryPage": "mcp_resources.resources",
    "PUBLIC": "mcp_resources.access",
    "PROTECTED": "mcp_resources.access",
    # Registering them
    "ResourceRegistry": "mcp_resources.registries",
    "registry": "mcp_resources.registries",
    "register": "mcp_resources.registries",
    "register_resource": "mcp_resources.registries",
    # Telling subscribers
    "notify_resource_updated": "mcp_resources.subscriptions.broker",
    "notify_resource_list_changed": "mcp_resources.subscriptions.broker",
    # Errors
    "MCPError": "mcp_resources.exceptions",
    "ResourceNotFound": "mcp_resources.exceptions",
    "ResourceError": "mcp_resources.exceptions",
    "PageTokenRejected": "mcp_resources.exceptions",
    "InvalidParams": "mcp_resources.exceptions",
    "InternalError": "mcp_resources.exceptions",
    "AuthenticationRequired": "mcp_resources.exceptions",
    "InsufficientScope": "mcp_resources.exceptions",
    "AlreadyRegistered": "mcp_resources.exceptions",
    "NotRegistered": "mcp_resources.exceptions",
    "RegistryFrozen": "mcp_resources.exceptions",
    # Serving them
    "MCPView": "mcp_resources.transport.views",
    "MCPEndpoint": "mcp_resources.transport.asgi",
    "MCPServer": "mcp_resources.server.core",
    "Method": "mcp_resources.server.core",
    "CallContext": "mcp_resources.server.context",
    "Principal": "mcp_resources.principal",
    "is_cancelled": "mcp_resources.cancellation",
}

__all__ = [*_EXPORTS, "__version__"]

if TYPE_CHECKING:
    from mcp_resources.access import PROTECTED, PUBLIC
    from mcp_resources.cancellation import is_cancelled
    from mcp_resources.exceptions import (
        AlreadyRegistered,
        AuthenticationRequired,
        InsufficientScope,
        InternalError,
        InvalidParams,
        MCPError,
        NotRegistered,
        PageTokenRejected,
        RegistryFrozen,
        ResourceError,
        ResourceNotFound,
    )
    from mcp_resources.principal import Principal
    from mcp_resources.registries import ResourceRegistry, register, register_resource, registry
    from mcp_resources.resources import (
        Completion,
        InventoryPage,
        ModelResourceTemplate,
        RegisteredResource,
        RepositoryPage,
        ResourceRepository,
        ResourceTemplate,
    )
    from mcp_resources.server.context import CallContext
    from mcp_resources.server.core import MCPServer, Method
    from mcp_resources.subscriptions.broker import notify_resource_list_changed, notify_resource_updated
    from mcp_resources.transport.asgi import MCPEndpoint
    from mcp_resources.transport.views import MCPView


def __dir__() -> list[str]:
    # The lazy names too: dir(), autocompletion and the API reference's autodoc see every public name.
    return sorted({*globals(), *__all__})


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mcp_resources' has no attribute {name!r}")
    return getattr(import_module(module), name)
