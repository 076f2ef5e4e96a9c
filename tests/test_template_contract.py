"""Model templates honour the contract of ``list()`` callbacks, and templates are checked before they serve (issue 15).

- ``mcp_resources.E022``: a template's ``mime_type`` over the 128 characters a list entry may carry.
- ``mcp_resources.E023``: a model template whose URI variables do not identify one record (a lookup that is not
  unique): it listed the same URI twice in one page, and its read answered -32603 (``MultipleObjectsReturned``).
- At run time, a record whose listed URI, name or ``mimeType`` breaks the limits, or whose listed URI would not read
  it back, is a generic error and a log line (tests/test_listing_plan.py covers the URI and name limits on both
  listing paths).
- ``parse_uri`` overrides and ``ResourceError``, as docs/resources.md#methods-and-hooks and
  docs/resources.md#resourcenotfound-resourceerror-and-other-errors describe them: a URI refused by ``parse_uri``
  with a message, a read answering not-found or an error message, in both eras.
"""

from __future__ import annotations

import datetime
import logging
from typing import Any, ClassVar

import pytest
from django.contrib.auth.models import Permission, User
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest
from django.urls import path

from mcp_resources import MCPServer, MCPView, ResourceError, ResourceNotFound, ResourceRegistry, ResourceTemplate
from mcp_resources.checks import check_templates
from mcp_resources.exceptions import INTERNAL_ERROR, INVALID_PARAMS, RESOURCE_NOT_FOUND_2025_11_25, MCPError
from mcp_resources.protocol.versions import V2025_11_25, V2026_07_28
from mcp_resources.resources import ModelResourceTemplate
from mcp_resources.test import MCPClient
from testproject.library.models import Document, Note
from tests.listing_support import (
    DocumentSource,
    NoteSource,
    assert_generic_internal_error,
    context,
    server_for,
    walk,
)

ERAS = [V2026_07_28, V2025_11_25]
NOT_FOUND = {V2026_07_28: INVALID_PARAMS, V2025_11_25: RESOURCE_NOT_FOUND_2025_11_25}


def ids(messages: list[checks.CheckMessage]) -> list[str]:
    return [message.id for message in messages]


def checked(*templates: type[ResourceTemplate]) -> list[checks.CheckMessage]:
    registry = ResourceRegistry("contract")
    for template in templates:
        registry.register(template)
    return check_templates(registry)


# mcp_resources.E022: mime_type -------------------------------------------------------------------------------


@pytest.mark.parametrize("mime_type", ["text/" + "x" * 300, "a" * 129, b"text/plain", 7])
def test_e022_mime_type_longer_than_a_list_entry_may_carry(mime_type: Any) -> None:
    bad = type("LongMime", (DocumentSource,), {"name": "long-mime", "mime_type": mime_type})
    messages = checked(bad)
    assert ids(messages) == ["mcp_resources.E022"]
    assert messages[0].obj is bad


@pytest.mark.parametrize("mime_type", [None, "", "text/plain", "a" * 128])
def test_e022_accepts_mime_types_up_to_128_characters(mime_type: Any) -> None:
    assert checked(type("Mime", (DocumentSource,), {"name": "mime", "mime_type": mime_type})) == []


# mcp_resources.E023: URI variables that identify one record -----------------------------------------------------


class NotesByTitle(NoteSource):
    """The issue's case: two notes may share a title, so two records would share one URI."""

    name = "notes-by-title"
    uri_template = "learn://notes-by-title/{title}"


class DocumentsByOwnerName(DocumentSource):
    name = "by-owner-name"
    uri_template = "learn://owners/{user}"
    lookup_fields: ClassVar[dict[str, str]] = {"user": "owner__username"}


class DocumentsOfAnOwner(DocumentSource):
    """``owner__username`` fixes the owner (usernames are unique) and ``id`` the document."""

    name = "of-an-owner"
    uri_template = "learn://owners/{user}/documents/{id}"
    lookup_fields: ClassVar[dict[str, str]] = {"user": "owner__username", "id": "id"}


class UsersByName(ModelResourceTemplate):
    model = User
    name = "users"
    uri_template = "learn://users/{username}"

    def get_queryset(self, request: Any) -> Any:
        return User.objects.all()


class Permissions(ModelResourceTemplate):
    """``Permission`` is unique on ``(content_type, codename)``; ``ContentType`` on ``(app_label, model)``."""

    model = Permission
    name = "permissions"
    uri_template = "learn://permissions/{app}/{model}/{codename}"
    lookup_fields: ClassVar[dict[str, str]] = {
        "app": "content_type__app_label",
        "model": "content_type__model",
        "codename": "codename",
    }

    def get_queryset(self, request: Any) -> Any:
        return Permission.objects.all()


