"""Admin: static resources (editable) and the registered templates (read-only)."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path

from mcp_resources.models import StaticResource
from mcp_resources.registries import registry as resource_registry


def describe_templates() -> list[dict[str, Any]]:
    """One row per registered template, as the admin page and ``mcp_templates`` show them."""
    rows = []
    for template in resource_registry.templates:
        cls = type(template)
        rows.append(
            {
                "name": template.name,
                "uri_template": template.uri_template,
                "title": template.title or "",
                "access": template.access,
                "required_scopes": list(template.scopes),
                "discoverable": template.discoverable,
                "mime_type": template.mime_type or "",
                "class": f"{cls.__module__}.{cls.__qualname__}",
                "model": model._meta.label if (model := getattr(template, "model", None)) else "",
            }
        )
    return rows


class StaticResourceForm(forms.ModelForm):  # type: ignore[type-arg,unused-ignore]
    """Binary content is edited as base64 text (a bare BinaryField would show ``b'...'`` and crash on save)."""

    binary = forms.CharField(
        label="Binary content",
        required=False,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text="Base64-encoded; leave empty for a text resource.",
    )

    class Meta:
        model = StaticResource
        fields = [
            "uri",
            "name",
            "title",
            "description",
            "mime_type",
            "enabled",
            "text",
            "binary",
            "access",
            "required_scopes",
            "audience",
            "priority",
            "icons",
        ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        value = self.instance.binary
        self.initial["binary"] = base64.b64encode(bytes(value)).decode("ascii") if value else ""

    def clean_icons(self) -> list[Any]:
        """An empty field is no icons (not a JSON ``null``)."""
        return self.cleaned_data.get("icons") or []

    def clean_binary(self) -> bytes | None:
        value = "".join(self.cleaned_data.get("binary", "").split())
        if not value:
            return None
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValidationError("Enter the binary content as base64.", code="invalid") from exc


@admin.register(StaticResource)
class StaticResourceAdmin(admin.ModelAdmin):  # type: ignore[type-arg,unused-ignore]
    form = StaticResourceForm
    list_display = ["uri", "name", "mime_type", "access", "enabled", "updated"]
    list_filter = ["access", "enabled"]
    search_fields = ["uri", "name", "title"]
    readonly_fields = ["size", "created", "updated"]
    fieldsets = [
        (None, {"fields": ["uri", "name", "title", "description", "mime_type", "enabled"]}),
        ("Content", {"fields": ["text", "binary", "size"]}),
        ("Access", {"fields": ["access", "required_scopes"]}),
        ("For clients", {"fields": ["audience", "priority", "icons"]}),
        ("History", {"fields": ["created", "updated"]}),
    ]
    change_list_template = "mcp_resources/admin/staticresource_change_list.html"

    def get_urls(self) -> list[URLPattern]:
        extra = [
            path(
                "registered-templates/",
                self.admin_site.admin_view(self.registered_templates_view),
                name="mcp_resources_registered_templates",
            )
        ]
        return extra + super().get_urls()

    def registered_templates_view(self, request: HttpRequest) -> HttpResponse:
        context = {
            **self.admin_site.each_context(request),
            "title": "Registered resource templates",
            "templates": describe_templates(),
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "mcp_resources/admin/registered_templates.html", context)
