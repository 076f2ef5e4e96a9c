"""A declared per-record permission on a model template (``object_permissions``, ``has_object_permission``).

What a DRF viewset's object permissions need, for any model template: a record the hook refuses reads not found,
and is neither listed (on any page, with or without a prefix) nor completed, nor acknowledged or notified; the fast
paths that would skip the hook (value rows, compiled listing and completion, batched readers) are off.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.http import HttpRequest

from mcp_resources import fastpaths
from mcp_resources.checks.fastpaths import check_fast_paths
from mcp_resources.listing.compiled import declared_listing
from mcp_resources.listing.completion import declared_completion
from mcp_resources.listing.plan import list_plan
from mcp_resources.registries import ResourceRegistry
from mcp_resources.resources import ModelResourceTemplate
from testproject.library.models import Note
from tests.listing_support import SCOPE, configure, context, rpc_error, server_for, walk

pytestmark = pytest.mark.django_db


class UnsealedNotes(ModelResourceTemplate):
    """The caller's notes, except those titled "sealed ...": a rule a queryset could hold, written per record."""

    model = Note
    name = "unsealed"
    uri_template = "learn://unsealed/{id}"
    required_scopes = (SCOPE,)
    owner_field = "owner"
    name_field = "title"
    ordering = ("title", "id")
    object_permissions = True

    def has_object_permission(self, request: HttpRequest, obj: Any) -> bool:
        return not obj.title.startswith("sealed")


class CountingNotes(UnsealedNotes):
    """Counts the batches it is asked about."""

    name = "counting"
    uri_template = "learn://counting/{id}"
    batches: list[int] = []

    def has_object_permissions(self, request: HttpRequest, objs: Any) -> list[bool]:
        CountingNotes.batches.append(len(objs))
        return super().has_object_permissions(request, objs)


@pytest.fixture
def made(alice: Any, bob: Any) -> list[Note]:
    titles = ["sealed 1", "open 1", "sealed 2", "sealed 3", "open 2", "sealed 4", "sealed 5", "open 3"]
    Note.objects.create(owner=bob, title="open of bob")
    return [Note.objects.create(owner=alice, title=title) for title in titles]


def allowed(made: list[Note]) -> list[Note]:
    return sorted((n for n in made if n.title.startswith("open")), key=lambda n: (n.title.encode(), n.pk))


@pytest.mark.parametrize("page_size", [1, 2, 50])
def test_refused_records_are_not_listed_completed_or_read(settings, alice, made, page_size):
    configure(settings, PAGE_SIZE=page_size)
    server = server_for(UnsealedNotes)
    ctx = context(alice)
    expected = [f"learn://unsealed/{n.pk}" for n in allowed(made)]
    for prefix in (None, "learn://unsealed/"):
        assert [r["uri"] for page in walk(server, ctx, prefix=prefix) for r in page["resources"]] == expected
    for note in made:
        uri = f"learn://unsealed/{note.pk}"
        if uri in expected:
            assert server.call("resources/read", {"uri": uri}, ctx)["contents"][0]["uri"] == uri
        else:
            assert rpc_error(lambda uri=uri: server.call("resources/read", {"uri": uri}, ctx)).code == -32602
    body = {"ref": {"type": "ref/resource", "uri": "learn://unsealed/{id}"}, "argument": {"name": "id", "value": ""}}
    completion = server.call("completion/complete", body, ctx)["completion"]
    assert completion["values"] == sorted((str(n.pk) for n in allowed(made)), key=str.encode)


def test_the_hook_decides_a_batch_at_a_time(settings, alice, made):
    configure(settings, PAGE_SIZE=50)
    CountingNotes.batches.clear()
    listed = [r["uri"] for page in walk(server_for(CountingNotes), context(alice)) for r in page["resources"]]
    assert len(listed) == 3
    assert CountingNotes.batches == [len(made)]  # one page, one batch of every record it read


def test_acknowledgements_and_updates_follow_the_hook(alice, bob, made):
    server = server_for(UnsealedNotes)
    sealed, opened = made[0], made[1]
    contexts = [context(alice), context(bob)]
    assert server.may_read_each(f"learn://unsealed/{opened.pk}", contexts) == [True, False]
    assert server.may_read_each(f"learn://unsealed/{sealed.pk}", contexts) == [False, False]
    assert not server.may_read(f"learn://unsealed/{sealed.pk}", contexts[0])


def test_the_fast_paths_that_would_skip_the_hook_are_off():
    template = UnsealedNotes()
    assert not template.decides_readers_in_one_query
    assert list_plan(template) is None
    assert declared_listing(template, ("title", "id")) is None
    assert declared_completion(template) is None
    plain = type("Plain", (UnsealedNotes,), {"__module__": __name__, "object_permissions": False})()
    assert plain.decides_readers_in_one_query
    assert list_plan(plain) is not None
    assert fastpaths.BATCHED_READERS in template.fast_paths  # declared: the attribute turns it off where it runs


def test_w006_does_not_name_a_path_the_per_record_permission_turns_off():
    class Overriding(UnsealedNotes):
        name = "overriding"

        def get_resource(self, request: HttpRequest, obj: Any) -> dict[str, Any]:
            return super().get_resource(request, obj)

    registry = ResourceRegistry()
    registry.register(Overriding)
    assert [m for m in check_fast_paths(registry) if "value_rows" in m.msg] == []


def test_w006_does_not_blame_the_manager_of_a_template_checked_record_by_record(monkeypatch):
    """A project manager turns the compiled paths off, but so does the per-record permission: no W006 about it."""
    from django.db import models

    class ProjectManager(models.Manager[Note]):
        pass

    monkeypatch.setattr(Note._meta, "default_manager", ProjectManager())
    registry = ResourceRegistry()
    registry.register(type("Managed", (UnsealedNotes,), {"__module__": __name__, "name": "managed"}))
    assert [m for m in check_fast_paths(registry) if "default manager" in m.msg] == []
