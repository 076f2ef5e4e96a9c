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
    updated = models.DateTimeField(auto_now=True)  # the demo's modified_field: annotations.lastModified

    class Meta:
        indexes = [models.Index(fields=["owner", "title", "id"], name="library_note_owner_keyset")]

    def __str__(self) -> str:
        return self.title


# Shared records: projects with members (a many-to-many) and teams with memberships (a reverse foreign key). A
# ticket belongs to a project; its readers are the project's members (owner_field = "project__members"), or the
# members of the project's team (owner_field = "project__team__memberships__user").


class Team(models.Model):
    name = models.CharField(max_length=200)

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    """A user's role in a team: one row per role, so a user may hold several memberships of one team (a plain join
    through them would list a ticket once per role). The semi-join of ``team__memberships__user`` looks up
    (team, user): the unique constraint's index starts with them."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships", db_index=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=20, default="member")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "user", "role"], name="library_membership_team_user_role")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.team}"


class Project(models.Model):
    name = models.CharField(max_length=200)
    team = models.ForeignKey(Team, on_delete=models.SET_NULL, null=True, blank=True, related_name="projects")
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="projects", blank=True)

    def __str__(self) -> str:
        return self.name


class Ticket(models.Model):
    # Listed through memberships (project__members): two keyset indexes, PostgreSQL picks one per page (see
    # docs/pagination.md). (project, created, id) reads each of the caller's projects from the position on;
    # (created, id) walks every ticket in order, probing the caller's memberships, when the caller sees a large
    # share of them. The first also serves every lookup by project: the foreign key has no index of its own.
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="tickets", db_index=False)
    title = models.CharField(max_length=200)
    body = models.TextField(blank=True)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [
            models.Index(fields=["project", "created", "id"], name="library_ticket_project_keyset"),
            models.Index(fields=["created", "id"], name="library_ticket_keyset"),
        ]

    def __str__(self) -> str:
        return self.title


class Bookmark(models.Model):
    """A third kind of record, served both by a REST framework viewset (``/api/bookmarks/``) and as MCP resources
    (``learn://bookmarks/{slug}``, declared from that viewset).

    Listed and completed by slug, in byte order: on PostgreSQL one index on ``(owner_id, slug COLLATE "C")`` serves
    both the keyset pages and the completion of ``{slug}`` (created by migration 0005: SQLite has no ``"C"``
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
