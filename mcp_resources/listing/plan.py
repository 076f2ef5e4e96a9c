"""Listing a model template from value rows, without building model instances.

A template that names its ``name_field`` and keeps the base ``get_resource``, ``get_uri`` and
``get_resource_name`` lists the same resources from ``values_list()`` rows as from instances: the URI is expanded
from the row's lookup values by the same :meth:`~mcp_resources.protocol.uris.URITemplate.expand`, the name is
``str()`` of the name field, and ``annotations.lastModified`` and ``size`` come from the ``modified_field`` and
``size_field`` columns of the same row (the page query selects them too: no query of their own). A URI over 2,048
characters or a name over 512 breaks the list contract on both paths (:func:`over_limit` names the record in the
log): never a cut name, or a listed URI that reads nothing. Building a model instance costs more than the rest of a
row's work; docs/performance.md gives the measured worth of this plan (``tests/test_listing_plan.py`` checks that
both ways list the same resources).
"""

from __future__ import annotations

import operator
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from django.db import models

from mcp_resources import fastpaths
from mcp_resources.exceptions import SourceContractError
from mcp_resources.metadata import last_modified
from mcp_resources.protocol.uris import MAX_URI_LENGTH
from mcp_resources.resources import ModelResourceTemplate

NAME_MAX_LENGTH = 512
"""The longest listed ``name`` (the seed's list contract); a longer one is an error, never cut."""


@dataclass(frozen=True)
class ListPlan:
    """The columns a listing selects and where each value a resource needs sits in a row."""

    template: ModelResourceTemplate
    columns: tuple[str, ...]
    ordering: tuple[int, ...]
    variables: tuple[tuple[str, int], ...]
    name: int
    modified: int | None = None
    size: int | None = None

    def key(self, row: Sequence[Any]) -> tuple[Any, ...]:
        """The row's keyset position (its ordering values)."""
        return tuple([row[i] for i in self.ordering])

    def resource(self, row: Sequence[Any]) -> dict[str, Any]:
        """What ``get_resource`` returns for the row's record."""
        (entry,) = self.entries([row])
        return entry[1]

    def entries(self, rows: Sequence[Sequence[Any]]) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
        """``(key, resource)`` for each row, as :meth:`key` and :meth:`resource` give them, built with the parts of
        the URI template laid out once (a page builds up to 100 of them)."""
        at, name_at, mime = self.ordering, self.name, self.template.mime_type
        key = operator.itemgetter(*at) if len(at) > 1 else (lambda row: (row[at[0]],))
        parts: list[tuple[str, int | None, str]] = [
            (literal, None, "") if name is None else ("", dict(self.variables)[name], safe)
            for literal, name, safe in self.template.compiled.expansion
        ]
        uri = _uri_builder(parts)
        modified_at, size_at = self.modified, self.size
        out = []
        for row in rows:
            name = row[name_at]
            resource = {"uri": uri(row), "name": name if type(name) is str else str(name)}
            if len(resource["name"]) > NAME_MAX_LENGTH or len(resource["uri"]) > MAX_URI_LENGTH:
                raise SourceContractError(over_limit(self.template, key(row), resource))
            if mime:
                resource["mimeType"] = mime
            if modified_at is not None and row[modified_at] is not None:
                resource["annotations"] = {"lastModified": last_modified(row[modified_at])}
            if size_at is not None and row[size_at] is not None:
                resource["size"] = int(row[size_at])
            out.append((key(row), resource))
        return out


def over_limit(template: ModelResourceTemplate, key: Any, resource: dict[str, Any]) -> str:
    """The log line of a record whose listed URI or name is over its limit (what the seed allows a list entry)."""
    what = "uri" if len(resource["uri"]) > MAX_URI_LENGTH else "name"
    limit = MAX_URI_LENGTH if what == "uri" else NAME_MAX_LENGTH
    return f"{template.name}: the record at {key!r} has a {what} of {len(resource[what])} characters (at most {limit})"


def _uri_builder(parts: list[tuple[str, int | None, str]]) -> Any:
    """A function of a row giving its URI: each part a literal or ``(column, the characters kept unencoded)``; the
    usual template, one literal then one variable (``learn://documents/{id}``), without a loop."""
    if len(parts) == 2 and parts[0][1] is None and parts[1][1] is not None:
        literal, (_, column, safe) = parts[0][0], parts[1]
        assert column is not None

        def literal_and_value(row: Sequence[Any]) -> str:
            value = row[column]
            # An integer's digits and sign are unreserved: quote() would return them unchanged.
            return literal + (str(value) if type(value) is int else quote(str(value), safe=safe))

        return literal_and_value

    def any_parts(row: Sequence[Any]) -> str:
        pieces = []
        for literal, at, safe in parts:
            if at is None:
                pieces.append(literal)
            else:
                value = row[at]
                pieces.append(str(value) if type(value) is int else quote(str(value), safe=safe))
        return "".join(pieces)

    return any_parts


_plans: weakref.WeakKeyDictionary[ModelResourceTemplate, ListPlan | None] = weakref.WeakKeyDictionary()


def list_plan(template: ModelResourceTemplate) -> ListPlan | None:
    """The value-row plan of ``template``, or ``None`` when its listing needs model instances (computed once)."""
    try:
        return _plans[template]
    except KeyError:
        plan = _plans[template] = _make_plan(template)
        return plan


def _make_plan(template: ModelResourceTemplate) -> ListPlan | None:
    if (
        template.model is None
        or template.name_field is None
        or fastpaths.VALUE_ROWS not in template.fast_paths
        or template.object_permissions  # each record is checked: model instances
    ):
        return None
    lookups = template.get_lookups()
    extra = [path for path in (template.modified_field, template.size_field) if path is not None]
    for path in [*lookups.values(), template.name_field, *extra]:
        # A value row holds a relation's key where the hooks would see the related object: only plain fields.
        if not _plain_field_path(template.model, path):
            return None
    columns: list[str] = []

    def column(name: str) -> int:
        if name not in columns:
            columns.append(name)
        return columns.index(name)

    ordering = tuple(column(name) for name in template.ordering)
    variables = tuple((variable, column(path)) for variable, path in lookups.items())
    name = column(template.name_field)
    modified = None if template.modified_field is None else column(template.modified_field)
    size = None if template.size_field is None else column(template.size_field)
    return ListPlan(template, tuple(columns), ordering, variables, name, modified, size)


def _plain_field_path(model: type[models.Model], path: str) -> bool:
    """Whether ``path`` (``a__b``) ends in a concrete, non-relational field (what ``values_list`` returns as is)."""
    current: Any = model
    names = path.split("__")
    for index, name in enumerate(names):
        try:
            field_ = current._meta.pk if name == "pk" else current._meta.get_field(name)
        except Exception:
            return False
        last = index == len(names) - 1
        if last:
            return bool(getattr(field_, "concrete", False)) and not field_.is_relation
        if not field_.is_relation or field_.related_model is None or field_.many_to_many or field_.one_to_many:
            return False
        current = field_.related_model
    return False