class PermissionsByCodename(Permissions):
    """Without the model, an app's codename may be any of its models' permissions."""

    name = "permissions-by-codename"
    uri_template = "learn://permissions/{app}/{codename}"
    lookup_fields: ClassVar[dict[str, str]] = {"app": "content_type__app_label", "codename": "codename"}


class CaseInsensitiveTitles(NoteSource):
    name = "iexact"
    uri_template = "learn://iexact/{title}"
    lookup_fields: ClassVar[dict[str, str]] = {"title": "title__iexact"}


@pytest.mark.parametrize(
    "template",
    [NotesByTitle, DocumentsByOwnerName, PermissionsByCodename, CaseInsensitiveTitles],
    ids=lambda t: t.__name__,
)
def test_e023_uri_variables_that_do_not_identify_one_record(template: type[ModelResourceTemplate]) -> None:
    messages = checked(template)
    assert ids(messages) == ["mcp_resources.E023"]
    assert "do not identify one" in messages[0].msg


@pytest.mark.parametrize(
    "template",
    [DocumentSource, DocumentsOfAnOwner, UsersByName, Permissions],
    ids=lambda t: t.__name__,
)
def test_e023_accepts_unique_fields_and_unique_constraints(template: type[ModelResourceTemplate]) -> None:
    assert checked(template) == []


@pytest.mark.django_db
def test_e023_refuses_what_lists_one_uri_twice_and_cannot_be_read(alice: User, settings: Any) -> None:
    """What the check prevents, and refuses to serve: both notes listed under one URI, and the read of it a generic
    error (seen here with the check silenced)."""
    Note.objects.create(owner=alice, title="same", text="one")
    Note.objects.create(owner=alice, title="same", text="two")
    with pytest.raises(ImproperlyConfigured, match=r"^\(mcp_resources\.E023\) NotesByTitle's URI variables"):
        server_for(NotesByTitle).call("resources/list", {}, context(alice))
    settings.SILENCED_SYSTEM_CHECKS = ["mcp_resources.E023"]
    server = server_for(NotesByTitle)
    listed = [r["uri"] for page in walk(server, context(alice)) for r in page["resources"]]
    assert listed == ["learn://notes-by-title/same"] * 2
    assert_generic_internal_error(lambda: server.call("resources/read", {"uri": listed[0]}, context(alice)))
    assert ids(checked(NotesByTitle)) == ["mcp_resources.E023"]


# The list contract at run time, for records of model templates -----------------------------------------------------


class OwnMime(DocumentSource):
    """``get_resource()`` overridden with a mime type of its own for some records."""

    name = "own-mime"

    def get_resource(self, request: HttpRequest, obj: Any) -> dict[str, Any]:
        resource = super().get_resource(request, obj)
        if obj.title == "long":
            resource["mimeType"] = "text/" + "x" * 300
        return resource


class PaddedUris(DocumentSource):
    """``get_uri()`` overridden to spell ids with leading zeros: URIs no read accepts (``01`` is not ``1``)."""

    name = "padded"

    def get_uri(self, obj: Any) -> str:
        return f"learn://documents/{obj.pk:06d}"


@pytest.mark.django_db
def test_a_records_mime_type_over_128_characters_is_a_generic_error_and_a_log_line(
    alice: User, caplog: pytest.LogCaptureFixture
) -> None:
    Document.objects.create(owner=alice, title="fine", body="b")
    long = Document.objects.create(owner=alice, title="long", body="b")
    with caplog.at_level(logging.ERROR, logger="mcp_resources.listing"):
        assert_generic_internal_error(lambda: walk(server_for(OwnMime), context(alice)))
    assert f"own-mime: the record at ({long.created!r}, {long.pk}) has a mimeType over 128 characters" in caplog.text


@pytest.mark.django_db
def test_a_listed_uri_that_would_not_read_its_record_is_a_generic_error_and_a_log_line(
    alice: User, caplog: pytest.LogCaptureFixture
) -> None:
    Document.objects.create(owner=alice, title="one", body="b")
    with caplog.at_level(logging.ERROR, logger="mcp_resources.listing"):
        assert_generic_internal_error(lambda: walk(server_for(PaddedUris), context(alice)))
    assert "not its template's one spelling" in caplog.text


# parse_uri overrides and ResourceError (docs/resources.md#methods-and-hooks) -------------------------------------

