"""Persistent models: static resources managed in the Django admin, and the authorization codes the project's own
authorization server exchanged (to revoke their tokens when a code is used again)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

from mcp_resources import metadata
from mcp_resources.access import PROTECTED, PUBLIC
from mcp_resources.caching import CacheHint
from mcp_resources.protocol.uris import MAX_URI_LENGTH, validate_uri


def _validate_uri(value: str) -> None:
    try:
        validate_uri(value)
    except ValueError as exc:
        raise ValidationError(str(exc)) from exc


def _validate_audience(value: str) -> None:
    unknown = set(value.split()) - set(metadata.ROLES)
    if unknown:
        raise ValidationError(_("The audience holds 'user' and 'assistant', separated by spaces."))


def _validate_icons(value: Any) -> None:
    try:
        metadata.check_icons(value)
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
    audience = models.CharField(
        _("audience"),
        max_length=32,
        blank=True,
        validators=[_validate_audience],
        help_text=_("Who the resource is for: 'user', 'assistant' or both, separated by a space (annotations)."),
    )
    priority = models.FloatField(
        _("priority"),
        null=True,
        blank=True,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text=_("How important the resource is, from 0 (optional) to 1 (effectively required) (annotations)."),
    )
    icons = models.JSONField(
        _("icons"),
        default=list,
        blank=True,
        validators=[_validate_icons],
        help_text=_('A list of icons, such as [{"src": "https://example.com/icon.png", "mimeType": "image/png"}].'),
    )
    size = models.PositiveBigIntegerField(
        _("size"), null=True, editable=False, help_text=_("Bytes of the content, computed when the row is saved.")
    )
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = _("static resource")
        verbose_name_plural = _("static resources")
        ordering = ["uri"]

    def __str__(self) -> str:
        return self.uri

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.size = self.content_size()
        update_fields = kwargs.get("update_fields")
        if update_fields is not None and ({"text", "binary"} & set(update_fields)):
            kwargs["update_fields"] = {*update_fields, "size"}
        super().save(*args, **kwargs)

    def clean(self) -> None:
        if self.access == PUBLIC and self.scopes:
            raise ValidationError({"required_scopes": _("A public resource cannot require scopes.")})
        if self.text and self.binary:
            raise ValidationError(_("Give either text or binary content, not both."))

    def content_size(self) -> int:
        """Bytes of what a read returns (before base64): the binary content, else the text in UTF-8."""
        if self.binary is not None and len(self.binary):
            return len(self.binary)
        return len(self.text.encode("utf-8"))

    @property
    def scopes(self) -> tuple[str, ...]:
        return tuple(self.required_scopes.split())

    def get_cache_hint(self) -> CacheHint | None:
        """Rows declare no cache hint: their answers are not cached (``PUBLIC_CACHE_TTL_MS`` in listings)."""
        return None

    def get_annotations(self) -> dict[str, Any]:
        """``annotations``: the audience and priority set in the admin, and ``lastModified`` from ``updated``."""
        annotations: dict[str, Any] = {}
        if self.audience.split():
            annotations["audience"] = [role for role in metadata.ROLES if role in self.audience.split()]
        if self.priority is not None:
            annotations["priority"] = self.priority
        if self.updated is not None:
            annotations["lastModified"] = metadata.last_modified(self.updated)
        return annotations

    def get_descriptor(self) -> dict[str, Any]:
        descriptor: dict[str, Any] = {"uri": self.uri, "name": self.name}
        if self.title:
            descriptor["title"] = self.title
        if self.description:
            descriptor["description"] = self.description
        if self.mime_type:
            descriptor["mimeType"] = self.mime_type
        if self.size is not None:
            descriptor["size"] = self.size
        annotations = self.get_annotations()
        if annotations:
            descriptor["annotations"] = annotations
        if self.icons:
            descriptor["icons"] = [dict(icon) for icon in self.icons]
        return descriptor

    def read(self, request: Any) -> Any:
        if self.binary is not None and len(self.binary):
            return bytes(self.binary)
        return self.text


class RedeemedCode(models.Model):
    """An authorization code this server's authorization server exchanged for tokens, remembered so that a second
    use of it revokes what the first one issued (RFC 6749 sections 4.1.2 and 10.5; ``mcp_resources.auth.validators``).

    Only digests are stored: the code's SHA-256 (with the client id) and the access token's checksum; the refresh
    token's family finds every token refreshed from it since.
    """

    code_digest = models.CharField(_("code digest"), max_length=64, db_index=True)
    access_token_checksum = models.CharField(_("access token checksum"), max_length=64)
    token_family = models.UUIDField(_("token family"), null=True, blank=True)
    expires = models.DateTimeField(_("expires"), db_index=True)

    class Meta:
        verbose_name = _("redeemed authorization code")
        verbose_name_plural = _("redeemed authorization codes")

    def __str__(self) -> str:
        return self.code_digest[:12]
