"""The server core's method map: one handler per method, per protocol version, extended or replaced by a subclass."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from mcp_resources import MCPError, MCPServer, Method
from mcp_resources.exceptions import INTERNAL_ERROR, METHOD_NOT_FOUND, RESOURCE_NOT_FOUND_2025_11_25, InsufficientScope
from mcp_resources.protocol.versions import V2025_11_25, V2026_07_28
from mcp_resources.registries import ResourceRegistry, registry
from mcp_resources.server import CallContext
from mcp_resources.server.core import ALL_VERSIONS, SESSIONS
from testproject.library.models import Document
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


# The access hooks: check_readable (raise) and may_read (bool) -------------------------------------------------------


class RefusingServer(MCPServer):
    """The default registry's server, whose ``may_read`` refuses the URIs in ``refused``."""

    def __init__(self, refused: set[str]) -> None:
        super().__init__(registry)
        self.refused = refused

    def may_read(self, uri: str, ctx: CallContext) -> bool:
        return uri not in self.refused and super().may_read(uri, ctx)


class Subscriptions:
    """A session's subscriptions, in a set."""

    def __init__(self) -> None:
        self.uris: set[str] = set()

    def subscribe(self, uri: str, limit: int) -> bool:
        self.uris.add(uri)
        return True

    def unsubscribe(self, uri: str) -> None:
        self.uris.discard(uri)


def session_context(user: Any, **principal_kwargs: Any) -> CallContext:
    ctx = context(user, version=V2025_11_25, **principal_kwargs)
    ctx.streams, ctx.session = True, Subscriptions()
    return ctx


def test_subscribe_is_refused_where_an_overridden_may_read_says_no(alice: Any) -> None:
    """2025-11-25 ``resources/subscribe`` is decided as a listen stream's acknowledgement is: by the server's
    overridden ``may_read`` (before, only ``check_readable`` was asked and the subscription was accepted)."""
    refused, allowed = (f"learn://documents/{Document.objects.create(owner=alice, title=t).pk}" for t in "ra")
    server = RefusingServer({refused})
    ctx = session_context(alice)
    error = error_of(lambda: server.call("resources/subscribe", {"uri": refused}, ctx))
    assert (error.code, error.data) == (RESOURCE_NOT_FOUND_2025_11_25, {"uri": refused})
    assert server.call("resources/subscribe", {"uri": allowed}, ctx) == {}
    assert ctx.session.uris == {allowed}  # type: ignore[union-attr]
    # check_readable's own errors are kept: a caller without the scope is told so (403), not "not found".
    unscoped = session_context(alice, scopes=())
    scope_error = error_of(lambda: server.call("resources/subscribe", {"uri": refused}, unscoped))
    assert isinstance(scope_error, InsufficientScope)


class ResolvingServer(MCPServer):
    """The default registry's server, whose ``resolve`` answers not found to the call contexts in ``refused``."""

    def __init__(self) -> None:
        super().__init__(registry)
        self.refused: list[CallContext] = []

    def resolve(self, uri: str, ctx: CallContext) -> Any:
        if any(ctx is refused for refused in self.refused):
            raise self.not_found(uri, ctx)
        return super().resolve(uri, ctx)


def test_may_read_each_resolves_for_every_caller_under_an_overridden_resolve(alice: Any) -> None:
    """A ``resolve`` that refuses one of two callers: ``may_read_each`` refuses that caller alone. Before, two callers
    of an owner-only template were decided in one query once the URI was resolved for the first caller."""
    target = f"learn://documents/{Document.objects.create(owner=alice, title='t').pk}"
    first, second = context(alice), context(alice)
    server = ResolvingServer()
    server.refused.append(second)
    assert server.may_read_each(target, [first, second]) == [True, False]
    assert [server.may_read(target, ctx) for ctx in (first, second)] == [True, False]


class FailingServer(RefusingServer):
    """A ``check_readable`` that fails unexpectedly for ``failing``, under an overridden ``may_read``."""

    failing = "learn://documents/0"

    def check_readable(self, uri: str, ctx: CallContext) -> None:
        if uri == self.failing:
            raise RuntimeError("the access backend is down")
        super().check_readable(uri, ctx)


def test_may_read_each_asks_an_overridden_may_read_and_raises_its_unexpected_errors(
    alice: Any, bob: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """For every number of callers, ``may_read_each`` answers what the overridden ``may_read`` answers; an unexpected
    error of the base ``may_read`` it reaches is raised there (a stream ends rather than miss an update silently),
    where one caller's check (a listen's acknowledgement, ``resources/subscribe``) logs it and answers no. No context
    variable switches the base ``may_read``: it raises the error, and its callers decide."""
    docs = [Document.objects.create(owner=owner, title="t") for owner in (alice, alice, bob)]
    refused, mine, theirs = (f"learn://documents/{doc.pk}" for doc in docs)
    server = FailingServer({refused})
    for callers in ([context(alice)], [context(alice), context(bob)], [context(alice), context(alice), context(bob)]):
        for target in (refused, mine, theirs):
            assert server.may_read_each(target, callers) == [server.may_read(target, c) for c in callers], target
    with caplog.at_level(logging.ERROR, logger="mcp_resources.server"):
        assert not server.may_read_logged(FailingServer.failing, context(alice))
    assert "the access backend is down" in caplog.text
    with pytest.raises(RuntimeError, match="the access backend is down"):
        server.may_read_each(FailingServer.failing, [context(alice), context(bob)])
    with pytest.raises(RuntimeError, match="the access backend is down"):
        server.may_read(FailingServer.failing, context(alice))
