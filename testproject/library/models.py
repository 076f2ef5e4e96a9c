"""The demo's records: documents owned by users."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class Document(models.Model):
    # No index of its own: the keyset index below starts with the owner. A separate owner index only tempts the
    # PostgreSQL planner, for small inventories, into reading every row of the owner and sorting them.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="documents", db_index=False
    )
    title = models.CharField(max_length=200)
    body = models.TextField(blank=True)
    created = models.DateTimeField(default=timezone.now)
    deleted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["owner", "created", "id"], name="library_doc_owner_keyset")]

    def __str__(self) -> str:
        return self.title


class Note(models.Model):
    """A second kind of record, listed after documents (ordered by title: a text keyset)."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notes", db_index=False)
    title = models.CharField(max_length=200)
    text = models.TextField(blank=True)

    class Meta:
        indexes = [models.Index(fields=["owner", "title", "id"], name="library_note_owner_keyset")]

    def __str__(self) -> str:
        return self.title


class Bookmark(models.Model):
    """A third kind of record, served both by a REST framework viewset (``/api/bookmarks/``) and as MCP resources
    (``learn://bookmarks/{slug}``, declared from that viewset).

    Listed and completed by slug, in byte order: on PostgreSQL one index on ``(owner_id, slug COLLATE "C")`` serves
    both the keyset pages and the completion of ``{slug}`` (created by migration 0004: SQLite has no ``"C"``
    collation, its ``BINARY`` default already compares bytes).
    """

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="bookmarks", db_index=False
    )
    slug = models.SlugField(max_length=100, unique=True)
    title = models.CharField(max_length=200)
    url = models.URLField()
    created = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return self.title
