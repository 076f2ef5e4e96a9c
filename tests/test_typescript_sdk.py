"""End to end with the TypeScript MCP SDK (the latest ``@modelcontextprotocol/sdk`` 1.x, which speaks 2025-11-25, on
Node 22) against the live demo under uvicorn (Channels' routers and ``MCPEndpoint``), on a Redis database of this
module's own so that a change made in another process reaches the session's GET stream.

The client runs as ``tests/ts/client.mjs``, driven by ``tests/ts/ts_driver.py``; ``make ts-install`` installs it.
Without it (or without Redis) the module is skipped, unless ``CI`` is set: then it fails. The teams project's suite
runs the same client against a project that is not the demo (``tests/projects/teams/tests/test_typescript_sdk.py``).
"""

from __future__ import annotations

import asyncio
import base64
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from testproject.library.management.commands.load_demo_data import PNG
from tests import live
from tests.listing_support import handbook_uris
from tests.test_oauth_e2e import REDIRECT_URI, ScriptedUser

sys.path.insert(0, str(Path(__file__).resolve().parent / "ts"))
import ts_driver

pytestmark = pytest.mark.e2e

NOT_FOUND_2025 = -32002  # "Resource not found" in 2025-11-25 sessions


@pytest.fixture(scope="module", autouse=True)
def _node() -> None:
    ts_driver.require_node()


@pytest.fixture(scope="module")
def demo_project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[live.Project]:
    with (
        live.redis_database() as redis_url,
        live.project(tmp_path_factory.mktemp("project"), redis_url=redis_url) as project,
    ):
        yield project


def connect(client: ts_driver.TSClient, server: live.Server, user: str) -> dict[str, object]:
    result: dict[str, object] = client.call("connect", url=server.url, token=server.token(user))
    return result


def test_sdk_is_the_latest_1x() -> None:
    assert ts_driver.sdk_version().startswith("1.")


def test_every_page_templates_text_and_binary_reads(demo_server: live.Server) -> None:
    alice = demo_server.project.ids("Document", "alice")
    with ts_driver.TSClient() as client:
        session = connect(client, demo_server, "alice")
        assert session["protocolVersion"] == "2025-11-25"
        assert session["sessionId"]
        listing = client.call("list_all")
        uris = [resource["uri"] for resource in listing["resources"]]
        # The static resources (the demo's two, the conformance fixtures' three), 120 documents, 10 notes, 8
        # bookmarks and the handbook (a repository paged by its own token).
        assert listing["pages"] == [50, 50, 50, 43 + len(handbook_uris()) - 50]
        assert uris[:2] == ["learn://about", "learn://logo.png"]
        assert uris[5:125] == [f"learn://documents/{pk}" for pk in alice]
        assert all(uri.startswith("learn://notes/") for uri in uris[125:135])
        assert all(uri.startswith("learn://bookmarks/") for uri in uris[135:143])
        assert uris[143:] == handbook_uris()
        assert len(set(uris)) == len(uris)

        templates = client.call("templates")["resourceTemplates"]
        assert {"learn://documents/{id}", "learn://notes/{id}"} <= {t["uriTemplate"] for t in templates}

        text = client.call("read", uri=f"learn://documents/{alice[0]}")["contents"]
        assert text == [
            {"uri": f"learn://documents/{alice[0]}", "mimeType": "text/plain", "text": "This is document 1 of alice."}
        ]
        (blob,) = client.call("read", uri="learn://logo.png")["contents"]
        assert blob["mimeType"] == "image/png"
        assert base64.b64decode(blob["blob"]) == PNG


@pytest.mark.parametrize("which", ["missing", "foreign"])
def test_missing_and_foreign_records_are_not_found(demo_server: live.Server, which: str) -> None:
    bob = demo_server.project.ids("Document", "bob")
    uri = "learn://documents/999999999" if which == "missing" else f"learn://documents/{bob[0]}"
    with ts_driver.TSClient() as client:
        connect(client, demo_server, "alice")
        with pytest.raises(ts_driver.TSError) as error:
            client.call("read", uri=uri)
        assert error.value.code == NOT_FOUND_2025
        assert "bob" not in error.value.message


def test_subscription_update_arrives_on_the_get_stream(demo_server: live.Server) -> None:
    alice = demo_server.project.ids("Document", "alice")
    uri = f"learn://documents/{alice[1]}"
    with ts_driver.TSClient() as client:
        session = connect(client, demo_server, "alice")
        assert session["capabilities"]["resources"]["subscribe"] is True
        client.call("subscribe", uri=uri)
        demo_server.project.shell(
            "from testproject.library.models import Document; "
            f"d = Document.objects.get(pk={alice[1]}); d.body = 'changed'; d.save()"
        )
        notification = client.notification("notifications/resources/updated")
        assert notification["params"]["uri"] == uri
        assert client.call("read", uri=uri)["contents"][0]["text"] == "changed"


def _browser(user: str) -> ts_driver.TSClient:
    scripted = ScriptedUser(user, user)

    def authorize(url: str) -> str:
        return asyncio.run(scripted.authorize(url))["code"]

    return ts_driver.TSClient(authorize=authorize)


def test_oauth_from_the_bare_url_to_a_listing(demo_server: live.Server) -> None:
    """The TypeScript SDK 1.x knowing only the URL: it connects anonymously (a session of its own), the listing
    answers 401 with the challenge, the SDK authorizes, and the listing repeated on the same transport claims that
    session with the token (issue 26: from anonymous to one caller)."""
    alice = demo_server.project.ids("Document", "alice")
    with _browser("alice") as client:
        connected = client.call(
            "connect", url=demo_server.url, oauth={"redirect_uri": REDIRECT_URI, "client_name": "ts e2e"}
        )
        assert connected["sessionId"] is not None  # opened anonymously: no 401 at initialize
        assert client.call("oauth_state")["authorizations"] == 0
        listing = client.call("list_all")
        assert f"learn://documents/{alice[0]}" in [r["uri"] for r in listing["resources"]]
        assert client.call("session")["sessionId"] == connected["sessionId"]
        state = client.call("oauth_state")
        assert state["authorizations"] == 1
        assert state["registered"] is True
        stored = demo_server.project.stored_token(state["token"])
        assert stored is not None
        assert (stored["resource"], stored["user"]) == ([demo_server.url], "alice")


def test_oauth_authorizes_and_a_fresh_client_lists(demo_server: live.Server) -> None:
    """The TypeScript SDK discovers the demo's authorization server from the 401, registers, authorizes with PKCE and
    the resource indicator, and a client given that token lists."""
    alice = demo_server.project.ids("Document", "alice")
    with _browser("alice") as client:
        client.call("connect", url=demo_server.url, oauth={"redirect_uri": REDIRECT_URI, "client_name": "ts e2e"})
        client.call("list_all")
        state = client.call("oauth_state")
    assert state["authorizations"] == 1
    assert client.authorizations[0].startswith(demo_server.base + "/o/authorize/?")
    assert f"resource={demo_server.url.replace(':', '%3A').replace('/', '%2F')}" in client.authorizations[0]
    stored = demo_server.project.stored_token(state["token"])
    assert stored is not None
    assert (stored["scope"], stored["resource"], stored["user"]) == ("documents:read", [demo_server.url], "alice")
    with ts_driver.TSClient() as fresh:
        fresh.call("connect", url=demo_server.url, token=state["token"])
        listing = fresh.call("list_all")
        assert f"learn://documents/{alice[0]}" in [r["uri"] for r in listing["resources"]]


def test_server_log_has_no_tracebacks(demo_server: live.Server) -> None:
    demo_server.assert_log_clean()
