"""System checks: refuse at startup what would otherwise fail at request time.

Each check is a pure function of a registry (and settings); ids are listed in ``docs/checks.md``.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks
from django.core.exceptions import FieldDoesNotExist
from django.db import models
from django.utils.module_loading import import_string

from mcp_resources.conf import DEFAULTS
from mcp_resources.registry import ResourceRegistry, site
from mcp_resources.resources import ACCESS_POLICIES, PUBLIC, ModelResourceTemplate, ResourceTemplate
from mcp_resources.uris import TemplateError, templates_overlap

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
        try:
            template.compiled  # noqa: B018 - compiling is the check
        except TemplateError as exc:
            errors.append(_error(f"{type(template).__name__}.uri_template does not parse: {exc}", template, "E001"))
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
        if not isinstance(template, ModelResourceTemplate) and type(template).read is ResourceTemplate.read:
            errors.append(_error(f"{type(template).__name__} does not implement read().", template, "E010"))
        if (
            not isinstance(template, ModelResourceTemplate)
            and template.lists_instances
            and (template.access == PUBLIC or not template.discoverable)
        ):
            errors.append(
                _error(
                    f"{type(template).__name__} implements list() but is not protected and discoverable.",
                    template,
                    "E013",
                    "Only a protected, discoverable template may list a caller's resources.",
                )
            )
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


def check_model_template(template: ModelResourceTemplate) -> list[checks.CheckMessage]:
    errors: list[checks.CheckMessage] = []
    cls_name = type(template).__name__
    model = template.model
    if model is None or not (isinstance(model, type) and issubclass(model, models.Model)):
        return [_error(f"{cls_name}.model must be a Django model.", template, "E008")]
    if type(template).get_queryset is ModelResourceTemplate.get_queryset:
        errors.append(
            _error(
                f"{cls_name} does not override get_queryset(); the base returns no rows.",
                template,
                "E005",
                "Return a queryset scoped to request.user, e.g. Model.objects.filter(owner=request.user).",
            )
        )
    ordering = list(template.ordering)
    if not ordering:
        errors.append(_error(f"{cls_name}.ordering is empty.", template, "E004"))
    else:
        for position, name in enumerate(ordering):
            field = _model_field(model, name)
            if field is None:
                errors.append(_error(f"{cls_name}.ordering names unknown field {name!r}.", template, "E004"))
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
            if position == len(ordering) - 1 and not ((field.primary_key or field.unique) and not field.null):
                errors.append(
                    _error(
                        f"{cls_name}.ordering must end in a unique, non-null field; {name!r} is not.",
                        template,
                        "E004",
                        "Append the primary key, e.g. ordering = ('created', 'pk').",
                    )
                )
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
    for lookup in lookups.values():
        if _model_field(model, lookup.split("__")[0]) is None:
            errors.append(_error(f"{cls_name} looks up unknown field {lookup!r}.", template, "E009"))
    return errors


def _model_field(model: type[models.Model], name: str) -> Any:
    if name == "pk":
        return model._meta.pk
    try:
        return model._meta.get_field(name)
    except FieldDoesNotExist:
        return None


def check_settings() -> list[checks.CheckMessage]:
    messages: list[checks.CheckMessage] = []
    configured = getattr(settings, "MCP_RESOURCES", None) or {}
    for key in sorted(set(configured) - set(DEFAULTS)):
        messages.append(
            checks.Warning(f"Unknown MCP_RESOURCES setting {key!r}.", id="mcp_resources.W001", obj="MCP_RESOURCES")
        )
    value = configured.get("AUTHENTICATION_CLASS", DEFAULTS["AUTHENTICATION_CLASS"])
    if isinstance(value, str):
        try:
            import_string(value)
        except ImportError as exc:
            messages.append(
                checks.Error(
                    f"MCP_RESOURCES['AUTHENTICATION_CLASS'] cannot be imported: {exc}",
                    id="mcp_resources.E011",
                    obj="MCP_RESOURCES",
                )
            )
    page_size = configured.get("PAGE_SIZE", DEFAULTS["PAGE_SIZE"])
    if not isinstance(page_size, int) or isinstance(page_size, bool) or not 1 <= page_size <= 100:
        messages.append(
            checks.Error(
                "MCP_RESOURCES['PAGE_SIZE'] must be an integer from 1 to 100.",
                id="mcp_resources.E012",
                obj="MCP_RESOURCES",
            )
        )
    return messages


@checks.register("mcp_resources")
def mcp_resources_check(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    return check_templates(site) + check_settings()
