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

from mcp_resources.access import ACCESS_POLICIES, PUBLIC
from mcp_resources.conf import DEFAULTS, REMOVED, RENAMED
from mcp_resources.listing.sources import MIME_TYPE_MAX_LENGTH
from mcp_resources.ownership import owner_relation
from mcp_resources.protocol.uris import templates_overlap
from mcp_resources.registries import ResourceRegistry, registry, uri_template_error
from mcp_resources.resources import ModelResourceTemplate, ResourceTemplate

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
    if scoped_by_owner and owner_relation(model, str(template.owner_field)) is None:
        errors.append(
            _error(
                f"{cls_name}.owner_field {template.owner_field!r} is not a foreign key to {settings.AUTH_USER_MODEL}.",
                template,
                "E019",
                "Name a ForeignKey or OneToOneField to the user model, or a path of them (project__owner).",
            )
        )
    if template.queryset is not None and getattr(template.queryset, "model", None) is not model:
        errors.append(_error(f"{cls_name}.queryset is not a queryset of {cls_name}.model.", template, "E019"))
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
    return errors


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


def check_settings() -> list[checks.CheckMessage]:
    messages: list[checks.CheckMessage] = []
    configured = getattr(settings, "MCP_RESOURCES", None) or {}
    for key in sorted(set(configured) - set(DEFAULTS)):
        if key in RENAMED:
            hint: str | None = f"It was renamed {RENAMED[key]!r} (docs/settings.md)."
        elif key in REMOVED:
            hint = f"It was removed: {REMOVED[key]}."
        else:
            hint = None
        messages.append(
            checks.Warning(
                f"Unknown MCP_RESOURCES setting {key!r}.", hint=hint, id="mcp_resources.W001", obj="MCP_RESOURCES"
            )
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
    return check_templates(registry) + check_settings()


# OAuth resource server settings (docs/oauth.md) ------------------------------------------------------------


def _setting_error(message: str, id: str, hint: str | None = None) -> checks.CheckMessage:
    return checks.Error(message, hint=hint, obj="MCP_RESOURCES", id=f"mcp_resources.{id}")


def _absolute_http_url(value: object) -> bool:
    from urllib.parse import urlsplit

    if not isinstance(value, str):
        return False
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for an invalid port
    except ValueError:
        return False
    return (
        parts.scheme in ("http", "https")
        and bool(parts.hostname)
        and not parts.fragment
        and "#" not in value
        and parts.username is None
        and parts.password is None
    )


def check_auth_settings() -> list[checks.CheckMessage]:
    """The resource-server settings: resource URI, scope hierarchy, servers, token cache."""
    messages: list[checks.CheckMessage] = []
    configured = getattr(settings, "MCP_RESOURCES", None) or {}

    resource_uri = configured.get("RESOURCE_URI", DEFAULTS["RESOURCE_URI"])
    if resource_uri not in (None, "") and not _absolute_http_url(resource_uri):
        messages.append(
            _setting_error(
                f"MCP_RESOURCES['RESOURCE_URI'] is {resource_uri!r}, not an absolute http(s) URI.",
                "E015",
                "Give the endpoint's public URL, e.g. 'https://mcp.example.com/mcp' (no fragment, no userinfo).",
            )
        )

    hierarchy = configured.get("SCOPE_HIERARCHY", DEFAULTS["SCOPE_HIERARCHY"])
    if not isinstance(hierarchy, dict) or not all(
        isinstance(broad, str)
        and isinstance(narrower, list | tuple)
        and all(isinstance(scope, str) and scope and " " not in scope for scope in narrower)
        for broad, narrower in hierarchy.items()
    ):
        messages.append(
            _setting_error(
                "MCP_RESOURCES['SCOPE_HIERARCHY'] must map scope names to lists of the scopes they imply.",
                "E016",
                "For example {'documents': ['documents:read', 'documents:write']}.",
            )
        )

    servers = configured.get("AUTHORIZATION_SERVERS", DEFAULTS["AUTHORIZATION_SERVERS"])
    if not isinstance(servers, list | tuple) or not all(_absolute_http_url(url) for url in servers):
        messages.append(
            _setting_error(
                "MCP_RESOURCES['AUTHORIZATION_SERVERS'] must be a list of issuer URLs.",
                "E017",
                "For example ['https://auth.example.com']; leave it empty to name this project's own server.",
            )
        )

    for key in ("TOKEN_CACHE_TTL_SECONDS", "TOKEN_CACHE_SIZE"):
        value = configured.get(key, DEFAULTS[key])
        if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
            messages.append(_setting_error(f"MCP_RESOURCES[{key!r}] must be a number >= 0.", "E018"))

    if configured.get("ACCEPT_TOKENS_WITHOUT_RESOURCE"):
        messages.append(
            checks.Warning(
                "MCP_RESOURCES['ACCEPT_TOKENS_WITHOUT_RESOURCE'] is on: tokens issued for no particular resource "
                "are accepted, which the MCP authorization spec forbids.",
                hint="Have clients send the RFC 8707 resource parameter and turn the setting off.",
                obj="MCP_RESOURCES",
                id="mcp_resources.W003",
            )
        )
    messages.extend(_check_authorization_server(configured))
    return messages


def _check_authorization_server(configured: dict[str, Any]) -> list[checks.CheckMessage]:
    from mcp_resources.auth.authentication import OAuth2Authentication, local_authorization_server_configured
    from mcp_resources.conf import mcp_settings

    if configured.get("AUTHORIZATION_SERVERS"):
        return []
    try:
        authentication_class = mcp_settings.authentication_class
    except ImportError:
        return []  # reported as E011
    if not (isinstance(authentication_class, type) and issubclass(authentication_class, OAuth2Authentication)):
        return []
    if local_authorization_server_configured():
        return []
    return [
        checks.Warning(
            "The protected resource metadata names no authorization server, so MCP clients cannot discover "
            "where to get a token.",
            hint="Set MCP_RESOURCES['AUTHORIZATION_SERVERS'], or mount django-oauth-toolkit's "
            "metadata_urlpatterns (RFC 8414) at the root of your URLconf.",
            obj="MCP_RESOURCES",
            id="mcp_resources.W004",
        )
    ]


@checks.register("mcp_resources")
def mcp_resources_auth_check(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    return check_auth_settings()


# Subscriptions: the channel layer (docs/subscriptions.md) --------------------------------------------------

REDIS_DEFAULT_POOL = 100  # redis-py's asyncio ConnectionPool holds this many connections unless told otherwise


def _pool_size(host: object) -> int | None:
    """The ``max_connections`` a channels-redis host entry asks for, or ``None`` (redis-py's default)."""
    from urllib.parse import parse_qs, urlsplit

    value: object
    if isinstance(host, dict):
        value = host.get("max_connections")
        if value is None and isinstance(host.get("address"), str):
            return _pool_size(host["address"])
    elif isinstance(host, str):
        value = next(iter(parse_qs(urlsplit(host).query).get("max_connections", [])), None)
    else:
        return None  # a (host, port) pair cannot carry pool options
    if isinstance(value, int | str) and not isinstance(value, bool):
        try:
            return int(value)
        except ValueError:
            return None
    return None


def check_channel_layer() -> list[checks.CheckMessage]:
    """With subscriptions on a channels-redis layer, every host's pool must be larger than redis-py's default."""
    from mcp_resources.conf import mcp_settings

    if not mcp_settings.subscriptions:
        return []
    layer = (getattr(settings, "CHANNEL_LAYERS", None) or {}).get(mcp_settings.channel_layer)
    if not isinstance(layer, dict) or not str(layer.get("BACKEND", "")).startswith("channels_redis."):
        return []
    hosts = (layer.get("CONFIG") or {}).get("hosts") or [("localhost", 6379)]  # channels-redis's default
    small = [host for host in hosts if (_pool_size(host) or REDIS_DEFAULT_POOL) <= REDIS_DEFAULT_POOL]
    if not small:
        return []
    return [
        checks.Warning(
            f"CHANNEL_LAYERS[{mcp_settings.channel_layer!r}] leaves redis-py's connection pool at "
            f"{REDIS_DEFAULT_POOL} connections for {len(small)} of its hosts: a burst of streams opening or closing "
            "together (clients reconnecting after a restart) fails at once past that, refusing listens and leaving "
            "closed streams in their groups.",
            hint='Give each host a dict with a larger pool, e.g. {"address": "redis://...", "max_connections": '
            '1000, "socket_timeout": 30} (see docs/subscriptions.md, Deployment).',
            obj="CHANNEL_LAYERS",
            id="mcp_resources.W005",
        )
    ]


@checks.register("mcp_resources")
def mcp_resources_channel_layer_check(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    return check_channel_layer()
