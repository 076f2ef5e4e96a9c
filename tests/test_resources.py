"""Resource templates: contents normalization and the model-backed template hooks."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser, User
from django.test import RequestFactory

from mcp_resources.exceptions import ResourceNotFound
from mcp_resources.registries import registry
from mcp_resources.resources import ModelResourceTemplate, ResourceTemplate, normalize_contents
from testproject.library.models import Document

URI = "app://thing/1"

# normalize_contents -----------------------------------------------------------------------------------------


def test_str_becomes_text_with_uri_and_mime_type():
    assert normalize_contents("hello", uri=URI, mime_type="text/plain") == [
        {"text": "hello", "uri": URI, "mimeType": "text/plain"}
    ]


def test_empty_string_is_valid_text():
    assert normalize_contents("", uri=URI, mime_type=None) == [{"text": "", "uri": URI}]


@pytest.mark.parametrize("value", [b"\x00\xffPNG", bytearray(b"\x00\xffPNG"), memoryview(b"\x00\xffPNG")])
def test_bytes_become_a_base64_blob(value):
    assert normalize_contents(value, uri=URI, mime_type="image/png") == [
        {"blob": base64.b64encode(b"\x00\xffPNG").decode(), "uri": URI, "mimeType": "image/png"}
    ]


def test_without_a_mime_type_none_is_added():
    (entry,) = normalize_contents("x", uri=URI, mime_type=None)
    assert "mimeType" not in entry
    (entry,) = normalize_contents("x", uri=URI, mime_type="")
    assert "mimeType" not in entry


def test_dict_with_text_keeps_its_own_fields():
    item = {"text": "{}", "mimeType": "application/json", "uri": "app://other", "_meta": {"k": 1}}
    assert normalize_contents(item, uri=URI, mime_type="text/plain") == [item]


def test_dict_gets_defaults_and_is_not_mutated():
    item = {"text": "x"}
    assert normalize_contents(item, uri=URI, mime_type="text/plain") == [
        {"text": "x", "uri": URI, "mimeType": "text/plain"}
    ]
    assert item == {"text": "x"}


def test_dict_with_bytes_blob_is_encoded_and_str_blob_kept():
    assert normalize_contents({"blob": b"\x01\x02"}, uri=URI, mime_type=None) == [{"blob": "AQI=", "uri": URI}]
    assert normalize_contents({"blob": "AQI="}, uri=URI, mime_type=None) == [{"blob": "AQI=", "uri": URI}]


def test_list_and_tuple_of_mixed_items():
    expected = [
        {"text": "a", "uri": URI, "mimeType": "text/plain"},
        {"blob": "Yg==", "uri": URI, "mimeType": "text/plain"},
        {"text": "c", "uri": "app://c", "mimeType": "text/csv"},
    ]
    items = ["a", b"b", {"text": "c", "uri": "app://c", "mimeType": "text/csv"}]
    assert normalize_contents(items, uri=URI, mime_type="text/plain") == expected
    assert normalize_contents(tuple(items), uri=URI, mime_type="text/plain") == expected


@pytest.mark.parametrize("empty", [[], ()])
def test_empty_contents_are_refused(empty):
    with pytest.raises(TypeError):
        normalize_contents(empty, uri=URI, mime_type=None)


@pytest.mark.parametrize(
    "item",
    [
        {"text": "a", "blob": "Yg=="},
        {"text": "a", "blob": b"b"},
        {},
        {"uri": URI},
    ],
    ids=["text-and-blob", "text-and-bytes", "empty-dict", "neither"],
)
def test_items_need_exactly_one_of_text_or_blob(item):
    with pytest.raises(TypeError):
        normalize_contents(item, uri=URI, mime_type=None)


@pytest.mark.parametrize("item", [{"text": 1}, {"text": b"x"}, {"text": None}, {"blob": 5}, {"blob": None}])
def test_text_and_blob_types_are_checked(item):
    with pytest.raises(TypeError):
        normalize_contents(item, uri=URI, mime_type=None)


@pytest.mark.parametrize("value", [None, 1, 1.5, object(), {"text"}, [None], ["ok", 3]])
def test_unsupported_values_are_refused(value):
    with pytest.raises(TypeError):
        normalize_contents(value, uri=URI, mime_type=None)


# ResourceTemplate -------------------------------------------------------------------------------------------


class Plain(ResourceTemplate):
    name = "plain"
    uri_template = "plain://items/{id}"
    title = "Plain items"
    description = "Items."
    mime_type = "text/plain"
    icons = ({"src": "https://example.com/i.png"},)
    annotations = {"audience": ["user"]}


def test_template_compiles_once_and_parses_uris():
    template = Plain()
    assert template.compiled is template.compiled
    assert template.parse_uri("plain://items/7") == {"id": "7"}
    assert template.parse_uri("plain://items/7/x") is None


def test_template_descriptor():
    assert Plain().get_descriptor() == {
        "uriTemplate": "plain://items/{id}",
        "name": "plain",
        "title": "Plain items",
        "description": "Items.",
        "mimeType": "text/plain",
        "icons": [{"src": "https://example.com/i.png"}],
        "annotations": {"audience": ["user"]},
    }


def test_minimal_descriptor_has_only_uri_template_and_name():
    class Bare(ResourceTemplate):
        name = "bare"
        uri_template = "bare://{id}"

    assert Bare().get_descriptor() == {"uriTemplate": "bare://{id}", "name": "bare"}


def test_base_read_is_not_implemented():
    with pytest.raises(NotImplementedError):
        Plain().read(None, "plain://items/1", {"id": "1"})
    assert not Plain().lists_instances


# ModelResourceTemplate --------------------------------------------------------------------------------------


class OwnDocuments(ModelResourceTemplate):
    model = Document
    name = "own-documents"
    uri_template = "test-docs://documents/{id}"
    mime_type = "text/plain"
    ordering = ("created", "id")

    def get_queryset(self, request: Any) -> Any:
        return Document.objects.filter(owner_id=request.user.pk)

    def get_contents(self, request: Any, obj: Any) -> Any:
        return [{"text": obj.body}]


class DocumentsByOwner(ModelResourceTemplate):
    model = Document
    name = "by-owner"
    uri_template = "test-docs://users/{user}/documents/{id}"
    lookup_fields = {"user": "owner__username", "id": "id"}

    def get_queryset(self, request: Any) -> Any:
        return Document.objects.filter(owner_id=request.user.pk)


class UsersByName(ModelResourceTemplate):
    model = User
    name = "users"
    uri_template = "test-users://{username}"

    def get_queryset(self, request: Any) -> Any:
        return User.objects.all()


class Unscoped(ModelResourceTemplate):
    model = Document
    name = "unscoped"
    uri_template = "test-docs://unscoped/{id}"


@pytest.fixture
def doc(alice: User) -> Document:
    return Document.objects.create(owner=alice, title="Alice's notes", body="secret body")


def request_for(user: Any) -> Any:
    request = RequestFactory().get("/mcp")
    request.user = user
    return request


@pytest.mark.django_db
def test_get_uri_expands_the_lookup_fields(doc):
    assert OwnDocuments().get_uri(doc) == f"test-docs://documents/{doc.pk}"
    assert DocumentsByOwner().get_uri(doc) == f"test-docs://users/alice/documents/{doc.pk}"


@pytest.mark.django_db
def test_get_uri_round_trips_through_parse_uri_and_get_object(alice, doc):
    template = DocumentsByOwner()
    variables = template.parse_uri(template.get_uri(doc))
    assert variables == {"user": "alice", "id": str(doc.pk)}
    assert template.get_object(request_for(alice), variables) == doc


@pytest.mark.django_db
def test_get_object_returns_the_callers_record(alice, doc):
    assert OwnDocuments().get_object(request_for(alice), {"id": str(doc.pk)}) == doc


@pytest.mark.django_db
def test_get_object_of_another_users_record_is_not_found(bob, doc):
    with pytest.raises(ResourceNotFound):
        OwnDocuments().get_object(request_for(bob), {"id": str(doc.pk)})
    with pytest.raises(ResourceNotFound):
        OwnDocuments().get_object(request_for(AnonymousUser()), {"id": str(doc.pk)})


@pytest.mark.django_db
@pytest.mark.parametrize(
    "bad_id",
    ["abc", "", "1.5", "1e3", "99999999999999999999999999", "-99999999999999999999999999", "1\x00", "\ud800"],
)
def test_get_object_with_a_bad_id_is_not_found(alice, doc, bad_id):
    with pytest.raises(ResourceNotFound):
        OwnDocuments().get_object(request_for(alice), {"id": bad_id})


@pytest.mark.django_db
def test_get_object_missing_id_is_not_found(alice):
    with pytest.raises(ResourceNotFound):
        OwnDocuments().get_object(request_for(alice), {"id": "12345"})


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["ali\x00ce", "alice\x00", "\ud800", "nobody"])
def test_get_object_with_unstorable_text_is_not_found(alice, name):
    # "%00" decodes to NUL, which PostgreSQL refuses to compare; a lone surrogate cannot be encoded.
    template = UsersByName()
    assert template.get_object(request_for(alice), {"username": "alice"}) == alice
    with pytest.raises(ResourceNotFound):
        template.get_object(request_for(alice), {"username": name})


@pytest.mark.django_db
def test_read_returns_the_contents_of_the_callers_record(alice, bob, doc):
    template = OwnDocuments()
    uri = template.get_uri(doc)
    assert template.read(request_for(alice), uri, template.parse_uri(uri)) == [{"text": "secret body"}]
    with pytest.raises(ResourceNotFound):
        template.read(request_for(bob), uri, template.parse_uri(uri))


@pytest.mark.django_db
def test_default_contents_and_resource(alice, doc):
    template = DocumentsByOwner()
    assert template.get_contents(request_for(alice), doc) == "Alice's notes"
    assert template.get_resource_name(doc) == "Alice's notes"
    assert template.get_resource(request_for(alice), doc) == {
        "uri": f"test-docs://users/alice/documents/{doc.pk}",
        "name": "Alice's notes",
    }
    assert OwnDocuments().get_resource(request_for(alice), doc)["mimeType"] == "text/plain"


@pytest.mark.django_db
def test_base_get_queryset_returns_no_rows(alice, doc):
    queryset = Unscoped().get_queryset(request_for(alice))
    assert queryset.model is Document
    assert list(queryset) == []
    assert Document.objects.count() == 1
    with pytest.raises(ResourceNotFound):
        Unscoped().get_object(request_for(alice), {"id": str(doc.pk)})


def test_lookups_default_to_the_variables():
    assert OwnDocuments().get_lookups() == {"id": "id"}
    assert DocumentsByOwner().get_lookups() == {"user": "owner__username", "id": "id"}


def test_model_templates_list_instances_unless_disabled():
    class NotListed(OwnDocuments):
        listable = False

    assert OwnDocuments().lists_instances
    assert not NotListed().lists_instances


@pytest.mark.django_db
def test_demo_documents_template_reads_only_the_owners_documents(alice, bob, doc):
    template = registry.get_template("documents")
    assert template is not None
    uri = f"learn://documents/{doc.pk}"
    assert template.read(request_for(alice), uri, template.parse_uri(uri)) == [{"text": "secret body"}]
    with pytest.raises(ResourceNotFound):
        template.read(request_for(bob), uri, template.parse_uri(uri))
    with pytest.raises(ResourceNotFound):
        template.read(request_for(alice), "learn://documents/abc", {"id": "abc"})
