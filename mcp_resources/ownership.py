"""Templates scoped by an owner field: ``owner_field`` on :class:`~mcp_resources.ModelResourceTemplate`.

``owner_field`` is a path of relations from the template's model to ``AUTH_USER_MODEL``: a foreign key
(``"owner"``), forward foreign keys (``"application__user"``), or a path through many-to-many and reverse foreign
keys (``"project__members"``, ``"team__memberships__user"``). The template serves the rows of its ``queryset``
that the path links to ``request.user``.

A path of single-valued steps (forward foreign keys and one-to-ones, either way) is a plain filter, joined in the
page query. A path with a many-valued step (a many-to-many, a reverse foreign key) is a semi-join: the single-valued
steps before it stay in the page query, and the rest becomes an ``EXISTS`` subquery on the table that holds the
link (the many-to-many's through table, the reverse foreign key's model), correlated on the column the page query
already has (``ticket.project_id``). A row is listed once however many memberships lead to it: the same rows as
``queryset.filter(<owner_field>=user).distinct()``, without a join that multiplies them or a ``DISTINCT`` that
would sort the whole scope before the first row of a page.

System check ``mcp_resources.E019`` refuses a path that does not resolve (its message says which step and why).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import FieldDoesNotExist, ImproperlyConfigured
from django.db import models
from django.db.models import Exists, OuterRef, Q

if TYPE_CHECKING:
    from django.http import HttpRequest

SUPPORTED_RELATIONS = "ForeignKey, OneToOneField, ManyToManyField and their reverse relations"


def owner_of(request: HttpRequest) -> Any | None:
    """The primary key of the signed-in user, or ``None`` (anonymous, or a token without a user)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return None
    return user.pk


@dataclass(frozen=True)
class SemiJoin:
    """The ``EXISTS`` subquery of a path with a many-valued step: rows of ``model`` whose ``link`` is the page
    row's ``outer`` and whose ``owner`` lookup is the user."""

    model: type[models.Model]
    link: str
    outer: str
    owner: str


@dataclass(frozen=True)
class OwnerPath:
    """A resolved ``owner_field``: the condition that selects a user's rows of ``model``."""

    model: type[models.Model]
    path: str
    semi_join: SemiJoin | None
    value_field: models.Field[Any, Any]
    """The field the user's primary key is compared with (the user model's primary key)."""

    @property
    def many_valued(self) -> bool:
        """Whether the path goes through a many-to-many or a reverse foreign key (an ``EXISTS`` subquery)."""
        return self.semi_join is not None

    def scope(self, owner: Any) -> Q | Exists:
        """The condition on ``model`` for the rows of ``owner`` (a user's primary key, or a query expression)."""
        join = self.semi_join
        if join is None:
            return Q(**{f"{self.path}__pk": owner})
        rows = join.model._base_manager.filter(**{join.link: OuterRef(join.outer), join.owner: owner})
        return Exists(rows)


def owner_path(model: type[models.Model], path: str) -> OwnerPath:
    """Resolve ``path`` on ``model``; raise ``ImproperlyConfigured`` with the reason when it does not lead to
    ``AUTH_USER_MODEL`` through relations."""
    return _resolve(model, path, settings.AUTH_USER_MODEL.lower())


@lru_cache(maxsize=256)
def _resolve(model: type[models.Model], path: str, user_label: str) -> OwnerPath:
    if not isinstance(path, str) or not path:
        raise ImproperlyConfigured("owner_field must be a non-empty path of relations to the user model.")
    names = path.split("__")
    current: Any = model
    prefix: list[str] = []  # the single-valued steps before the first many-valued one
    semi_join: SemiJoin | None = None
    rest: list[str] = []  # the steps after the first many-valued one, looked up inside the subquery
    for name in names:
        label = current._meta.label
        try:
            field = current._meta.get_field(name)
        except FieldDoesNotExist:
            raise ImproperlyConfigured(f"{label} has no field {name!r}.") from None
        if not field.is_relation:
            raise ImproperlyConfigured(f"{label}.{name} is not a relation.")
        if semi_join is not None:
            if not _supported(field):
                raise ImproperlyConfigured(_unsupported(label, name, field))
            rest.append(name)
        elif isinstance(field, models.ForeignKey | models.OneToOneRel):
            prefix.append(name)  # single-valued: joined in the page query, one row at most
        elif isinstance(field, models.ManyToManyField | models.ManyToManyRel | models.ManyToOneRel):
            semi_join = _semi_join(field, prefix)
        else:
            raise ImproperlyConfigured(_unsupported(label, name, field))
        current = field.related_model
    if current._meta.label_lower != user_label:
        raise ImproperlyConfigured(f"it ends at {current._meta.label}, not at {settings.AUTH_USER_MODEL}.")
    value_field = current._meta.pk
    assert value_field is not None
    if semi_join is not None:
        owner = "__".join([*([semi_join.owner] if semi_join.owner else []), *rest, "pk"])
        semi_join = SemiJoin(semi_join.model, semi_join.link, semi_join.outer, owner)
    return OwnerPath(model, path, semi_join, value_field)


def _supported(field: Any) -> bool:
    return isinstance(field, models.ForeignKey | models.ManyToManyField | models.ManyToManyRel | models.ManyToOneRel)


def _unsupported(label: str, name: str, field: Any) -> str:
    return f"{label}.{name} is a {type(field).__name__}; owner_field follows {SUPPORTED_RELATIONS}."


def _semi_join(field: Any, prefix: list[str]) -> SemiJoin:
    """The subquery of the many-valued ``field``, reached from the page row by the single-valued ``prefix``: on
    the table that holds the link, correlated on the column the page row has. ``owner`` is the lookup, inside
    that table, of the model ``field`` leads to ("" when it is the table's own model)."""
    table: Any
    if isinstance(field, models.ManyToManyField | models.ManyToManyRel):
        m2m: Any = field if isinstance(field, models.ManyToManyField) else field.field
        table = m2m.remote_field.through
        if isinstance(field, models.ManyToManyField):
            link, owner = m2m.m2m_field_name(), m2m.m2m_reverse_field_name()
        else:
            link, owner = m2m.m2m_reverse_field_name(), m2m.m2m_field_name()
    else:  # a reverse foreign key: the rows of the related model whose foreign key is the page row's
        table, link, owner = field.related_model, field.field.name, ""
    target: Any = table._meta.get_field(link).target_field  # what the link holds: the page row's key (or to_field)
    outer = "__".join([*prefix, target.name])
    return SemiJoin(table, link, outer, owner)
