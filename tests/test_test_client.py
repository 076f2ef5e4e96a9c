"""The public MCP test client, ``mcp_resources.test.MCPClient``: what a project's own test suite calls.

It speaks to the project's endpoint through Django's test client (the real view, the real middleware) as the
user and scopes it is told, with no server and no token. Each test would fail if the client dropped that part of
its contract: the protocol version, the identity, the scopes and their hierarchy, the cursors, the errors of each
version, the 401/403 answers, or the middleware.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from mcp_resources.exceptions import AuthenticationRequired, InsufficientScope, MCPError
from mcp_resources.test import CLIENT_ID, MCPClient
from testproject.library.models import Document, Note
from tests.listing_support import handbook_uris
from tests.urls_extra import MIDDLEWARE_LOG

pytestmark = pytest.mark.django_db

STATICS = ["test://static-binary", "test://static-text", "test://watched-resource"]  # the demo's, in URI order
HANDBOOK = handbook_uris()  # the demo's handbook, listed last, the same for every reader


@pytest.fixture
def documents(alice: Any, bob: Any) -> dict[str, list[Document]]:
    return {
        "alice": [Document.objects.create(owner=alice, title=f"A{i}", body=f"alice body {i}") for i in range(5)],
        "bob": [Document.objects.create(owner=bob, title="B0", body="bob body 0")],
    }


def uri_of(document: Document) -> str:
    return f"learn://documents/{document.pk}"


def client_as(user: Any, scopes: tuple[str, ...] = ("documents:read",), **kwargs: Any) -> MCPClient:
    client = MCPClient(**kwargs)
    client.force_authenticate(user, scopes)
    return client


# Both protocol versions ------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25"])
def test_lists_and_reads_as_the_given_user(alice: Any, documents: dict[str, list[Document]], version: str) -> None:
    client = client_as(alice, protocol_version=version)
    uris = [resource["uri"] for resource in client.list_all_resources()]
    assert uris == [*STATICS, *(uri_of(document) for document in documents["alice"]), *HANDBOOK]
    assert (client.session_id is not None) == (version == "2025-11-25")  # a session only where the version has one
    read = client.read_resource(uri_of(documents["alice"][2]))
    assert read["contents"] == [
        {"uri": uri_of(documents["alice"][2]), "mimeType": "text/plain", "text": "alice body 2"}
    ]
    templates = [template["uriTemplate"] for template in client.list_templates()["resourceTemplates"]]
    assert "learn://documents/{id}" in templates


def test_2026_07_28_is_the_default_and_stateless(alice: Any, documents: dict[str, list[Document]]) -> None:
    client = client_as(alice)
    assert client.protocol_version == "2026-07-28"
    response = client.post_message("resources/read", {"uri": uri_of(documents["alice"][0])})
    assert response.status_code == 200
    assert "Mcp-Session-Id" not in response.headers
    assert client.session_id is None
    result = response.json()["result"]
    assert result["resultType"] == "complete"  # the 2026-07-28 envelope
    assert result["cacheScope"] == "private"


def test_2025_11_25_opens_one_session_and_keeps_it(alice: Any, documents: dict[str, list[Document]]) -> None:
    client = client_as(alice, protocol_version="2025-11-25")
    assert client.session_id is None
    client.read_resource(uri_of(documents["alice"][0]))
    session = client.session_id
    assert session
    response = client.post_message("resources/read", {"uri": uri_of(documents["alice"][1])})
    assert client.session_id == session
    assert response.status_code == 200
    assert "resultType" not in response.json()["result"]  # no 2026-07-28 envelope in a session
    # The session is the endpoint's: a call with another session id is refused.
    client.session_id = "not-a-session"
    with pytest.raises(MCPError):
        client.call("ping")


def test_force_authenticate_again_starts_a_new_session(
    alice: Any, bob: Any, documents: dict[str, list[Document]]
) -> None:
    client = client_as(alice, protocol_version="2025-11-25")
    client.call("ping")
    first = client.session_id
    client.force_authenticate(bob, ["documents:read"])
    uris = [resource["uri"] for resource in client.list_all_resources()]
    assert client.session_id not in (None, first)
    assert uris == [*STATICS, uri_of(documents["bob"][0]), *HANDBOOK]


def test_end_session_ends_it_at_the_endpoint(alice: Any, documents: dict[str, list[Document]]) -> None:
    client = client_as(alice, protocol_version="2025-11-25")
    client.call("ping")
    ended = client.session_id
    client.end_session()
    assert client.session_id is None
    response = client.generic(
        "POST",
        client.path,
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
        content_type="application/json",
        headers={
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-11-25",
            "Mcp-Session-Id": ended,
        },
    )
    assert response.status_code == 404  # the ended session is gone
    client.read_resource(uri_of(documents["alice"][0]))  # and the client opens a new one when called again
    assert client.session_id not in (None, ended)


def test_session_clients_as_context_managers_stay_within_the_cap(
    alice: Any, documents: dict[str, list[Document]]
) -> None:
    """A person holds a bounded number of sessions (ten on the test project's LocMemCache), none replaced in its
    first minute: forty clients in a burst fit, each ending its session as it leaves its block."""
    for _ in range(40):
        with client_as(alice, protocol_version="2025-11-25") as client:
            client.read_resource(uri_of(documents["alice"][0]))


# Identity and scopes --------------------------------------------------------------------------------------


def test_the_template_sees_what_a_token_would_give_it(settings: Any, alice: Any) -> None:
    settings.ROOT_URLCONF = "tests.urls_auth"
    client = client_as(alice, ("a:read",))
    caller = json.loads(client.read_resource("auth://whoami/1")["contents"][0]["text"])
    assert caller == {
        "user": "alice",
        "auth_is_principal": True,
        "subject": str(alice.pk),
        "client_id": CLIENT_ID,
        "scopes": ["a:read"],
        "audience": [settings.MCP_RESOURCES["RESOURCE_URI"]],
    }


def test_the_subject_comes_from_the_authentication_class(settings: Any, alice: Any) -> None:
    settings.ROOT_URLCONF = "tests.urls_auth"
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "AUTHENTICATION_CLASS": "tests.urls_auth.UsernameSubject"}
    client = client_as(alice, ("a:read",))
    assert json.loads(client.read_resource("auth://whoami/1")["contents"][0]["text"])["subject"] == "alice"


def test_scopes_are_the_ones_given(alice: Any, documents: dict[str, list[Document]]) -> None:
    client = client_as(alice, ("profile",))
    with pytest.raises(InsufficientScope) as listing:
        client.list_resources()
    assert listing.value.scopes == ("documents:read",)
    with pytest.raises(InsufficientScope):
        client.read_resource(uri_of(documents["alice"][0]))
    assert client.read_resource("test://static-text")["contents"][0]["text"].startswith("This is the content")


def test_scopes_are_expanded_by_the_scope_hierarchy(
    settings: Any, alice: Any, documents: dict[str, list[Document]]
) -> None:
    uri = uri_of(documents["alice"][0])
    assert settings.MCP_RESOURCES["SCOPE_HIERARCHY"] == {"documents": ["documents:read"]}  # the demo's
    client = client_as(alice, ("documents",))
    assert client.read_resource(uri)["contents"][0]["text"] == "alice body 0"
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "SCOPE_HIERARCHY": {}}
    client.force_authenticate(alice, ["documents"])
    with pytest.raises(InsufficientScope):
        client.read_resource(uri)


def test_the_user_sees_only_their_own_records(bob: Any, documents: dict[str, list[Document]]) -> None:
    client = client_as(bob)
    uris = [resource["uri"] for resource in client.list_all_resources()]
    assert uris == [*STATICS, uri_of(documents["bob"][0]), *HANDBOOK]
    with pytest.raises(MCPError) as foreign:
        client.read_resource(uri_of(documents["alice"][0]))
    assert foreign.value.code == -32602


# Cursors --------------------------------------------------------------------------------------------------


def test_list_all_resources_follows_the_cursors(
    settings: Any, alice: Any, documents: dict[str, list[Document]]
) -> None:
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "PAGE_SIZE": 2}
    notes = [Note.objects.create(owner=alice, title=f"note {i}", text="n") for i in range(2)]
    client = client_as(alice)
    pages = []
    cursor = None
    while True:
        page = client.list_resources(cursor=cursor)
        pages.append([resource["uri"] for resource in page["resources"]])
        cursor = page.get("nextCursor")
        if cursor is None:
            break
    expected = [
        *STATICS,
        *(uri_of(document) for document in documents["alice"]),
        *(f"learn://notes/{note.pk}" for note in notes),
        *HANDBOOK,
    ]
    assert len(pages) == 5 + len(HANDBOOK) // 2
    assert all(len(page) <= 2 for page in pages)
    assert [uri for page in pages for uri in page] == expected
    assert [resource["uri"] for resource in client.list_all_resources()] == expected


def test_prefix_is_passed_on(alice: Any, documents: dict[str, list[Document]]) -> None:
    client = client_as(alice)
    uris = [resource["uri"] for resource in client.list_all_resources(prefix="learn://documents/")]
    assert uris == [uri_of(document) for document in documents["alice"]]


# Errors ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("version", "code"), [("2026-07-28", -32602), ("2025-11-25", -32002)])
def test_not_found_has_the_code_of_the_version(alice: Any, version: str, code: int) -> None:
    client = client_as(alice, protocol_version=version)
    uri = "learn://documents/987654"
    with pytest.raises(MCPError) as missing:
        client.read_resource(uri)
    assert missing.value.code == code
    assert missing.value.data == {"uri": uri}
    assert missing.value.message == "Resource not found"


def test_other_errors_come_back_as_mcp_errors(alice: Any) -> None:
    client = client_as(alice)
    with pytest.raises(MCPError) as cursor:
        client.list_resources(cursor="not-a-cursor")
    assert (cursor.value.code, cursor.value.message) == (-32602, "Invalid cursor")
    with pytest.raises(MCPError) as method:
        client.call("tools/list")
    assert method.value.code == -32601


@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25"])
def test_anonymous_calls_to_protected_resources_raise_authentication_required(
    documents: dict[str, list[Document]], version: str
) -> None:
    client = MCPClient(protocol_version=version)
    with pytest.raises(AuthenticationRequired) as listing:
        client.list_resources()
    assert 'scope="documents:read"' in listing.value.reason  # the challenge the client received
    with pytest.raises(AuthenticationRequired):
        client.read_resource(uri_of(documents["alice"][0]))


def test_force_authenticate_none_calls_anonymously_again(alice: Any, documents: dict[str, list[Document]]) -> None:
    client = client_as(alice)
    assert client.read_resource(uri_of(documents["alice"][0]))["contents"][0]["text"] == "alice body 0"
    client.force_authenticate(None)
    with pytest.raises(AuthenticationRequired):
        client.read_resource(uri_of(documents["alice"][0]))


def test_anonymous_access_to_public_resources() -> None:
    client = MCPClient(protocol_version="2026-07-28")
    text = client.read_resource("test://static-text")["contents"][0]
    assert text == {
        "uri": "test://static-text",
        "mimeType": "text/plain",
        "text": "This is the content of the static text resource.",
    }
    data = client.read_resource("test://template/42/data")["contents"][0]
    assert data["uri"] == "test://template/42/data"
    assert "42" in data["text"]
    templates = [template["uriTemplate"] for template in client.list_templates()["resourceTemplates"]]
    assert "test://template/{id}/data" in templates


def test_an_anonymous_session_reads_public_resources_where_anything_is_protected() -> None:
    """The demo serves protected templates: an anonymous 2025-11-25 client reads its public resources as an
    anonymous 2026-07-28 client does, and is asked for a token by what needs one (docs/protocol.md)."""
    session_era, stateless = MCPClient(protocol_version="2025-11-25"), MCPClient()
    assert (
        session_era.read_resource("test://static-text")["contents"]
        == (stateless.read_resource("test://static-text")["contents"])
    )
    assert session_era.session_id is not None
    for client in (session_era, stateless):
        with pytest.raises(AuthenticationRequired):
            client.list_resources()


# Middleware -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25"])
def test_requests_go_through_the_middleware(
    settings: Any, alice: Any, documents: dict[str, list[Document]], version: str
) -> None:
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, "tests.urls_extra.RecordingMiddleware"]
    MIDDLEWARE_LOG.clear()
    client = client_as(alice, protocol_version=version)
    client.read_resource(uri_of(documents["alice"][0]))
    response = client.post_message("resources/read", {"uri": uri_of(documents["alice"][1])})
    assert response["X-Recorded-By"] == "RecordingMiddleware"
    reads = [entry for entry in MIDDLEWARE_LOG if entry["status"] == 200 and entry["user"] == "alice"]
    assert len(reads) >= 2
    assert all(entry["method"] == "POST" and entry["path"] == "/mcp" for entry in MIDDLEWARE_LOG)
    if version == "2026-07-28":
        assert [entry["mcp_method"] for entry in MIDDLEWARE_LOG] == ["resources/read", "resources/read"]
    else:  # initialize, notifications/initialized, then the two reads
        assert len(MIDDLEWARE_LOG) == 4
        assert [entry["status"] for entry in MIDDLEWARE_LOG] == [200, 202, 200, 200]


# Unexpected exceptions -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25"])
def test_a_template_bug_is_raised_as_it_is(settings: Any, version: str) -> None:
    """Like DRF's APIClient: the original exception, not ``MCPError("Internal error")`` without a cause."""
    settings.ROOT_URLCONF = "tests.urls_extra"
    client = MCPClient(protocol_version=version, path="/mcp")
    with pytest.raises(RuntimeError, match="hunter2"):
        client.read_resource("extra://boom/1")


@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25"])
def test_raise_request_exception_false_gets_what_a_client_gets(settings: Any, version: str) -> None:
    settings.ROOT_URLCONF = "tests.urls_extra"
    client = MCPClient(protocol_version=version, path="/mcp", raise_request_exception=False)
    with pytest.raises(MCPError) as caught:
        client.read_resource("extra://boom/1")
    assert (caught.value.code, caught.value.message, caught.value.data) == (-32603, "Internal error", None)
    assert client.read_resource("extra://visible/1")["contents"][0]["text"] == "visible 1"  # the client goes on
