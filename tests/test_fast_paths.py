"""The fast paths (compiled listing, value rows, compiled completion, batched readers): chosen from declarations,
never compiled from what may change per request, bounded for records shared by thousands of readers.

Real database (SQLite and PostgreSQL with ``MCP_TEST_DB=postgres``), real models of ``testproject.agreement``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

from mcp_resources.resources import ModelResourceTemplate
from testproject.agreement.models import Record, Seat, Workspace, current_tenant
from tests.listing_support import SCOPE, context, server_for, uris, walk

pytestmark = pytest.mark.django_db


class TenantRecords(ModelResourceTemplate):
    """Records owned by the caller, through the model's default manager (which filters by the current tenant)."""

    model = Record
    name = "records"
    uri_template = "agree://records/{slug}"
    required_scopes = (SCOPE,)
    ordering = ("slug",)
    name_field = "title"
    owner_field = "owner"


class SharedRecords(TenantRecords):
    """Records of the workspaces the caller has a seat in (a many-to-many through ``Seat``)."""

    name = "shared-records"
    uri_template = "agree://shared/{slug}"
    queryset = Record.everything.all()
    owner_field = "workspace__members"


@pytest.fixture
def tenant() -> Iterator[Any]:
    """Set the current tenant (reset after the test)."""
    tokens = []

    def use(name: str | None) -> None:
        tokens.append(current_tenant.set(name))

    yield use
    for token in reversed(tokens):
        current_tenant.reset(token)


def complete_slug(server: Any, ctx: Any, value: str = "") -> list[str]:
    body = {
        "ref": {"type": "ref/resource", "uri": TenantRecords.uri_template},
        "argument": {"name": "slug", "value": value},
    }
    values: list[str] = server.call("completion/complete", body, ctx)["completion"]["values"]
    return values


# 1. The default manager is never compiled -------------------------------------------------------------------------


def test_a_default_manager_that_filters_per_request_is_asked_on_every_request(alice: Any, tenant: Any) -> None:
    """Switching the tenant from A to B changes the listing and the completion. Before, the listing and the
    completion were compiled once per thread from the default manager: B's caller got A's record."""
    space = Workspace.objects.create(name="w")
    Record.objects.create(owner=alice, workspace=space, tenant="a", slug="a-record", title="A")
    Record.objects.create(owner=alice, workspace=space, tenant="b", slug="b-record", title="B")
    server = server_for(TenantRecords)
    ctx = context(alice)
    for name, expected in (("a", "a-record"), ("b", "b-record"), ("a", "a-record")):
        tenant(name)
        assert uris(walk(server, ctx)) == [f"agree://records/{expected}"], name
        assert complete_slug(server, ctx) == [expected], name
        assert server.call("resources/read", {"uri": f"agree://records/{expected}"}, ctx)["contents"]


# 2. A record shared by thousands of readers -----------------------------------------------------------------------


def test_a_record_with_5000_readers_is_decided_for_each_of_them(alice: Any) -> None:
    """One record, 5,000 subscribed readers and 100 callers who may not read it: every decision is right, in
    queries of bounded width. Before, one SELECT had a column per caller: past 1,664 on PostgreSQL (about 2,000 on
    SQLite) it failed and every stream of the record ended."""
    User = get_user_model()
    User.objects.bulk_create(User(username=f"reader{i}") for i in range(5100))
    users = list(User.objects.filter(username__startswith="reader").order_by("pk"))
    readers, others = users[:5000], users[5000:]
    space = Workspace.objects.create(name="company")
    Seat.objects.bulk_create(Seat(workspace=space, user=user) for user in readers)
    record = Record.objects.create(owner=alice, workspace=space, slug="handbook", title="Handbook")
    server = server_for(SharedRecords)
    uri = f"agree://shared/{record.slug}"
    callers = [context(user) for user in users]
    with CaptureQueriesContext(connection) as queries:
        decisions = server.may_read_each(uri, callers)
    assert decisions == [True] * len(readers) + [False] * len(others)
    assert len(queries) <= 2 + len(users) // SharedRecords.readers_per_query
