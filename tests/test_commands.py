"""Management commands: mcp_templates, mcp_token and the demo's load_demo_data."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone
from oauth2_provider.models import get_access_token_model

from mcp_resources.models import StaticResource
from testproject.library.models import Document


def run(*args: str, **options: object) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(*args, stdout=out, stderr=err, **options)
    return out.getvalue(), err.getvalue()


def find_token(raw: str):
    return get_access_token_model().objects.get(token_checksum=hashlib.sha256(raw.encode()).hexdigest())


# mcp_templates ----------------------------------------------------------------------------------------------


def test_mcp_templates_table():
    out, _ = run("mcp_templates")
    lines = out.splitlines()
    documents = next(line for line in lines if line.startswith("documents\t"))
    assert documents.split("\t") == ["documents", "learn://documents/{id}", "protected", "documents:read"]
    conformance = next(line for line in lines if line.startswith("template\t"))
    assert conformance.split("\t") == ["template", "test://template/{id}/data", "public", "-"]


def test_mcp_templates_json():
    out, _ = run("mcp_templates", "--json")
    rows = {row["name"]: row for row in json.loads(out)}
    documents = rows["documents"]
    assert documents["uri_template"] == "learn://documents/{id}"
    assert documents["access"] == "protected"
    assert documents["required_scopes"] == ["documents:read"]
    assert documents["model"] == "library.Document"
    assert documents["discoverable"] is True
    assert documents["class"] == "testproject.library.mcp_resources.DocumentResource"
    template = rows["template"]
    assert template["uri_template"] == "test://template/{id}/data"
    assert template["access"] == "public"
    assert template["model"] == ""


# mcp_token --------------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_mcp_token_prints_only_the_token(alice, settings):
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "RESOURCE_URI": "https://mcp.example.com/mcp"}
    before = timezone.now()
    out, _ = run("mcp_token", "--user", "alice", "--scope", "documents:read", "--expires-in", "600")
    raw = out.strip()
    assert out == raw + "\n"
    assert len(raw.split()) == 1
    assert len(raw) >= 40
    token = find_token(raw)
    assert token.user == alice
    assert token.scope == "documents:read"
    assert token.resource == ["https://mcp.example.com/mcp"]
    assert before + timedelta(seconds=600) <= token.expires <= timezone.now() + timedelta(seconds=600)
    assert not token.is_expired()


@pytest.mark.django_db
def test_mcp_token_with_explicit_resources_and_scopes(alice):
    out, _ = run(
        "mcp_token",
        "--user",
        "alice",
        "--scope",
        "  documents:read   documents  ",
        "--resource",
        "https://a.example/mcp",
        "--resource",
        "https://b.example/mcp",
    )
    token = find_token(out.strip())
    assert token.scope == "documents:read documents"
    assert token.resource == ["https://a.example/mcp", "https://b.example/mcp"]
    # The default lifetime is an hour.
    assert timezone.now() + timedelta(seconds=3500) < token.expires <= timezone.now() + timedelta(seconds=3600)


@pytest.mark.django_db
def test_mcp_token_issues_a_new_token_each_time(alice):
    first, _ = run("mcp_token", "--user", "alice", "--scope", "documents:read")
    second, _ = run("mcp_token", "--user", "alice", "--scope", "documents:read")
    assert first != second
    assert get_access_token_model().objects.filter(user=alice).count() == 2


@pytest.mark.django_db
def test_mcp_token_unknown_user():
    with pytest.raises(CommandError, match="nobody"):
        run("mcp_token", "--user", "nobody", "--scope", "documents:read")
    assert not get_access_token_model().objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("expires_in", ["0", "-5"])
def test_mcp_token_expires_in_must_be_positive(alice, expires_in):
    with pytest.raises(CommandError):
        run("mcp_token", "--user", "alice", "--expires-in", expires_in)
    assert not get_access_token_model().objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("scope", ["bogus", "documents:read bogus", "documents:reads"])
def test_mcp_token_refuses_a_scope_nothing_declares(alice, scope):
    with pytest.raises(CommandError) as info:
        run("mcp_token", "--user", "alice", "--scope", scope)
    unknown = scope.split()[-1]
    assert str(info.value) == (
        f"unknown scope {unknown!r}: not required by any registered template or static resource, nor declared in "
        "django-oauth-toolkit's OAUTH2_PROVIDER['SCOPES'] or MCP_RESOURCES['SCOPE_HIERARCHY']. "
        "Known scopes: documents, documents:read."
    )
    assert not get_access_token_model().objects.exists()


@pytest.mark.django_db
def test_mcp_token_names_every_unknown_scope(alice):
    with pytest.raises(CommandError, match=r"^unknown scopes 'a:read', 'b:read': "):
        run("mcp_token", "--user", "alice", "--scope", "a:read documents:read b:read a:read")


@pytest.mark.django_db
def test_mcp_token_accepts_a_scope_a_template_requires(alice, settings):
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "SCOPES": {"profile": "Your profile"}}
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "SCOPE_HIERARCHY": {}}
    out, _ = run("mcp_token", "--user", "alice", "--scope", "documents:read")
    assert find_token(out.strip()).scope == "documents:read"
    with pytest.raises(CommandError, match=r"Known scopes: documents:read, profile\.$"):
        run("mcp_token", "--user", "alice", "--scope", "documents")


@pytest.mark.django_db
def test_mcp_token_accepts_a_scope_an_admin_static_resource_requires(alice):
    with pytest.raises(CommandError, match="handbook:read"):
        run("mcp_token", "--user", "alice", "--scope", "handbook:read")
    StaticResource.objects.create(
        uri="learn://handbook", name="handbook", text="...", access="protected", required_scopes="handbook:read"
    )
    out, _ = run("mcp_token", "--user", "alice", "--scope", "handbook:read")
    assert find_token(out.strip()).scope == "handbook:read"


@pytest.mark.django_db
def test_mcp_token_accepts_a_scope_only_the_authorization_server_declares(alice, settings):
    with pytest.raises(CommandError, match="profile"):
        run("mcp_token", "--user", "alice", "--scope", "profile")
    settings.OAUTH2_PROVIDER = {
        **settings.OAUTH2_PROVIDER,
        "SCOPES": {**settings.OAUTH2_PROVIDER["SCOPES"], "profile": "Your profile"},
    }
    out, _ = run("mcp_token", "--user", "alice", "--scope", "profile")
    assert find_token(out.strip()).scope == "profile"


@pytest.mark.django_db
def test_mcp_token_accepts_a_scope_of_the_scope_hierarchy(alice, settings):
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "SCOPE_HIERARCHY": {"library": ["documents:read"]}}
    out, _ = run("mcp_token", "--user", "alice", "--scope", "library")
    assert find_token(out.strip()).scope == "library"


# load_demo_data ---------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_load_demo_data_creates_users_documents_and_static_resources():
    out, _ = run("load_demo_data")
    assert "alice" in out
    alice, bob = User.objects.get(username="alice"), User.objects.get(username="bob")
    assert Document.objects.filter(owner=alice).count() == 120
    assert Document.objects.filter(owner=bob).count() == 60
    assert alice.check_password("alice")
    assert bob.check_password("bob")
    assert set(StaticResource.objects.values_list("uri", flat=True)) >= {"learn://about", "learn://logo.png"}
    logo = StaticResource.objects.get(uri="learn://logo.png")
    assert bytes(logo.binary).startswith(b"\x89PNG")


@pytest.mark.django_db
def test_load_demo_data_is_idempotent():
    run("load_demo_data")
    counts = (User.objects.count(), Document.objects.count(), StaticResource.objects.count())
    ids = set(Document.objects.values_list("id", flat=True))
    run("load_demo_data")
    assert (User.objects.count(), Document.objects.count(), StaticResource.objects.count()) == counts
    assert set(Document.objects.values_list("id", flat=True)) == ids
    assert Document.objects.filter(owner__username="alice").count() == 120
    assert Document.objects.filter(owner__username="bob").count() == 60
