"""The fast paths of a model template, and the one rule that grants them: what the template declares.

A :class:`~mcp_resources.ModelResourceTemplate` declares its fast paths in ``fast_paths``, as Django's admin declares
``list_select_related``. Left undeclared, a class gets every path that none of the hooks it defines stands in front
of: a class that defines ``get_queryset()`` (even ``return super().get_queryset(request)``) declares that its rows are
its own, so the paths that read ``queryset`` and ``owner_field`` directly are not its. A template may declare
``fast_paths`` itself (a subset, or a no-op override's paths back); ``mcp_resources.W006`` names each path that an
override turned off, with its cost. What a path also needs (``owner_field``, ``name_field``, rows that cannot change
per request) is checked where it runs: the declaration grants, the attributes enable.
"""

from __future__ import annotations

from dataclasses import dataclass

COMPILED_LISTING = "compiled_listing"
VALUE_ROWS = "value_rows"
COMPILED_COMPLETION = "compiled_completion"
BATCHED_READERS = "batched_readers"
OBJECT_ACCESS = "object_access"
COMPILED_ACCESS = "compiled_access"


@dataclass(frozen=True)
class FastPath:
    """A fast path: its name (a value of ``fast_paths``), the hooks it answers for, and its cost when off."""

    name: str
    hooks: tuple[str, ...]
    what: str
    cost: str


FAST_PATHS: tuple[FastPath, ...] = (
    FastPath(
        COMPILED_LISTING,
        ("get_queryset", "base_queryset"),
        "the listing's page query compiled once from queryset and owner_field",
        "every page is built and compiled by the ORM (about 1.5x a page on PostgreSQL, 2x on SQLite)",
    ),
    FastPath(
        VALUE_ROWS,
        ("get_resource", "get_uri", "get_resource_name"),
        "listing from value rows of name_field",
        "every listed record is built as a model instance",
    ),
    FastPath(
        COMPILED_COMPLETION,
        ("get_queryset", "base_queryset"),
        "the completion query compiled once from queryset and owner_field",
        "every completion is built and compiled by the ORM",
    ),
    FastPath(
        BATCHED_READERS,
        ("get_queryset", "get_object", "read"),
        "the readers of a changed record decided from owner_field for many subscribers in one query",
        "one query per subscriber before every update (101 queries for 50 subscribers instead of 2)",
    ),
    FastPath(
        OBJECT_ACCESS,
        ("read",),
        "access checks (listen, subscribe, every update) fetch the record with get_object()",
        "every access check runs read() and builds the contents",
    ),
    FastPath(
        COMPILED_ACCESS,
        ("get_queryset", "base_queryset", "get_object"),
        "access checks (listen, subscribe, every update) run the record's query compiled once from queryset, "
        "owner_field and the URI's lookups",
        "every access check builds and compiles the record's query with the ORM (about 1 of the 1.7 ms an update's "
        "decision took in the delivery benchmark)",
    ),
)

ALL = frozenset(path.name for path in FAST_PATHS)


def granted(cls: type, base: type) -> frozenset[str]:
    """The fast paths of ``cls`` when it declares none: every path none of whose hooks ``cls`` defines anew (a
    hook is defined when ``cls`` has another attribute under its name than ``base``)."""
    return frozenset(path.name for path in FAST_PATHS if not defined_hooks(cls, base, path.hooks))


def defined_hooks(cls: type, base: type, hooks: tuple[str, ...]) -> list[str]:
    """Which of ``hooks`` ``cls`` defines itself (or inherits from a class other than ``base``)."""
    return [hook for hook in hooks if getattr(cls, hook, None) is not getattr(base, hook, None)]
