"""Membership scoping, through the package's own test client (``mcp_resources.test.MCPClient``): a user sees the
organisations they belong to, the projects they are a member of, those projects' tickets and attachments; nobody
sees a project without members; one user never reads or pages into what another may not see."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from mcp_resources import MCPError
from mcp_resources.test import MCPClient

from teams.management.commands.seed_teams import PAYLOAD
from teams.models import Project, Ticket

SCOPES = ["projects:read", "attachments:read"]


def client_for(username: str, scopes: list[str] = SCOPES) -> MCPClient:
    client = MCPClient()
    client.force_authenticate(get_user_model().objects.get(username=username), scopes=scopes)
    return client


def uris(client: MCPClient, prefix: str) -> list[str]:
    return [resource["uri"] for resource in client.list_all_resources(prefix=prefix)]


def visible_tickets(seeded: dict[str, Any], *projects: str) -> list[str]:
    rows = Ticket.objects.filter(project__name__in=projects).order_by("created", "id")
    return [f"teams://tickets/{pk}" for pk in rows.values_list("pk", flat=True)]


@pytest.mark.parametrize(
    ("user", "organisations", "projects"),
    [("ann", ["acme"], ["rocket", "secret"]), ("ben", ["acme"], ["rocket"]), ("cat", ["globex"], ["portal"])],
)
def test_each_member_sees_their_organisations_projects_tickets_attachments(
    seeded: dict[str, Any], user: str, organisations: list[str], projects: list[str]
) -> None:
    client = client_for(user)
    assert uris(client, "teams://organisations/") == [f"teams://organisations/{slug}" for slug in organisations]
    assert uris(client, "teams://projects/") == [f"teams://projects/{seeded['projects'][p]}" for p in projects]
    assert uris(client, "teams://tickets/") == visible_tickets(seeded, *projects)
    assert uris(client, "teams://attachments/") == sorted(
        (f"teams://attachments/{seeded['attachments'][p]}" for p in projects), key=lambda uri: int(uri.rsplit("/")[-1])
    )


def test_nobody_sees_a_project_without_members(seeded: dict[str, Any]) -> None:
    orphan = seeded["projects"]["orphan"]
    for user in ("ann", "ben", "cat"):
        client = client_for(user)
        assert f"teams://projects/{orphan}" not in uris(client, "teams://projects/")
        with pytest.raises(MCPError) as error:
            client.read_resource(f"teams://projects/{orphan}")
        assert error.value.code == -32602


def test_a_token_without_a_user_sees_nothing(seeded: dict[str, Any], settings: Any) -> None:
    """A token of no user (say, a client-credentials grant of another authorization flow): a many-to-many filter on
    ``None`` would match the projects without members, so the templates answer nothing instead."""
    import secrets
    from datetime import timedelta

    from django.utils import timezone
    from oauth2_provider.models import get_access_token_model, get_application_model, set_token_value

    application = get_application_model().objects.create(
        name="service", client_type="confidential", authorization_grant_type="client-credentials"
    )
    raw = secrets.token_urlsafe(32)
    token = get_access_token_model()(
        user=None,
        application=application,
        scope=" ".join(SCOPES),
        expires=timezone.now() + timedelta(hours=1),
        resource=[settings.MCP_RESOURCES["RESOURCE_URI"]],
    )
    set_token_value(token, raw)
    token.save()
    client = MCPClient(headers={"Authorization": f"Bearer {raw}"})
    assert [r["uri"] for r in client.list_all_resources(prefix="teams://")] == ["teams://about"]
    orphan = seeded["projects"]["orphan"]
    for uri in (f"teams://projects/{orphan}", f"teams://tickets/{seeded['tickets']['orphan'][0]}"):
        with pytest.raises(MCPError) as error:
            client.read_resource(uri)
        assert error.value.code == -32602


@pytest.mark.parametrize("which", ["missing", "foreign"])
def test_missing_and_foreign_records_answer_alike(seeded: dict[str, Any], which: str) -> None:
    client = client_for("ben")
    secret_ticket = seeded["tickets"]["secret"][0]
    uri = "teams://tickets/999999" if which == "missing" else f"teams://tickets/{secret_ticket}"
    with pytest.raises(MCPError) as error:
        client.read_resource(uri)
    assert (error.value.code, error.value.message) == (-32602, "Resource not found")


def test_binary_attachment_round_trips(seeded: dict[str, Any]) -> None:
    uri = f"teams://attachments/{seeded['attachments']['rocket']}"
    (content,) = client_for("ben").read_resource(uri)["contents"]
    assert content["mimeType"] == "application/octet-stream"
    assert base64.b64decode(content["blob"]) == PAYLOAD
    with pytest.raises(MCPError):
        client_for("ben", scopes=["projects:read"]).read_resource(uri)  # attachments need their own scope


def test_the_shared_project_pages_and_stops_at_a_removed_membership(seeded: dict[str, Any]) -> None:
    client = client_for("ben")
    first = client.list_resources(prefix="teams://tickets/")
    assert len(first["resources"]) == 20  # PAGE_SIZE; 45 tickets in rocket
    assert first["nextCursor"]
    Project.objects.get(name="rocket").members.remove(get_user_model().objects.get(username="ben"))
    second = client.list_resources(prefix="teams://tickets/", cursor=first["nextCursor"])
    assert second["resources"] == []  # removed mid-traversal: nothing more of that project
    assert "nextCursor" not in second
