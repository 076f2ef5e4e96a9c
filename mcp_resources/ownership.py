"""Templates scoped by an owner field: ``owner_field`` on :class:`~mcp_resources.ModelResourceTemplate`.

A template that declares ``owner_field`` (a path of forward relations ending in a foreign key to the user model)
serves the rows of its ``queryset`` whose owner is ``request.user``. Because that scope is declared rather than
computed by ``get_queryset()``, the listing query has a fixed shape: it is compiled once per thread, connection
and page size (:mod:`mcp_resources.precompiled`) and later pages only bind the owner and the keyset position.
The result is the queryset the ORM would build; only the SQL text is reused, every page reads the database.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import models, router

from mcp_resources.pagination import keyset_queryset, resolve_field
from mcp_resources.precompiled import PrecompiledQuery

if TYPE_CHECKING:
    from django.http import HttpRequest

    from mcp_resources.resources import ListPlan, ModelResourceTemplate


def owner_of(request: HttpRequest) -> Any | None:
    """The primary key of the signed-in user, or ``None`` (anonymous, or a token without a user)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return None
    return user.pk


def owner_relation(model: type[models.Model], path: str) -> models.ForeignKey[Any, Any] | None:
    """The last relation of ``path`` when every step is a forward foreign key (or one-to-one) and the last one
    points at ``AUTH_USER_MODEL``; ``None`` otherwise."""
    current: Any = model
    field: Any = None
    for name in path.split("__"):
        try:
            field = current._meta.get_field(name)
        except Exception:
            return None
        if not isinstance(field, models.ForeignKey):  # OneToOneField is a ForeignKey
            return None
        current = field.related_model
    if field is None or current._meta.label_lower != settings.AUTH_USER_MODEL.lower():
        return None
    return field


class OwnedListing:
    """The listing query of an owner-scoped template, compiled once per thread, connection and page size."""

    def __init__(self, template: ModelResourceTemplate, plan: ListPlan) -> None:
        assert template.model is not None
        assert template.owner_field is not None
        self.template = template
        self.owner_field: str = template.owner_field
        self.columns = plan.columns
        self.ordering = list(template.ordering)
        owner = owner_relation(template.model, template.owner_field)
        if owner is None:
            raise ValueError(f"{type(template).__name__}.owner_field is not a foreign key to the user model")
        keys = [resolve_field(template.model, name) for name in self.ordering]
        dependencies = self._dependencies
        name = f"listing.{template.name}"
        self.first = PrecompiledQuery(f"{name}.first", self._build, fields=[owner], dependencies=dependencies)
        self.after = PrecompiledQuery(f"{name}.after", self._build, fields=[owner, *keys], dependencies=dependencies)

    def _dependencies(self) -> tuple[Any, ...]:
        return (self.template.queryset,)

    def _build(self, limit: int, owner: Any, *position: Any) -> models.QuerySet[Any]:
        queryset = self.template.base_queryset().filter(**{self.owner_field: owner})
        query = keyset_queryset(queryset, self.ordering, list(position) if position else None, limit)
        return query.values_list(*self.columns)

    def using(self) -> str:
        """The database the template's queryset reads from."""
        base = self.template.queryset
        if base is not None:
            return base.db
        assert self.template.model is not None
        return router.db_for_read(self.template.model)

    def rows(self, using: str, owner: Any, position: Sequence[Any] | None, limit: int) -> list[tuple[Any, ...]]:
        """Up to ``limit + 1`` value rows of ``owner``'s records after ``position`` in the template's ordering."""
        if position is None:
            return self.first.rows(using, [owner], shape=limit)
        return self.after.rows(using, [owner, *position], shape=limit)
