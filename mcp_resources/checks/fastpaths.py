"""The fast path check (W006): a template whose override turned a fast path off is named, with the path and its cost."""

from __future__ import annotations

from django.core import checks

from mcp_resources import fastpaths
from mcp_resources.registries import ResourceRegistry
from mcp_resources.resources import ModelResourceTemplate


def check_fast_paths(registry: ResourceRegistry) -> list[checks.CheckMessage]:
    """W006 for each model template of ``registry`` that leaves ``fast_paths`` undeclared and whose own hooks (the
    project's, not the package's) turned off a fast path its attributes would otherwise enable."""
    messages: list[checks.CheckMessage] = []
    for template in registry.templates:
        if not isinstance(template, ModelResourceTemplate):
            continue
        manager = _project_manager(template)
        if manager is not None:
            messages.append(manager)
        if template._fast_paths_from is not None:
            continue
        cls = type(template)
        lost: list[str] = []
        hooks: dict[str, None] = {}
        for path in fastpaths.FAST_PATHS:
            if path.name in template.fast_paths or not _enabled(template, path.name):
                continue
            own = [
                hook for hook in fastpaths.defined_hooks(cls, ModelResourceTemplate, path.hooks) if _project(cls, hook)
            ]
            if own:
                hooks.update(dict.fromkeys(own))
                lost.append(f"{path.what} (off: {path.cost})")
        if lost:
            defined = ", ".join(f"{hook}()" for hook in hooks)
            messages.append(
                checks.Warning(
                    f"{cls.__name__} defines {defined}, which turns off {len(lost)} fast path(s): "
                    + "; ".join(lost)
                    + ".",
                    hint="Declare the scope with owner_field and queryset instead of overriding it, or declare "
                    'fast_paths with the paths your override does not change (docs/resources.md, "Fast paths"). '
                    "Silence mcp_resources.W006 to accept the cost.",
                    obj=cls,
                    id="mcp_resources.W006",
                )
            )
    return messages


def _project_manager(template: ModelResourceTemplate) -> checks.CheckMessage | None:
    """W006 for a template whose compiled paths are off because its rows come from the model's own default manager
    (a manager of the project's may filter per request, so it is never compiled)."""
    compiled = {fastpaths.COMPILED_LISTING, fastpaths.COMPILED_COMPLETION} & template.fast_paths
    if template.owner_field is None or template.model is None or not compiled or template.fixed_rows:
        return None
    if template.object_permissions:
        return None  # off for the per-record permission whatever the manager: nothing the queryset would change
    manager = type(template.model._default_manager).__name__
    return checks.Warning(
        f"{type(template).__name__} lists {template.model.__name__} through its default manager ({manager}), which "
        "may filter per request: the compiled listing and the compiled completion are off (every page and every "
        "completion is built and compiled by the ORM).",
        hint="If that manager's rows never depend on the request, declare queryset (evaluated once, at import) to "
        "compile them; otherwise silence mcp_resources.W006.",
        obj=type(template),
        id="mcp_resources.W006",
    )


def _enabled(template: ModelResourceTemplate, name: str) -> bool:
    """Whether the attributes of ``template`` would enable the path ``name`` (its declaration aside)."""
    if template.object_permissions and name != fastpaths.OBJECT_ACCESS:
        return False  # a per-record permission: each record is checked as a model instance, each reader alone
    if name in (fastpaths.COMPILED_LISTING, fastpaths.COMPILED_COMPLETION):
        return template.owner_field is not None and template.fixed_rows
    if name == fastpaths.COMPILED_ACCESS:  # and every lookup of the URI compares a field of its own
        targets = template._lookup_targets().values()
        return template.owner_field is not None and template.fixed_rows and all(field is not None for field in targets)
    if name == fastpaths.BATCHED_READERS:
        return template.owner_field is not None
    if name == fastpaths.VALUE_ROWS:
        return template.name_field is not None
    return True


def _project(cls: type, hook: str) -> bool:
    """Whether the class that defines ``hook`` for ``cls`` is the project's (the package's own classes, such as the
    REST framework templates, override hooks by design)."""
    for klass in cls.__mro__:
        if hook in vars(klass):
            return not klass.__module__.startswith("mcp_resources.")
    return False
