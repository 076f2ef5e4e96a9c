"""Metadata clients use: ``annotations`` (``audience``, ``priority``, ``lastModified``), ``icons`` and ``size``.

A model template's ``modified_field`` and ``size_field`` (read in the page query, from value rows or instances
alike, no query of their own), static resources from code (``register_resource(annotations=, icons=, size=)``) and
from the admin (``StaticResource``: ``audience``, ``priority``, ``icons``, ``size`` computed on save,
``lastModified`` from ``updated``), in the shapes of the MCP schema, in both protocol eras.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from mcp_resources import metadata
from mcp_resources.models import StaticResource
from mcp_resources.protocol.versions import V2025_11_25, V2026_07_28
from mcp_resources.registries import ResourceRegistry
from mcp_resources.resources import ModelResourceTemplate
from mcp_resources.server import MCPServer
from testproject.library.models import Document, Note
from tests.listing_support import NoteSource, anonymous, context, list_page, server_for, uris, walk

pytestmark = pytest.mark.django_db

ERAS = [V2026_07_28, V2025_11_25]


class DatedNotes(NoteSource):
    name_field = "title"
    modified_field = "updated"


class DatedNoteInstances(DatedNotes):
    """The same, listed from model instances (an overridden hook turns the value-row plan off)."""

    def get_resource_name(self, obj: Any) -> str:
        return obj.title


class SizedNotes(DatedNotes):
    size_field = "id"  # an integer column standing in for a size


def iso(value: datetime.datetime) -> str:
    return value.astimezone(datetime.UTC).isoformat().replace("+00:00", "Z")


# lastModified and size from a model template ------------------------------------------------------------------


@pytest.mark.parametrize("version", ERAS)
@pytest.mark.parametrize("template", [DatedNotes, DatedNoteInstances], ids=["rows", "instances"])
def test_modified_field_is_listed_as_last_modified(alice, template, version):
    notes = Note.objects.bulk_create(Note(owner=alice, title=f"n{i}", text="t") for i in range(3))
    Note.objects.filter(pk=notes[1].pk).update(updated=datetime.datetime(2025, 1, 12, 15, 0, 58, tzinfo=datetime.UTC))
    (page,) = walk(server_for(template), context(alice, version=version))
    by_uri = {r["uri"]: r for r in page["resources"]}
    for note in Note.objects.all():
        assert by_uri[f"learn://notes/{note.pk}"]["annotations"] == {"lastModified": iso(note.updated)}
    assert by_uri[f"learn://notes/{notes[1].pk}"]["annotations"]["lastModified"] == "2025-01-12T15:00:58Z"


def test_rows_and_instances_list_the_same_metadata(alice):
    Note.objects.bulk_create(Note(owner=alice, title=t, text="t") for t in ["b", "a", "c"])
    rows = walk(server_for(SizedNotes), context(alice))
    sized_instances = type("SizedInstances", (DatedNoteInstances,), {"size_field": "id"})
    instances = walk(server_for(sized_instances), context(alice))
    assert rows == instances
    assert all(r["size"] == int(r["uri"].rsplit("/", 1)[1]) for r in rows[0]["resources"])


def test_the_metadata_columns_ride_in_the_page_query(alice):
    Note.objects.bulk_create(Note(owner=alice, title=f"n{i}", text="t") for i in range(5))
    counts = {}
    for template in (NoteSource, SizedNotes):
        plain = type(f"Plain{template.__name__}", (template,), {"name_field": "title"})
        server = server_for(plain)
        list_page(server, context(alice))  # compile and warm up
        with CaptureQueriesContext(connection) as queries:
            list_page(server, context(alice))
        counts[template] = [q["sql"] for q in queries.captured_queries]
    assert len(counts[SizedNotes]) == len(counts[NoteSource])
    (page_sql,) = [sql for sql in counts[SizedNotes] if "library_note" in sql]
    assert '"updated"' in page_sql


def test_a_record_without_a_value_lists_no_annotation(alice):
    class Archive(ModelResourceTemplate):
        model = Document
        name = "archive"
        uri_template = "learn://archive/{id}"
        required_scopes = ("documents:read",)
        owner_field = "owner"
        name_field = "title"
        modified_field = "deleted_at"  # nullable

    when = datetime.datetime(2025, 1, 12, 15, 0, 58, tzinfo=datetime.UTC)
    kept = Document.objects.create(owner=alice, title="kept")
    gone = Document.objects.create(owner=alice, title="gone", deleted_at=when)
    for template in (Archive, type("ArchiveInstances", (Archive,), {"get_resource_name": lambda self, obj: obj.title})):
        listed = {r["uri"]: r for r in list_page(server_for(template), context(alice))["resources"]}
        assert "annotations" not in listed[f"learn://archive/{kept.pk}"]
        assert listed[f"learn://archive/{gone.pk}"]["annotations"] == {"lastModified": "2025-01-12T15:00:58Z"}


# Static resources from code ------------------------------------------------------------------------------------


def test_code_static_resources_announce_annotations_icons_and_size():
    registry = ResourceRegistry("meta")
    when = datetime.datetime(2025, 1, 12, 15, 0, 58, tzinfo=datetime.UTC)
    registry.register_resource(
        "learn://logo.png",
        "logo",
        lambda: b"\x89PNG",
        mime_type="image/png",
        size=4,
        annotations={"audience": ["user"], "priority": 0.8, "lastModified": when},
        icons=[{"src": "https://example.com/logo.png", "mimeType": "image/png", "sizes": ["48x48"], "theme": "dark"}],
    )
    (resource,) = MCPServer(registry).call("resources/list", {}, anonymous())["resources"]
    assert resource == {
        "uri": "learn://logo.png",
        "name": "logo",
        "mimeType": "image/png",
        "size": 4,
        "annotations": {"audience": ["user"], "priority": 0.8, "lastModified": "2025-01-12T15:00:58Z"},
        "icons": [
            {"src": "https://example.com/logo.png", "mimeType": "image/png", "sizes": ["48x48"], "theme": "dark"}
        ],
    }


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"annotations": {"audience": ["everyone"]}}, "audience"),
        ({"annotations": {"audience": "user"}}, "audience"),
        ({"annotations": {"priority": 1.5}}, "priority"),
        ({"annotations": {"priority": True}}, "priority"),
        ({"annotations": {"lastModified": "2025-01-12"}}, "lastModified"),
        ({"annotations": {"lastModified": "2025-01-12T15:00:58"}}, "time zone"),
        ({"annotations": {"lastmodified": "x"}}, "may hold"),
        ({"icons": [{"src": "http://example.com/i.png"}]}, "https"),
        ({"icons": [{"src": "https://example.com/i.png", "theme": "blue"}]}, "theme"),
        ({"icons": [{"src": "https://example.com/i.png", "sizes": "48x48"}]}, "sizes"),
        ({"icons": {"src": "https://example.com/i.png"}}, "list"),
        ({"size": -1}, "size"),
        ({"size": "12"}, "size"),
    ],
)
def test_register_resource_refuses_metadata_of_the_wrong_shape(options, message):
    with pytest.raises(ValueError, match=message):
        ResourceRegistry("bad").register_resource("learn://x", "x", lambda: "x", **options)


def test_last_modified_is_iso_8601_in_utc():
    paris = datetime.timezone(datetime.timedelta(hours=1))
    assert metadata.last_modified(datetime.datetime(2025, 1, 12, 16, 0, 58, tzinfo=paris)) == "2025-01-12T15:00:58Z"
    assert metadata.last_modified(datetime.datetime(2025, 1, 12, 15, 0, 58, 250000)) == "2025-01-12T15:00:58.250000Z"
    assert metadata.last_modified(datetime.date(2025, 1, 12)) == "2025-01-12T00:00:00Z"
    assert metadata.last_modified("2025-01-12T15:00:58+01:00") == "2025-01-12T15:00:58+01:00"


# Static resources from the admin -------------------------------------------------------------------------------


def test_admin_rows_list_their_size_annotations_and_icons(alice):
    row = StaticResource.objects.create(
        uri="learn://row",
        name="row",
        text="héllo",
        audience="assistant user",
        priority=0.3,
        icons=[{"src": "data:image/png;base64,iVBORw0KGgo=", "mimeType": "image/png"}],
    )
    blob = StaticResource.objects.create(uri="learn://blob", name="blob", binary=b"\x00" * 10)
    plain = StaticResource.objects.create(uri="learn://plain", name="plain")
    listed = {
        r["uri"]: r for r in MCPServer(ResourceRegistry("admin")).call("resources/list", {}, anonymous())["resources"]
    }
    row.refresh_from_db()
    assert listed["learn://row"] == {
        "uri": "learn://row",
        "name": "row",
        "size": 6,  # UTF-8 bytes
        "annotations": {"audience": ["user", "assistant"], "priority": 0.3, "lastModified": iso(row.updated)},
        "icons": [{"src": "data:image/png;base64,iVBORw0KGgo=", "mimeType": "image/png"}],
    }
    assert listed["learn://blob"]["size"] == 10
    assert listed["learn://plain"] == {
        "uri": "learn://plain",
        "name": "plain",
        "size": 0,
        "annotations": {"lastModified": iso(StaticResource.objects.get(pk=plain.pk).updated)},
    }
    # Saving new content recomputes the size, also with update_fields.
    blob.binary = b"\x00" * 3
    blob.save(update_fields=["binary"])
    assert StaticResource.objects.get(pk=blob.pk).size == 3


def test_the_model_validates_audience_priority_and_icons():
    row = StaticResource(uri="learn://v", name="v", audience="user robot")
    with pytest.raises(ValidationError, match="audience"):
        row.full_clean()
    row = StaticResource(uri="learn://v", name="v", priority=2)
    with pytest.raises(ValidationError) as error:
        row.full_clean()
    assert "priority" in error.value.message_dict
    row = StaticResource(uri="learn://v", name="v", icons=[{"src": "ftp://x"}])
    with pytest.raises(ValidationError, match="https"):
        row.full_clean()


@pytest.fixture
def admin_client_logged_in() -> Client:
    User.objects.create_superuser("admin", "admin@example.com", "admin-password")
    client = Client()
    assert client.login(username="admin", password="admin-password")
    return client


def admin_form(**overrides: str) -> dict[str, str]:
    data = {
        "uri": "app://meta",
        "name": "meta",
        "title": "",
        "description": "",
        "mime_type": "text/plain",
        "enabled": "on",
        "text": "Hello",
        "binary": "",
        "access": "public",
        "required_scopes": "",
        "audience": "user",
        "priority": "0.5",
        "icons": '[{"src": "https://example.com/i.png", "mimeType": "image/png"}]',
    }
    data.update(overrides)
    return data


def test_the_admin_form_edits_the_metadata(admin_client_logged_in):
    url = reverse("admin:mcp_resources_staticresource_add")
    page = admin_client_logged_in.get(url).content.decode()
    assert 'name="audience"' in page
    assert 'name="priority"' in page
    assert 'name="icons"' in page
    assert admin_client_logged_in.post(url, admin_form()).status_code == 302
    row = StaticResource.objects.get(uri="app://meta")
    assert (row.audience, row.priority, row.icons, row.size) == (
        "user",
        0.5,
        [{"src": "https://example.com/i.png", "mimeType": "image/png"}],
        5,
    )
    # No icons is an empty list, not a JSON null.
    assert admin_client_logged_in.post(url, admin_form(uri="app://bare", icons="")).status_code == 302
    assert StaticResource.objects.get(uri="app://bare").icons == []
    refused = admin_client_logged_in.post(url, admin_form(uri="app://bad", icons='[{"src": "http://x"}]'))
    assert refused.status_code == 200
    assert "https" in refused.content.decode()
    assert not StaticResource.objects.filter(uri="app://bad").exists()


def test_the_migration_computes_the_size_of_existing_rows(transactional_db):
    from django.core.management import call_command

    call_command("migrate", "mcp_resources", "0001", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO mcp_resources_staticresource (uri, name, title, description, mime_type, text, access, "
            "required_scopes, enabled, created, updated) VALUES ('learn://old', 'old', '', '', '', 'ab€', 'public', "
            "'', %s, %s, %s)",
            [True, datetime.datetime.now(datetime.UTC), datetime.datetime.now(datetime.UTC)],
        )
    call_command("migrate", "mcp_resources", verbosity=0)
    assert StaticResource.objects.get(uri="learn://old").size == 5


def test_templates_list_carries_a_templates_icons_and_annotations():
    class Illustrated(NoteSource):
        icons = ({"src": "https://example.com/notes.png"},)
        annotations = {"audience": ["user"]}

    (descriptor,) = server_for(Illustrated).call("resources/templates/list", {}, anonymous())["resourceTemplates"]
    assert descriptor["icons"] == [{"src": "https://example.com/notes.png"}]
    assert descriptor["annotations"] == {"audience": ["user"]}
    assert uris([]) == []
