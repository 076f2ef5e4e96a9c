"""Templates scoped by an owner field: ``owner_field`` on :class:`~mcp_resources.ModelResourceTemplate`.

A template that declares ``owner_field`` (a path of forward relations ending in a foreign key to the user model)
serves the rows of its ``queryset`` whose owner is ``request.user``. System check ``mcp_resources.E019`` refuses a
path that does not end at the user model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import models

if TYPE_CHECKING:
    from django.http import HttpRequest


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