PROFILES = {"7": "Seven's bio"}
read_log: list[Any] = []


class UserProfiles(ResourceTemplate):
    """The seed's ``parse_uri``: ``file:///users/<id>`` with a non-empty id, anything else refused with a message;
    its ``read`` answers not-found for an unknown id and an error message when the profile service fails."""

    name = "profiles"
    uri_template = "file:///users/{id}"
    mime_type = "text/plain"
    access = "public"

    def parse_uri(self, uri: str) -> Any:
        prefix = "file:///users/"
        if uri.startswith(prefix) and uri != prefix and uri[len(prefix) :] != "down":
            return super().parse_uri(uri)
        raise ResourceError(f"unsupported user URI: {uri}")

    def read(self, request: HttpRequest, uri: str, variables: Any) -> Any:
        read_log.append(variables)
        if variables["id"] == "broken":
            raise ResourceError("the profile service is unavailable")
        bio = PROFILES.get(variables["id"])
        if bio is None:
            raise ResourceNotFound()
        return bio


class DailyReport(ResourceTemplate):
    """The ``parse_uri`` of docs/resources.md: the value ``read`` receives is a date, not the variables."""

    name = "reports"
    uri_template = "reports://daily/{date}"
    mime_type = "text/csv"
    access = "public"

    def parse_uri(self, uri: str) -> Any:
        variables = super().parse_uri(uri)
        if variables is None:
            return None
        try:
            return datetime.date.fromisoformat(variables["date"])
        except ValueError:
            raise ResourceError("The date must be YYYY-MM-DD.") from None

    def read(self, request: HttpRequest, uri: str, variables: Any) -> Any:
        read_log.append(variables)
        return f"date,total\n{variables.isoformat()},0\n"


_registry = ResourceRegistry("parse-uri")
_registry.register(UserProfiles)
_registry.register(DailyReport)
urlpatterns = [path("mcp", MCPView.as_view(server=MCPServer(_registry)))]


@pytest.fixture
def client(settings: Any, request: pytest.FixtureRequest) -> MCPClient:
    """An MCP client of this module's endpoint, in the protocol version of the test's ``version`` parameter."""
    settings.ROOT_URLCONF = __name__
    read_log.clear()
    return MCPClient(protocol_version=request.getfixturevalue("version"), path="/mcp")


def error_of(client: MCPClient, uri: str) -> MCPError:
    with pytest.raises(MCPError) as info:
        client.read_resource(uri)
    return info.value


@pytest.mark.django_db
@pytest.mark.parametrize("version", ERAS)
def test_parse_uri_refuses_a_uri_with_its_message_before_any_read(client: MCPClient, version: str) -> None:
    for uri in ("file:///users/", "file:///users/down"):
        error = error_of(client, uri)
        assert (error.code, error.message, error.data) == (INTERNAL_ERROR, f"unsupported user URI: {uri}", None)
    assert read_log == []


@pytest.mark.django_db
@pytest.mark.parametrize("version", ERAS)
def test_read_answers_contents_not_found_or_its_error_message(client: MCPClient, version: str) -> None:
    assert client.read_resource("file:///users/7")["contents"] == [
        {"uri": "file:///users/7", "text": "Seven's bio", "mimeType": "text/plain"}
    ]
    missing = error_of(client, "file:///users/8")
    assert (missing.code, missing.message, missing.data) == (
        NOT_FOUND[version],
        "Resource not found",
        {"uri": "file:///users/8"},
    )
    failed = error_of(client, "file:///users/broken")
    assert (failed.code, failed.message, failed.data) == (INTERNAL_ERROR, "the profile service is unavailable", None)
    assert read_log == [{"id": "7"}, {"id": "8"}, {"id": "broken"}]


@pytest.mark.django_db
@pytest.mark.parametrize("version", ERAS)
def test_read_receives_what_parse_uri_returned(client: MCPClient, version: str) -> None:
    assert client.read_resource("reports://daily/2024-01-05")["contents"][0]["text"] == "date,total\n2024-01-05,0\n"
    assert read_log == [datetime.date(2024, 1, 5)]
    refused = error_of(client, "reports://daily/yesterday")
    assert (refused.code, refused.message) == (INTERNAL_ERROR, "The date must be YYYY-MM-DD.")
    # Python 3.11 parses 20240105 as the same date: another spelling of the record, so not found.
    other = error_of(client, "reports://daily/20240105")
    assert (other.code, other.data) == (NOT_FOUND[version], {"uri": "reports://daily/20240105"})
    assert read_log == [datetime.date(2024, 1, 5)]
