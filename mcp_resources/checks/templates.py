"""The template checks (E001-E010, E013, E019, E022, E023, E033, E034, E036, W002): each a pure function of a
registry."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.core import checks
from django.core.exceptions import FieldDoesNotExist, ImproperlyConfigured
from django.db import models
from django.http import HttpRequest

from mcp_resources.access import ACCESS_POLICIES, PUBLIC
from mcp_resources.caching import CacheHint, cache_hint
from mcp_resources.listing.sources import MIME_TYPE_MAX_LENGTH
from mcp_resources.ownership import owner_path
from mcp_resources.principal import ANONYMOUS
from mcp_resources.protocol.uris import templates_overlap
from mcp_resources.registries import ResourceRegistry, uri_template_error
from mcp_resources.resources import ModelResourceTemplate, ResourceRepository, ResourceTemplate

NAME_MAX_LENGTH = 128


def _error(msg: str, template: ResourceTemplate | None, id: str, hint: str | None = None) -> checks.CheckMessage:
    return checks.Error(msg, hint=hint, obj=type(template) if template else None, id=f"mcp_resources.{id}")


def check_templates(registry: ResourceRegistry) -> list[checks.CheckMessage]:
    errors: list[checks.CheckMessage] = []
    compiled: list[ResourceTemplate] = []
    for template in registry.templates:
        name = template.name
        if not isinstance(name, str) or not name or len(name) > NAME_MAX_LENGTH or not name.isprintable():
            errors.append(
                _error(
                    f"{type(template).__name__} needs a printable name of 1 to {NAME_MAX_LENGTH} characters.",
                    template,
                    "E002",
                    "Template names are bound into cursors: choose a stable, unique name.",
                )
            )
        compile_error = uri_template_error(template)  # the message the process also fails to start with
        if compile_error is not None:
            errors.append(_error(compile_error, template, "E001"))
        else:
            compiled.append(template)
        if template.access not in ACCESS_POLICIES:
            errors.append(
                _error(
                    f"{type(template).__name__}.access is {template.access!r}.",
                    template,
                    "E006",
                    "Use 'public' or 'protected'.",
                )
            )
        if template.access == PUBLIC and template.scopes:
            errors.append(
                _error(
                    f"{type(template).__name__} is public but declares required_scopes.",
                    template,
                    "E007",
                    "Make it 'protected', or drop the scopes.",
                )
            )
        mime_type = template.mime_type
        if mime_type is not None and (not isinstance(mime_type, str) or len(mime_type) > MIME_TYPE_MAX_LENGTH):
            errors.append(
                _error(
                    f"{type(template).__name__}.mime_type must be a string of at most {MIME_TYPE_MAX_LENGTH} "
                    "characters.",
                    template,
                    "E022",
                    "It is the mimeType of every listed resource and read: a list entry may carry at most "
                    f"{MIME_TYPE_MAX_LENGTH} characters.",
                )
            )
        if not isinstance(template, ModelResourceTemplate) and type(template).read is ResourceTemplate.read:
            errors.append(_error(f"{type(template).__name__} does not implement read().", template, "E010"))
        if (
            not isinstance(template, ModelResourceTemplate)
            and template.lists_instances
            and (template.access == PUBLIC or not template.discoverable)
        ):
            errors.append(
                _error(
                    f"{type(template).__name__} implements "
                    f"{'list_page()' if isinstance(template, ResourceRepository) else 'list()'} but is not protected "
                    "and discoverable.",
                    template,
                    "E013",
                    "Only a protected, discoverable template may list a caller's resources.",
                )
            )
        errors.extend(check_cache_hint(template))
        if isinstance(template, ModelResourceTemplate) and template in compiled:
            errors.extend(check_model_template(template))
    for i, first in enumerate(compiled):
        for second in compiled[i + 1 :]:
            if templates_overlap(first.compiled, second.compiled):
                errors.append(
                    _error(
                        f"Templates {first.name!r} ({first.uri_template}) and {second.name!r} "
                        f"({second.uri_template}) can match the same URI.",
                        second,
                        "E003",
                        "Give each template a distinct literal part so every URI routes to one template.",
                    )
                )
    return errors


def declared_hint(template: ResourceTemplate) -> CacheHint | None:
    """The hint ``template.cache_control()`` declares, asked with a request that carries no caller (``None`` when
    it declares none, or when the hook cannot answer without a caller: then only the request-time rule holds)."""
    request = HttpRequest()
    request.user = AnonymousUser()
    request.mcp_principal = ANONYMOUS  # type: ignore[attr-defined]
    try:
        return cache_hint(template.cache_control(request))
    except Exception:  # a hook that reads the caller's data: the request-time rule still applies
        return None


def check_cache_hint(template: ResourceTemplate) -> list[checks.CheckMessage]:
    """E036: a ``"public"`` cache hint on a template whose answers differ by caller (:attr:`per_caller`)."""
    hint = declared_hint(template)
    if hint is None or hint.private or not template.per_caller:
        return []
    cls_name = type(template).__name__
    if isinstance(template, ModelResourceTemplate):
        why, fix = "a protected model template serves each caller's own records", "Declare ('private', ttl_ms)."
    elif template.lists_instances and not isinstance(template, ResourceRepository):
        why, fix = "its list() callback lists each caller's own inventory", "Declare ('private', ttl_ms)."
    else:
        kind = "repository" if isinstance(template, ResourceRepository) else "template"
        why = f"a protected {kind} answers each caller on its own unless it declares shared = True"
        fix = (
            "Declare ('private', ttl_ms); or, when every caller who may access it gets the same answers (a handbook "
            "behind a scope), set shared = True."
        )
    return [
        _error(
            f"{cls_name}.cache_control() declares a public cache hint {(hint.scope, hint.ttl_ms)!r}, but {why}: a "
            "shared cache would serve one caller's answer to another. Its answers say 'private'.",
            template,
            "E036",
            fix,
        )
    ]


def check_model_template(template: ModelResourceTemplate) -> list[checks.CheckMessage]:
    errors: list[checks.CheckMessage] = []
    cls_name = type(template).__name__
    model = template.model
    if model is None or not (isinstance(model, type) and issubclass(model, models.Model)):
        return [_error(f"{cls_name}.model must be a Django model.", template, "E008")]
    scoped_by_owner = template.owner_field is not None
    if type(template).get_queryset is ModelResourceTemplate.get_queryset and not scoped_by_owner:
        errors.append(
            _error(
                f"{cls_name} neither sets owner_field nor overrides get_queryset(); the base returns no rows.",
                template,
                "E005",
                "Set owner_field = 'owner' (a foreign key to the user model), or return a queryset scoped to "
                "request.user from get_queryset().",
            )
        )
    if template.owner_field is not None:
        try:
            owner_path(model, template.owner_field)
        except ImproperlyConfigured as exc:
            errors.append(
                _error(
                    f"{cls_name}.owner_field {template.owner_field!r} does not lead to {settings.AUTH_USER_MODEL}: "
                    f"{exc}",
                    template,
                    "E019",
                    "Name a path of relations from the model to the user model: a ForeignKey or OneToOneField "
                    "('owner', 'project__owner'), a ManyToManyField ('project__members') or a reverse foreign key "
                    "('team__memberships__user').",
                )
            )
    if template.queryset is not None and getattr(template.queryset, "model", None) is not model:
        errors.append(_error(f"{cls_name}.queryset is not a queryset of {cls_name}.model.", template, "E019"))
    errors.extend(check_ordering(template))
    variables = set(template.compiled.variables)
    lookups = template.get_lookups()
    if set(lookups) != variables:
        errors.append(
            _error(
                f"{cls_name}.lookup_fields must map exactly the template variables {sorted(variables)}.",
                template,
                "E009",
            )
        )
    unknown = [lookup for lookup in lookups.values() if _model_field(model, lookup.split("__")[0]) is None]
    for lookup in unknown:
        errors.append(_error(f"{cls_name} looks up unknown field {lookup!r}.", template, "E009"))
    if not unknown and not _identify_one_record(model, list(lookups.values()), template.owner_field):
        errors.append(
            _error(
                f"{cls_name}'s URI variables {sorted(variables)} do not identify one {model._meta.label}: its "
                f"lookups {sorted(lookups.values())} name no unique field or unique constraint.",
                template,
                "E023",
                "Look up the primary key or a unique field, or declare a UniqueConstraint (or unique_together) over "
                "the looked-up fields: otherwise two records share one URI, a listing repeats it and a read of it "
                "fails.",
            )
        )
    errors.extend(check_metadata_fields(template))
    return errors


def check_ordering(template: ModelResourceTemplate) -> list[checks.CheckMessage]:
    """E004 (an ordering that cannot be a keyset) and W002 (a nullable field of the model itself in it).

    A field may follow forward relations (``organization__slug``) when every hop is a non-null ``ForeignKey`` or
    ``OneToOneField`` and the field it ends at is not nullable: the join then keeps each record once, with a key.
    """
    cls_name = type(template).__name__
    assert template.model is not None
    ordering = list(template.ordering)
    if not ordering:
        return [_error(f"{cls_name}.ordering is empty.", template, "E004")]
    errors: list[checks.CheckMessage] = []
    for position, name in enumerate(ordering):
        if not isinstance(name, str):
            errors.append(_error(f"{cls_name}.ordering holds {name!r}, which is not a field name.", template, "E004"))
            break
        field, refusal = _ordering_field(template.model, name)
        if field is None:
            errors.append(_error(f"{cls_name}.ordering names unknown field {name!r}.", template, "E004"))
            break
        if refusal is not None:
            errors.append(
                _error(
                    f"{cls_name}.ordering field {name!r} {refusal}.",
                    template,
                    "E004",
                    "Order through non-null ForeignKey or OneToOneField relations to a non-null field, such as "
                    "ordering = ('organization__slug', 'id') where Customer.organization and Organization.slug are "
                    "not nullable.",
                )
            )
            break
        if field.null:
            errors.append(
                checks.Warning(
                    f"{cls_name}.ordering field {name!r} is nullable; NULL keys break paging.",
                    hint="Keyset pagination compares values; order by non-null fields only.",
                    obj=type(template),
                    id="mcp_resources.W002",
                )
            )
        if position == len(ordering) - 1 and ("__" in name or not (field.primary_key or field.unique) or field.null):
            errors.append(
                _error(
                    f"{cls_name}.ordering must end in a unique, non-null field of {template.model._meta.label}; "
                    f"{name!r} is not.",
                    template,
                    "E004",
                    "Append the primary key, e.g. ordering = ('created', 'pk').",
                )
            )
    return errors


def _ordering_field(model: type[models.Model], name: str) -> tuple[Any, str | None]:
    """The field an ordering ``name`` ends at (``None``: unknown), and why it cannot order a keyset through its
    relations (``None``: it can)."""
    current: Any = model
    parts = name.split("__")
    for index, part in enumerate(parts):
        field = _model_field(current, part)
        if field is None:
            return None, None
        if index == len(parts) - 1:
            if not getattr(field, "concrete", False):
                return None, None
            if index and field.null:
                return field, "ends at a nullable field through a relation (NULL keys break paging)"
            return field, None
        if not (field.many_to_one or field.one_to_one) or not field.concrete or field.related_model is None:
            return field, (
                f"follows {part!r}, a relation to many records (a record would be listed once per related row)"
                if field.is_relation
                else f"follows {part!r}, which is not a relation"
            )
        if field.null:
            return field, f"follows the nullable relation {part!r} (a record without one has no key)"
        current = field.related_model
    return None, None


def check_metadata_fields(template: ModelResourceTemplate) -> list[checks.CheckMessage]:
    """E033 (``modified_field`` is not a date or datetime field), E034 (``size_field`` is not an integer field)."""
    errors: list[checks.CheckMessage] = []
    cls_name = type(template).__name__
    assert template.model is not None
    if template.modified_field is not None:
        field = _field_at_path(template.model, template.modified_field)
        if not isinstance(field, models.DateField):  # a DateTimeField is a DateField
            errors.append(
                _error(
                    f"{cls_name}.modified_field {template.modified_field!r} is not a date or datetime field of "
                    f"{template.model._meta.label}.",
                    template,
                    "E033",
                    "Name the field holding when the record last changed, such as "
                    "updated = models.DateTimeField(auto_now=True): it is listed as annotations.lastModified.",
                )
            )
    if template.size_field is not None:
        field = _field_at_path(template.model, template.size_field)
        if not isinstance(field, models.IntegerField):  # the big, small and positive ones are IntegerFields too
            errors.append(
                _error(
                    f"{cls_name}.size_field {template.size_field!r} is not an integer field of "
                    f"{template.model._meta.label}.",
                    template,
                    "E034",
                    "Name the integer field holding the content's size in bytes: it is listed as size.",
                )
            )
    return errors


def _field_at_path(model: type[models.Model], path: str) -> Any:
    """The field that ``path`` (``a__b``, through forward relations) ends at, or ``None``."""
    current: Any = model
    names = path.split("__")
    for index, name in enumerate(names):
        field = _model_field(current, name)
        if field is None:
            return None
        if index == len(names) - 1:
            return field
        if not (field.many_to_one or field.one_to_one) or field.related_model is None:
            return None
        current = field.related_model
    return None


def _identify_one_record(model: type[models.Model], lookups: list[str], owner_field: str | None) -> bool:
    """Whether ``lookups`` (``a__b`` paths) pin at most one row of ``model``: together they fix the value of a
    unique field, or of every field of a unique constraint. A lookup fixes the field it compares; lookups through a
    forward relation fix it when together they identify one related row (``owner__username``: one user); a
    one-hop ``owner_field`` fixes the owner's field."""
    fixed: set[str] = set()
    through: dict[str, list[str]] = {}
    for lookup in lookups:
        first, _, rest = lookup.partition("__")
        field = _model_field(model, first)
        if field is None or not getattr(field, "concrete", False):
            continue
        if not rest:
            fixed.add(field.name)
        elif (field.many_to_one or field.one_to_one) and field.related_model is not None:
            through.setdefault(field.name, []).append(rest)
        # Otherwise a transform or a lookup such as slug__iexact: no longer an equality on the field.
    for name, rests in through.items():
        if _identify_one_record(_model_field(model, name).related_model, rests, None):
            fixed.add(name)
    owner = _model_field(model, owner_field) if owner_field and "__" not in owner_field else None
    if owner is not None:
        fixed.add(owner.name)
    if any(_model_field(model, name).unique for name in fixed):  # unique is true of the primary key too
        return True
    unique_sets = [*model._meta.unique_together, *(c.fields for c in model._meta.total_unique_constraints)]
    for names in unique_sets:
        fields = [_model_field(model, name) for name in names]
        if all(field is not None for field in fields) and {field.name for field in fields} <= fixed:
            return True
    return False


def _model_field(model: type[models.Model], name: str) -> Any:
    if name == "pk":
        return model._meta.pk
    try:
        return model._meta.get_field(name)
    except FieldDoesNotExist:
        return None
