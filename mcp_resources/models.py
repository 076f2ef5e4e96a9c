"""Persistent models: static resources managed in the Django admin."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import DEFAULT_DB_ALIAS, models, router
from django.utils.translation import gettext_lazy as _

from mcp_resources.precompiled import PrecompiledQuery, rows_together
from mcp_resources.resources import PROTECTED, PUBLIC
from mcp_resources.uris import MAX_URI_LENGTH, validate_uri


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


# Listing ----------------------------------------------------------------------------------------------------------

LISTING_FIELDS = ("uri", "name", "title", "description", "mime_type", "access", "required_scopes")
"""What a listing reads of a static resource (never its contents)."""


def _listing_query(limit: int, after: str | None = None, prefix: str = "") -> models.QuerySet[Any]:
    from mcp_resources.ordering import order_after

    queryset = StaticResource.objects.filter(enabled=True)
    if prefix:
        queryset = queryset.filter(uri__startswith=prefix)
    return order_after(queryset, "uri", after, limit).values_list(*LISTING_FIELDS)


_first_listing_page = PrecompiledQuery("static.first", lambda limit: _listing_query(limit), arity=0)
_next_listing_page = PrecompiledQuery("static.next", lambda limit, after: _listing_query(limit, after), arity=1)


def listing_page(after: str | None, limit: int, prefix: str = "", prefetch: Any = None) -> list[StaticResource]:
    """Enabled static resources in URI byte order strictly after ``after``, at most ``limit``, listing fields only.

    Without a prefix (every first page of every ``resources/list`` starts here) the query is precompiled. A first
    page's ``prefetch`` (:class:`mcp_resources.inventory.Prefetch`) on the same database is read in the same round
    trip, and its ``rows`` filled in.
    """
    using = router.db_for_read(StaticResource) or DEFAULT_DB_ALIAS
    if prefix:
        rows = list(_listing_query(limit, after, prefix).using(using))
    elif after is None and prefetch is not None and prefetch.using == using:
        with prefetch.reading():
            rows, prefetch.rows = rows_together([_first_listing_page.statement(using, [], limit), prefetch.statement])
    elif after is None:
        rows = _first_listing_page.rows(using, [], shape=limit)
    else:
        rows = _next_listing_page.rows(using, [after], shape=limit)
    return [StaticResource.from_db(using, LISTING_FIELDS, row) for row in rows]
