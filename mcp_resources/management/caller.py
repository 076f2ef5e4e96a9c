"""Run MCP methods as a named user from the command line, through the same server core as HTTP."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError
from django.http import HttpRequest

from mcp_resources.auth.authentication import user_principal
from mcp_resources.exceptions import AuthenticationRequired, InsufficientScope, MCPError
from mcp_resources.protocol.versions import LATEST_VERSION
from mcp_resources.server import CallContext, MCPServer, default_server

CLIENT_ID = "manage.py"


def declared_scopes(server: MCPServer) -> list[str]:
    """Every scope a registered template or code-registered static resource requires."""
    scopes: dict[str, None] = {}
    for template in server.registry.templates:
        scopes.update(dict.fromkeys(template.scopes))
    for resource in server.registry.iter_resources():
        scopes.update(dict.fromkeys(resource.scopes))
    return list(scopes)


def context_for(
    user: Any, scopes: list[str] | None, server: MCPServer | None = None, client_id: str = CLIENT_ID
) -> CallContext:
    """A 2026-07-28 call context for ``user`` holding ``scopes`` (default: every declared scope)."""
    server = server or default_server
    request = HttpRequest()
    request.method = "POST"
    request.user = user
    principal = user_principal(user, declared_scopes(server) if scopes is None else scopes, client_id)
    request.mcp_principal = principal  # type: ignore[attr-defined]
    request.auth = principal  # type: ignore[attr-defined]
    return CallContext(request, LATEST_VERSION, principal)


def operator_context(username: str, scopes: list[str] | None, server: MCPServer | None = None) -> CallContext:
    """:func:`context_for` the user named ``username``; ``CommandError`` when there is none."""
    user_model = get_user_model()
    try:
        user = user_model._default_manager.get_by_natural_key(username)
    except user_model.DoesNotExist as exc:
        raise CommandError(f"no user {username!r}") from exc
    return context_for(user, scopes, server)


def call(method: str, params: dict[str, Any], ctx: CallContext, server: MCPServer | None = None) -> dict[str, Any]:
    """Call the core; turn protocol and access errors into ``CommandError`` with the client's message."""
    server = server or default_server
    try:
        return server.call(method, params, ctx)
    except AuthenticationRequired as exc:
        raise CommandError("authentication required") from exc
    except InsufficientScope as exc:
        raise CommandError(f"insufficient scope: needs {' '.join(exc.scopes)}") from exc
    except MCPError as exc:
        detail = f" {exc.data}" if exc.data else ""
        raise CommandError(f"{exc.message} ({exc.code}){detail}") from exc
