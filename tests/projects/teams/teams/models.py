"""Organisations and projects with members, tickets in projects, binary attachments on tickets."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class Organisation(models.Model):
    slug = models.SlugField(unique=True)
    name = models.CharField(max_length=200)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="organisations", blank=True)

    def __str__(self) -> str:
        return self.name


class Project(models.Model):
    organisation = models.ForeignKey(Organisation, on_delete=models.CASCADE, related_name="projects")
    name = models.CharField(max_length=200)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="projects", blank=True)

    def __str__(self) -> str:
        return f"{self.organisation.slug}/{self.name}"


class Ticket(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="tickets")
    title = models.CharField(max_length=200)
    body = models.TextField(blank=True)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["project", "created", "id"], name="teams_ticket_keyset")]

    def __str__(self) -> str:
        return self.title


class Attachment(models.Model):
    ticket = models.ForeignKey(Ticket, on_delete=models.CASCADE, related_name="attachments")
    filename = models.CharField(max_length=200)
    content_type = models.CharField(max_length=100, default="application/octet-stream")
    data = models.BinaryField()

    def __str__(self) -> str:
        return self.filename
