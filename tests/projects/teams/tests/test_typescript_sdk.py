"""The TypeScript MCP SDK (latest ``@modelcontextprotocol/sdk`` 1.x, 2025-11-25, on Node 22) against the teams
project under uvicorn: every page of a member's inventory, templates, text and binary reads, not-found for missing
and foreign records, a subscription update on the session's GET stream, and the OAuth flow through the project's
own authorization server.

The client is the repository's ``tests/ts/client.mjs`` driven by ``ts_driver`` (on ``sys.path`` through
``pytest.ini``); ``make ts-install`` installs it. Without it the module is skipped, unless ``CI`` is set.
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import Iterator
from typing import Any

import pytest

import live
import ts_driver
from teams.management.commands.seed_teams import PAYLOAD

NOT_FOUND_2025 = -32002


@pytest.fixture(scope="module", autouse=True)
def _node() -> None:
    ts_driver.require_node()


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[live.Project]:
    """On a Redis database of its own: a change saved in another process reaches the server's streams."""
    with (
        live.redis_database() as redis_url,
        live.project(tmp_path_factory.mktemp("teams"), tickets=45, redis_url=redis_url) as made,
    ):
        yield made


@pytest.fixture(scope="module")
def server(project: live.Project) -> Iterator[live.Server]:
    with live.serving(project, name="uvicorn") as served:
        yield served


def inventory(project: live.Project, username: str) -> list[str]:
    """The member's resources in listing order: static first, then each template's records in its ordering."""
    code = (
        "import json; from django.contrib.auth import get_user_model; from teams.models import *; "
        f"u = get_user_model().objects.get(username={username!r}); "
        "print(json.dumps([f'teams://organisations/{o.slug}' for o in Organisation.objects.filter(members=u)"
        ".order_by('slug')]"
        " + [f'teams://projects/{p.pk}' for p in Project.objects.filter(members=u).order_by('id')]"
        " + [f'teams://tickets/{t.pk}' for t in Ticket.objects.filter(project__members=u).order_by('created', 'id')]"
        " + [f'teams://attachments/{a.pk}' for a in Attachment.objects.filter(ticket__project__members=u)"
        ".order_by('id')]))"
    )
    return ["teams://about", *json.loads(project.shell(code))]


def connect(client: ts_driver.TSClient, server: live.Server, user: str) -> Any:
    return client.call("connect", url=server.url, token=server.token(user))


def test_every_page_templates_text_and_binary_reads(server: live.Server) -> None:
    seed = server.project.seed
    with ts_driver.TSClient() as client:
        session = connect(client, server, "ann")
        assert session["protocolVersion"] == "2025-11-25"
        listing = client.call("list_all")
        assert [r["uri"] for r in listing["resources"]] == inventory(server.project, "ann")
        assert listing["pages"][:-1] == [20] * (len(listing["pages"]) - 1)  # PAGE_SIZE
        assert len(listing["pages"]) >= 2

        templates = {t["name"]: t["uriTemplate"] for t in client.call("templates")["resourceTemplates"]}
        assert templates == {
            "organisations": "teams://organisations/{slug}",
            "projects": "teams://projects/{id}",
            "tickets": "teams://tickets/{id}",
            "attachments": "teams://attachments/{id}",
        }

        ticket = seed["tickets"]["secret"][1]
        (text,) = client.call("read", uri=f"teams://tickets/{ticket}")["contents"]
        assert text == {
            "uri": f"teams://tickets/{ticket}",
            "mimeType": "text/markdown",
            "text": "# secret #1\n\nTicket 1 of secret.\n",
        }
        (blob,) = client.call("read", uri=f"teams://attachments/{seed['attachments']['rocket']}")["contents"]
        assert blob["mimeType"] == "application/octet-stream"
        assert base64.b64decode(blob["blob"]) == PAYLOAD


@pytest.mark.parametrize("which", ["missing", "foreign", "no-members"])
def test_missing_and_foreign_records_are_not_found(server: live.Server, which: str) -> None:
    seed = server.project.seed
    uri = {
        "missing": "teams://tickets/999999999",
        "foreign": f"teams://tickets/{seed['tickets']['portal'][0]}",  # cat's project
        "no-members": f"teams://projects/{seed['projects']['orphan']}",
    }[which]
    with ts_driver.TSClient() as client:
        connect(client, server, "ben")
        with pytest.raises(ts_driver.TSError) as error:
            client.call("read", uri=uri)
        assert error.value.code == NOT_FOUND_2025


def test_subscription_update_arrives_on_the_get_stream(server: live.Server) -> None:
    ticket = server.project.seed["tickets"]["rocket"][2]
    uri = f"teams://tickets/{ticket}"
    with ts_driver.TSClient() as client:
        session = connect(client, server, "ben")
        assert session["capabilities"]["resources"]["subscribe"] is True
        client.call("subscribe", uri=uri)
        server.project.shell(
            f"from teams.models import Ticket; t = Ticket.objects.get(pk={ticket}); t.body = 'Reopened.'; t.save()"
        )
        assert client.notification("notifications/resources/updated")["params"]["uri"] == uri
        assert "Reopened." in client.call("read", uri=uri)["contents"][0]["text"]


def _browser(username: str) -> ts_driver.TSClient:
    user = live.ScriptedUser(username)
    return ts_driver.TSClient(authorize=lambda url: user.authorize(url)["code"])


def test_oauth_from_the_bare_url_to_a_listing(server: live.Server) -> None:
    with _browser("cat") as client:
        client.call("connect", url=server.url, oauth={"redirect_uri": live.REDIRECT_URI, "client_name": "ts teams"})
        listing = client.call("list_all")
        assert [r["uri"] for r in listing["resources"]] == inventory(server.project, "cat")


def test_oauth_authorizes_and_a_fresh_client_lists(server: live.Server) -> None:
    with _browser("cat") as client:
        client.call("connect", url=server.url, oauth={"redirect_uri": live.REDIRECT_URI, "client_name": "ts teams"})
        with contextlib.suppress(ts_driver.TSError):  # the anonymous session's retry fails until point 5 lands
            client.call("list_all")
        state = client.call("oauth_state")
    assert (state["authorizations"], state["registered"]) == (1, True)
    assert client.authorizations[0].startswith(server.base + "/o/authorize/?")
    stored = server.project.stored_token(state["token"])
    assert stored == {"scope": live.SCOPES, "resource": [server.url], "user": "cat"}
    with ts_driver.TSClient() as fresh:
        fresh.call("connect", url=server.url, token=state["token"])
        assert [r["uri"] for r in fresh.call("list_all")["resources"]] == inventory(server.project, "cat")


def test_server_log_is_clean(server: live.Server) -> None:
    server.assert_log_clean()
