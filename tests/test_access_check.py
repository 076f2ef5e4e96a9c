"""The access re-check before each notification decides access without building contents."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import RequestFactory

from mcp_resources.exceptions import INVALID_PARAMS, ResourceNotFound
from mcp_resources.principal import Principal
from mcp_resources.protocol.versions import V2026_07_28
from mcp_resources.registries import ResourceRegistry
from mcp_resources.resources import ModelResourceTemplate
from mcp_resources.server import CallContext, MCPServer
from testproject.library.models import Document

pytestmark = pytest.mark.django_db


class Docs(ModelResourceTemplate):
    model = Document
    name = "docs"
    uri_template = "check://docs/{id}"
    required_scopes = ("documents:read",)
    contents_built = 0

    def get_queryset(self, request: Any) -> Any:
        return Document.objects.filter(owner_id=request.user.pk)

    def get_contents(self, request: Any, obj: Any) -> Any:
        type(self).contents_built += 1
        return obj.body


def _ctx(user: Any) -> CallContext:
    request = RequestFactory().post("/mcp")
    request.user = user
    principal = Principal(subject=str(user.pk), scopes=frozenset({"documents:read"}), authenticated=True)
    return CallContext(request, V2026_07_28, principal)


@pytest.fixture
def server() -> MCPServer:
    registry = ResourceRegistry("access-check")
    registry.register(Docs)
    return MCPServer(registry)


def test_live_resource_get_is_not_called_by_the_access_check(server: MCPServer, alice: Any) -> None:
    calls = []
    server.registry.register_resource("check://live", "live", lambda: calls.append(1) or "v")
    assert server.may_read("check://live", _ctx(alice))
    assert calls == []
    server.call("resources/read", {"uri": "check://live"}, _ctx(alice))
    assert calls == [1]


def test_model_access_check_fetches_the_record_without_contents(server: MCPServer, alice: Any, bob: Any) -> None:
    doc = Document.objects.create(owner=alice, title="t", body="secret")
    Docs.contents_built = 0
    assert server.may_read(f"check://docs/{doc.pk}", _ctx(alice))
    assert not server.may_read(f"check://docs/{doc.pk}", _ctx(bob))
    assert Docs.contents_built == 0
    with pytest.raises(ResourceNotFound) as refused:
        server.check_readable(f"check://docs/{doc.pk}", _ctx(bob))
    assert (refused.value.code, refused.value.data) == (INVALID_PARAMS, {"uri": f"check://docs/{doc.pk}"})


def test_an_overridden_read_still_decides_access(alice: Any) -> None:
    class Stricter(Docs):
        name = "stricter"
        uri_template = "check://strict/{id}"

        def read(self, request: Any, uri: str, variables: Any) -> Any:
            raise ResourceNotFound()

    registry = ResourceRegistry("stricter")
    registry.register(Stricter)
    doc = Document.objects.create(owner=alice, title="t", body="b")
    assert not MCPServer(registry).may_read(f"check://strict/{doc.pk}", _ctx(alice))
    # The same record through a template that keeps the base read: the owner may read it.
    registry = ResourceRegistry("docs")
    registry.register(Docs)
    assert MCPServer(registry).may_read(f"check://docs/{doc.pk}", _ctx(alice))
