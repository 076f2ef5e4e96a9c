"""The admin: static resources (editable) and the registered templates page (read-only)."""

from __future__ import annotations

import base64
import re

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse

from mcp_resources.models import StaticResource

pytestmark = pytest.mark.django_db

PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452")


@pytest.fixture
def admin_user_client() -> Client:
    User.objects.create_superuser("admin", "admin@example.com", "admin-password")
    client = Client()
    assert client.login(username="admin", password="admin-password")
    return client


def form_data(**overrides: str) -> dict[str, str]:
    data = {
        "uri": "app://readme",
        "name": "readme",
        "title": "Read me",
        "description": "",
        "mime_type": "text/plain",
        "enabled": "on",
        "text": "Hello",
        "binary": "",
        "access": "public",
        "required_scopes": "",
    }
    data.update(overrides)
    return data


def field_names(html: str) -> set[str]:
    return set(re.findall(r'<(?:input|textarea|select)\b[^>]*\bname="([^"]+)"', html))


# StaticResource changelist and forms ------------------------------------------------------------------------


def test_changelist_loads_and_links_to_the_templates_page(admin_user_client):
    StaticResource.objects.create(uri="app://listed", name="listed", text="x")
    response = admin_user_client.get(reverse("admin:mcp_resources_staticresource_changelist"))
    assert response.status_code == 200
    html = response.content.decode()
    assert "app://listed" in html
    assert reverse("admin:mcp_resources_registered_templates") in html


def test_add_form_creates_a_row(admin_user_client):
    url = reverse("admin:mcp_resources_staticresource_add")
    assert admin_user_client.get(url).status_code == 200
    response = admin_user_client.post(url, form_data())
    assert response.status_code == 302
    row = StaticResource.objects.get(uri="app://readme")
    assert (row.name, row.title, row.mime_type, row.text, row.access) == (
        "readme",
        "Read me",
        "text/plain",
        "Hello",
        "public",
    )
    assert row.enabled
    assert row.binary is None


def test_add_form_with_base64_binary_content(admin_user_client):
    url = reverse("admin:mcp_resources_staticresource_add")
    data = form_data(uri="app://logo.png", text="", binary=base64.b64encode(PNG).decode(), mime_type="image/png")
    response = admin_user_client.post(url, data)
    assert response.status_code == 302
    assert bytes(StaticResource.objects.get(uri="app://logo.png").binary) == PNG


@pytest.mark.parametrize("binary", ["not base64!!", "abc", "b'hello'"])
def test_add_form_refuses_binary_that_is_not_base64(admin_user_client, binary):
    url = reverse("admin:mcp_resources_staticresource_add")
    response = admin_user_client.post(url, form_data(text="", binary=binary))
    assert response.status_code == 200
    assert "binary" in response.context["adminform"].form.errors
    assert not StaticResource.objects.exists()


def test_change_form_round_trips_binary_content(admin_user_client):
    row = StaticResource.objects.create(uri="app://logo.png", name="logo", binary=PNG, mime_type="image/png")
    url = reverse("admin:mcp_resources_staticresource_change", args=[row.pk])
    response = admin_user_client.get(url)
    assert response.status_code == 200
    shown = response.context["adminform"].form["binary"].value()
    assert shown == base64.b64encode(PNG).decode()
    # Saving the form unchanged keeps the bytes.
    response = admin_user_client.post(url, form_data(uri="app://logo.png", name="logo", text="", binary=shown))
    assert response.status_code == 302
    row.refresh_from_db()
    assert bytes(row.binary) == PNG


def test_add_form_refuses_an_invalid_uri(admin_user_client):
    url = reverse("admin:mcp_resources_staticresource_add")
    response = admin_user_client.post(url, form_data(uri="no scheme"))
    assert response.status_code == 200
    assert "uri" in response.context["adminform"].form.errors
    assert not StaticResource.objects.exists()


def test_add_form_refuses_public_with_scopes(admin_user_client):
    url = reverse("admin:mcp_resources_staticresource_add")
    response = admin_user_client.post(url, form_data(required_scopes="documents:read"))
    assert response.status_code == 200
    assert "required_scopes" in response.context["adminform"].form.errors
    assert not StaticResource.objects.exists()


def test_add_form_refuses_text_and_binary(admin_user_client):
    url = reverse("admin:mcp_resources_staticresource_add")
    response = admin_user_client.post(url, form_data(binary=base64.b64encode(b"x").decode()))
    assert response.status_code == 200
    assert response.context["adminform"].form.non_field_errors()
    assert not StaticResource.objects.exists()


# Registered templates page ----------------------------------------------------------------------------------


def test_registered_templates_page_lists_the_templates_read_only(admin_user_client):
    response = admin_user_client.get(reverse("admin:mcp_resources_registered_templates"))
    assert response.status_code == 200
    rows = {row["name"]: row for row in response.context["templates"]}
    assert rows["documents"]["uri_template"] == "learn://documents/{id}"
    assert rows["documents"]["model"] == "library.Document"
    html = response.content.decode()
    assert "<code>learn://documents/{id}</code>" in html
    assert "<td>documents</td>" in html
    assert "test://template/{id}/data" in html
    # Read-only: no editable field on the page (the admin header's logout form only carries its CSRF token).
    assert field_names(html) <= {"csrfmiddlewaretoken"}


def test_registered_templates_page_requires_staff(client):
    url = reverse("admin:mcp_resources_registered_templates")
    response = client.get(url)
    assert response.status_code == 302
    assert reverse("admin:login") in response["Location"]
    User.objects.create_user("user", password="user-password")
    assert client.login(username="user", password="user-password")
    response = client.get(url)
    assert response.status_code == 302
    assert "documents" not in response.content.decode()


# StaticResource.clean ---------------------------------------------------------------------------------------


def test_clean_refuses_a_public_resource_with_scopes():
    resource = StaticResource(uri="app://x", name="x", access="public", required_scopes="documents:read")
    with pytest.raises(ValidationError) as info:
        resource.clean()
    assert "required_scopes" in info.value.message_dict


def test_clean_accepts_a_protected_resource_with_scopes():
    resource = StaticResource(uri="app://x", name="x", access="protected", required_scopes="a b")
    resource.clean()
    assert resource.scopes == ("a", "b")


def test_clean_refuses_text_and_binary_together():
    resource = StaticResource(uri="app://x", name="x", text="hello", binary=b"\x00")
    with pytest.raises(ValidationError):
        resource.clean()


def test_clean_accepts_text_only_and_binary_only():
    StaticResource(uri="app://x", name="x", text="hello").clean()
    StaticResource(uri="app://x", name="x", binary=b"\x00").clean()
    StaticResource(uri="app://x", name="x", text="", binary=b"").clean()


def test_full_clean_validates_the_uri():
    with pytest.raises(ValidationError) as info:
        StaticResource(uri="relative/path", name="x").full_clean()
    assert "uri" in info.value.message_dict


def test_read_returns_binary_or_text():
    assert StaticResource(uri="app://x", name="x", binary=PNG).read(None) == PNG
    assert StaticResource(uri="app://x", name="x", text="t", binary=b"").read(None) == "t"
    assert StaticResource(uri="app://x", name="x", text="t").read(None) == "t"
