"""Run MCP methods for a named user from the command line, through the same server core as HTTP."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError
from django.test import RequestFactory

from mcp_resources import jsonrpc
from mcp_resources.conf import MODERN_VERSION
from mcp_resources.exceptions import AuthenticationRequired, InsufficientScope
from mcp_resources.principal import Principal
from mcp_resources.server import CallContext, MCPServer, default_server

OPERATOR_CLIENT_ID = "manage.py"


def declared_scopes(server: MCPServer) -> list[str]:
    """Every scope a registered template or code-registered static resource requires."""
    scopes: dict[str, None] = {}
    for template in server.registry.templates:
        scopes.update(dict.fromkeys(template.scopes))
    for resource in server.registry.iter_resources():
        scopes.update(dict.fromkeys(resource.scopes))
    return list(scopes)


def operator_context(username: str, scopes: list[str] | None, server: MCPServer | None = None) -> CallContext:
    """A 2026-07-28 call context for ``username`` holding ``scopes`` (default: every declared scope)."""
    server = server or default_server
    user_model = get_user_model()
    try:
        user = user_model._default_manager.get_by_natural_key(username)
    except user_model.DoesNotExist as exc:
        raise CommandError(f"no user {username!r}") from exc
    request = RequestFactory().post("/mcp")
    request.user = user
    principal = Principal(
        subject=str(user.pk),
        client_id=OPERATOR_CLIENT_ID,
        scopes=frozenset(declared_scopes(server) if scopes is None else scopes),
        authenticated=True,
    )
    request.mcp_principal = principal  # type: ignore[attr-defined]
    return CallContext(request, MODERN_VERSION, principal, {})


def call(method: str, params: dict[str, Any], ctx: CallContext, server: MCPServer | None = None) -> dict[str, Any]:
    """Call the core; turn protocol and access errors into ``CommandError`` with the client's message."""
    server = server or default_server
    try:
        return server.call(method, params, ctx)
    except jsonrpc.RPCError as exc:
        detail = f" {exc.data}" if exc.data else ""
        raise CommandError(f"{exc.message} ({exc.code}){detail}") from exc
    except AuthenticationRequired as exc:
        raise CommandError("authentication required") from exc
    except InsufficientScope as exc:
        raise CommandError(f"insufficient scope: needs {' '.join(exc.scopes)}") from exc
