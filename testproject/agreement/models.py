"""Test-only models for the agreement suite (``tests/test_agreement.py``): the shapes teams give their records.

A :class:`Record` is reached from a user four ways: its ``owner`` (a foreign key), the ``members`` of its workspace
(a many-to-many through :class:`Seat`), the workspace's seats (a reverse foreign key) and the staff of the workspace's
organization (three hops). Its default manager filters per request: the current tenant is a context variable, as a
multi-tenant project holds it.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from django.conf import settings
from django.db import models

current_tenant: ContextVar[str | None] = ContextVar("agreement_current_tenant", default=None)
"""The tenant of the request being served (``None``: every tenant), set by the project's middleware."""


class Organization(models.Model):
    name = models.CharField(max_length=100)

    def __str__(self) -> str:
        return self.name


class Staff(models.Model):
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="staff")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")

    def __str__(self) -> str:
        return f"{self.user_id} at {self.organization_id}"


class Workspace(models.Model):
    name = models.CharField(max_length=100)
    organization = models.ForeignKey(Organization, on_delete=models.SET_NULL, null=True, related_name="workspaces")
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, through="Seat", related_name="+")

    def __str__(self) -> str:
        return self.name


class Seat(models.Model):
    """A user's seat in a workspace (several roles: several rows for one user)."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="seats")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    role = models.CharField(max_length=20, default="member")

    def __str__(self) -> str:
        return f"{self.user_id} in {self.workspace_id}"


class TenantManager(models.Manager["Record"]):
    """The records of the current tenant (every record when no tenant is set)."""

    def get_queryset(self) -> models.QuerySet[Any]:
        queryset = super().get_queryset()
        tenant = current_tenant.get()
        return queryset if tenant is None else queryset.filter(tenant=tenant)


class Record(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="records")
    tenant = models.CharField(max_length=20, default="a")
    slug = models.CharField(max_length=40, unique=True)
    title = models.CharField(max_length=100)
    archived = models.BooleanField(default=False)

    objects = TenantManager()
    everything = models.Manager()  # noqa: DJ012 (a second manager, not a field)

    class Meta:
        base_manager_name = "everything"

    def __str__(self) -> str:
        return self.title
