"""Persistent models: static resources managed in the Django admin."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import models
from django.utils.translation import gettext_lazy as _

from mcp_resources.access import PROTECTED, PUBLIC
from mcp_resources.protocol.uris import MAX_URI_LENGTH, validate_uri


def _validate_uri(value: str) -> None:
    try:
        validate_uri(value)
    except ValueError as exc:
        raise ValidationError(str(exc)) from exc


class StaticResource(models.Model):
    """A concrete resource edited in the admin: listed first in ``resources/list`` and readable by URI."""

    ACCESS_CHOICES = [(PUBLIC, _("Public")), (PROTECTED, _("Protected"))]

    uri = models.CharField(_("URI"), max_length=MAX_URI_LENGTH, unique=True, validators=[_validate_uri])
    name = models.CharField(_("name"), max_length=512)
    title = models.CharField(_("title"), max_length=512, blank=True)
    description = models.TextField(_("description"), blank=True)
    mime_type = models.CharField(_("MIME type"), max_length=128, blank=True)
    text = models.TextField(_("text content"), blank=True)
    binary = models.BinaryField(_("binary content"), null=True, blank=True, editable=True)
    access = models.CharField(_("access"), max_length=16, choices=ACCESS_CHOICES, default=PUBLIC)
    required_scopes = models.CharField(
        _("required scopes"), max_length=512, blank=True, help_text=_("Space-separated OAuth scopes.")
    )
    enabled = models.BooleanField(_("enabled"), default=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = _("static resource")
        verbose_name_plural = _("static resources")
        ordering = ["uri"]

    def __str__(self) -> str:
        return self.uri

    def clean(self) -> None:
        if self.access == PUBLIC and self.scopes:
            raise ValidationError({"required_scopes": _("A public resource cannot require scopes.")})
        if self.text and self.binary:
            raise ValidationError(_("Give either text or binary content, not both."))

    @property
    def scopes(self) -> tuple[str, ...]:
        return tuple(self.required_scopes.split())

    def get_descriptor(self) -> dict[str, Any]:
        descriptor: dict[str, Any] = {"uri": self.uri, "name": self.name}
        if self.title:
            descriptor["title"] = self.title
        if self.description:
            descriptor["description"] = self.description
        if self.mime_type:
            descriptor["mimeType"] = self.mime_type
        return descriptor

    def read(self, request: Any) -> Any:
        if self.binary is not None and len(self.binary):
            return bytes(self.binary)
        return self.text
