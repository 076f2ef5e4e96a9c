"""The server core's method map: one handler per method, per protocol version, extended or replaced by a subclass."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from mcp_resources import MCPError, MCPServer, Method
from mcp_resources.exceptions import INTERNAL_ERROR, METHOD_NOT_FOUND
from mcp_resources.protocol.versions import V2025_11_25, V2026_07_28
from mcp_resources.registries import ResourceRegistry
from mcp_resources.server.core import ALL_VERSIONS, SESSIONS
from tests.listing_support import context

pytestmark = pytest.mark.django_db


class AuditedServer(MCPServer):
    """A project's server: one method added, one replaced, one only for sessions."""

    methods = {
        **MCPServer.methods,
        "resources/audit": Method("audit"),
        "resources/read": Method("read_resource_audited"),
        "resources/echo": Method("echo", SESSIONS),
    }

    def __init__(self) -> None:
        super().__init__(ResourceRegistry("audited"))
        self.reads: list[str] = []

    def audit(self, params: dict[str, Any], ctx: Any) -> dict[str, Any]:
        return {"reads": list(self.reads)}

    def read_resource_audited(self, params: dict[str, Any], ctx: Any) -> dict[str, Any]:
        self.reads.append(str(params.get("uri")))
        return self.read_resource(params, ctx)

    def echo(self, params: dict[str, Any], ctx: Any) -> dict[str, Any]:
        if params.get("fail"):
            raise RuntimeError("a backend detail that must stay in the log")
        return {"echo": params.get("value")}


def error_of(call: Any) -> MCPError:
    with pytest.raises(MCPError) as info:
        call()
    return info.value


def test_a_subclass_adds_and_replaces_handlers(alice: Any) -> None:
    server = AuditedServer()
    ctx = context(alice)
    not_found = error_of(lambda: server.call("resources/read", {"uri": "learn://nothing"}, ctx))
    assert not_found.message == "Resource not found"
    assert server.call("resources/audit", {}, ctx)["reads"] == ["learn://nothing"]  # the replacement ran
    assert server.call("resources/templates/list", {}, ctx)["resourceTemplates"] == []  # the rest is inherited
    assert "resources/audit" not in MCPServer.methods  # the base map is untouched


def test_a_method_exists_only_in_its_protocol_versions(alice: Any) -> None:
    server = AuditedServer()
    assert server.call("resources/echo", {"value": 7}, context(alice, version=V2025_11_25)) == {"echo": 7}
    refused = error_of(lambda: server.call("resources/echo", {"value": 7}, context(alice, version=V2026_07_28)))
    assert refused.code == METHOD_NOT_FOUND
    assert MCPServer.methods["resources/list"].versions == ALL_VERSIONS


def test_a_handler_failure_is_a_generic_error_and_a_log_line(alice: Any, caplog: pytest.LogCaptureFixture) -> None:
    server = AuditedServer()
    with caplog.at_level(logging.ERROR, logger="mcp_resources.server"):
        error = error_of(lambda: server.call("resources/echo", {"fail": True}, context(alice, version=V2025_11_25)))
    assert (error.code, error.message) == (INTERNAL_ERROR, "Internal error")
    assert "backend detail" not in str(error.to_response())
    assert "backend detail" in caplog.text


def test_subscription_methods_need_a_transport_that_serves_streams(alice: Any) -> None:
    server = MCPServer(ResourceRegistry("streams"))
    ctx = context(alice, version=V2025_11_25)
    assert server.capabilities(ctx)["resources"] == {}
    assert error_of(lambda: server.call("resources/subscribe", {"uri": "x://y"}, ctx)).code == METHOD_NOT_FOUND
    ctx.streams = True
    assert server.capabilities(ctx)["resources"] == {"subscribe": True, "listChanged": True}
    refused = error_of(lambda: server.call("resources/subscribe", {"uri": "x://y"}, ctx))
    assert refused.code != METHOD_NOT_FOUND  # the method exists now (x://y names nothing)
