"""System checks: refuse at startup what would otherwise fail at request time.

Each check is a pure function of a registry (and settings); ids are listed in ``docs/checks.md``.
"""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from django.core import checks
from django.core.exceptions import FieldDoesNotExist, ImproperlyConfigured
from django.db import models
from django.utils.module_loading import import_string

from mcp_resources.access import ACCESS_POLICIES, PUBLIC
from mcp_resources.conf import DEFAULTS, REMOVED, RENAMED
from mcp_resources.listing.sources import MIME_TYPE_MAX_LENGTH
from mcp_resources.ownership import owner_path
from mcp_resources.protocol.uris import templates_overlap
from mcp_resources.registries import ResourceRegistry, registry, uri_template_error
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
    errors.extend(check_metadata_fields(template))
    return errors


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
    keys = configured.get("CURSOR_KEYS", DEFAULTS["CURSOR_KEYS"])
    if not isinstance(keys, list | tuple) or any(not _cursor_key_ok(key) for key in keys):
        messages.append(
            checks.Error(
                "MCP_RESOURCES['CURSOR_KEYS'] must be a list of secrets of at least 16 bytes each (str or bytes).",
                hint="`python manage.py mcp_cursor_key` prints a fresh key.",
                id="mcp_resources.E029",
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
    messages.extend(_check_limits(configured))
    return messages


POSITIVE_INTEGER_SETTINGS = (
    "MAX_REQUEST_BYTES",
    "MAX_RESPONSE_BYTES",
    "CURSOR_TTL_SECONDS",
    "SESSION_TIMEOUT_SECONDS",
    "STREAMS_PER_CALLER",
    "URIS_PER_LISTEN",
    "STREAM_QUEUE_SIZE",
)
"""Sizes, counts and lifetimes that must be integers of at least 1 (E035)."""

POSITIVE_NUMBER_SETTINGS = ("LIST_DEADLINE_SECONDS", "STREAM_SEND_TIMEOUT_SECONDS", "STREAM_KEEPALIVE_SECONDS")
"""Durations that must be numbers above 0 (E035)."""


def _check_limits(configured: dict[str, Any]) -> list[checks.CheckMessage]:
    """E035: a limit that is not a number, or one that would admit nothing (``STREAM_QUEUE_SIZE`` 0 ends every
    stream at its first notification; ``MAX_REQUEST_BYTES`` 0 refuses every request)."""
    hint = "docs/settings.md gives each setting's unit."
    messages: list[checks.CheckMessage] = []
    for key in (*POSITIVE_INTEGER_SETTINGS, *POSITIVE_NUMBER_SETTINGS, "PUBLIC_CACHE_TTL_MS"):
        value = configured.get(key, DEFAULTS[key])
        integer = key not in POSITIVE_NUMBER_SETTINGS
        usable = not isinstance(value, bool) and isinstance(value, int if integer else int | float)
        if key in POSITIVE_INTEGER_SETTINGS:
            usable, wanted = usable and value >= 1, "an integer of at least 1"
        elif key in POSITIVE_NUMBER_SETTINGS:
            usable, wanted = usable and value > 0, "a number of seconds above 0"
        else:
            wanted = "an integer"
        if not usable:
            messages.append(_setting_error(f"MCP_RESOURCES[{key!r}] must be {wanted}, not {value!r}.", "E035", hint))
    return messages


def _cursor_key_ok(key: object) -> bool:
    if isinstance(key, str):
        key = key.encode()
    return isinstance(key, bytes) and len(key) >= 16


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


# Deployment: what must be shared by several workers and machines (docs/deployment.md) ---------------------
# Registered with deploy=True: ``manage.py check --deploy`` runs them, development servers never warn.

PER_PROCESS_CACHES = ("django.core.cache.backends.locmem.LocMemCache", "django.core.cache.backends.dummy.DummyCache")
IN_MEMORY_LAYER = "channels.layers.InMemoryChannelLayer"


def _is_backend(path: object, candidates: tuple[str, ...]) -> bool:
    """Whether the dotted ``path`` names one of ``candidates`` or a subclass of one (an unimportable path: no)."""
    if not isinstance(path, str):
        return False
    if path in candidates:
        return True
    try:
        backend = import_string(path)
    except ImportError:
        return False
    bases = []
    for candidate in candidates:
        try:
            bases.append(import_string(candidate))
        except ImportError:
            continue
    return isinstance(backend, type) and any(issubclass(backend, base) for base in bases)


def _deploy_warning(message: str, hint: str, obj: str, id: str) -> checks.CheckMessage:
    return checks.Warning(message, hint=hint, obj=obj, id=f"mcp_resources.{id}")


def check_deployment() -> list[checks.CheckMessage]:
    """Cursor keys, the 2025-11-25 session cache and the channel layer, as several processes need them."""
    from mcp_resources.conf import mcp_settings

    messages: list[checks.CheckMessage] = []
    if not mcp_settings.cursor_keys:
        messages.append(
            _deploy_warning(
                "MCP_RESOURCES['CURSOR_KEYS'] is not set: each process seals pagination cursors with a random key of "
                "its own, so with several workers or machines page 2 fails at random (-32602 Invalid cursor), and "
                "every restart ends the traversals in progress.",
                "Set CURSOR_KEYS to a secret every process shares: `python manage.py mcp_cursor_key` prints a fresh "
                "one (docs/deployment.md).",
                "MCP_RESOURCES",
                "W010",
            )
        )
    alias = mcp_settings.session_cache
    cache = (getattr(settings, "CACHES", None) or {}).get(alias)
    if isinstance(cache, dict) and _is_backend(cache.get("BACKEND"), PER_PROCESS_CACHES):
        messages.append(
            _deploy_warning(
                f"MCP_RESOURCES['SESSION_CACHE'] is {alias!r}, a {str(cache['BACKEND']).rsplit('.', 1)[-1]}: the "
                "sessions of 2025-11-25 clients live in one process only, so with several workers or machines a "
                "session's next request fails at random (404 Session not found)"
                + (", and the dummy cache keeps none at all." if "Dummy" in str(cache["BACKEND"]) else "."),
                "Point SESSION_CACHE at a cache every process shares (Redis, Memcached or the database cache).",
                "MCP_RESOURCES",
                "W011",
            )
        )
    if mcp_settings.subscriptions:
        layers = getattr(settings, "CHANNEL_LAYERS", None) or {}
        layer = layers.get(mcp_settings.channel_layer)
        if not layers or (isinstance(layer, dict) and _is_backend(layer.get("BACKEND"), (IN_MEMORY_LAYER,))):
            messages.append(
                _deploy_warning(
                    "Subscriptions use an in-memory channel layer: a change saved in one process (another worker, "
                    "another machine, a management command, a task queue) notifies none of the streams the other "
                    "processes hold.",
                    "Configure CHANNEL_LAYERS with channels-redis (the 'redis' extra) and name it in "
                    "MCP_RESOURCES['CHANNEL_LAYER'], or set MCP_RESOURCES['SUBSCRIPTIONS'] = False.",
                    "CHANNEL_LAYERS",
                    "W012",
                )
            )
    return messages


@checks.register("mcp_resources", deploy=True)
def mcp_resources_deployment_check(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    return check_deployment()


# The project's own authorization server and discovery (docs/oauth.md, "Your own authorization server") ----------
#
# What an MCP client that knows only the endpoint's URL needs: the endpoint's protected resource metadata at its
# well-known URL (E030, W030), an RFC 8414 document for every authorization server it names (E031), and, when this
# project issues the tokens, every scope the templates require (E032) and a way to register (W031). Only for the
# OAuth2Authentication class (or a subclass): the others publish no metadata.


def _oauth2_authentication() -> bool:
    """Whether the endpoint publishes OAuth metadata (the authentication class is ``OAuth2Authentication``) and
    there is a root URLconf to inspect."""
    from mcp_resources.auth.authentication import OAuth2Authentication
    from mcp_resources.conf import mcp_settings

    if not getattr(settings, "ROOT_URLCONF", None):
        return False

    try:
        authentication_class = mcp_settings.authentication_class
    except ImportError:
        return False  # reported as E011
    return isinstance(authentication_class, type) and issubclass(authentication_class, OAuth2Authentication)


def _static_route(pattern: Any) -> str | None:
    """The literal path a URL pattern matches (``None`` when it captures, or is not a plain route)."""
    from django.urls.resolvers import RegexPattern, RoutePattern

    if isinstance(pattern, RoutePattern):
        route = str(pattern)  # the route as written
        return None if "<" in route else route
    if isinstance(pattern, RegexPattern):
        regex = str(pattern).removeprefix("^").removesuffix(r"\Z").removesuffix("$")
        if any(char in re.sub(r"\\[./-]", "", regex) for char in "\\.*+?()[]{}|^$"):
            return None
        return re.sub(r"\\([./-])", r"\1", regex)
    return None


def mcp_endpoint_paths() -> list[str]:
    """The paths (without the leading slash) at which the root URLconf serves an ``MCPView``, literal ones only."""
    from django.urls import URLResolver, get_resolver

    from mcp_resources.transport.views import MCPView

    found: list[str] = []

    def walk(patterns: Any, prefix: str) -> None:
        for entry in patterns:
            route = _static_route(entry.pattern)
            if route is None:
                continue
            if isinstance(entry, URLResolver):
                walk(entry.url_patterns, prefix + route)
                continue
            view = getattr(entry.callback, "view_class", None)
            if isinstance(view, type) and issubclass(view, MCPView):
                found.append(prefix + route)

    walk(get_resolver().url_patterns, "")
    return list(dict.fromkeys(found))


def _view_name(view: type | None) -> str:
    return "a function view" if view is None else f"{view.__module__}.{view.__qualname__}"


def check_resource_metadata_routes() -> list[checks.CheckMessage]:
    """E030 (the endpoint's protected resource metadata is served by another view), W030 (it is not mounted)."""
    from django.urls import Resolver404, resolve

    from mcp_resources.auth.metadata import WELL_KNOWN_PATH
    from mcp_resources.transport.metadata import ProtectedResourceMetadataView

    if not _oauth2_authentication():
        return []
    messages: list[checks.CheckMessage] = []
    for endpoint in mcp_endpoint_paths():
        path_inserted = f"{WELL_KNOWN_PATH}/{endpoint.strip('/')}".rstrip("/")
        for url in dict.fromkeys([path_inserted, WELL_KNOWN_PATH]):
            try:
                match = resolve(url)
            except Resolver404:
                if url == path_inserted:
                    messages.append(
                        checks.Warning(
                            f"The MCP endpoint /{endpoint} advertises its protected resource metadata at {url} in "
                            "every 401 challenge, but nothing is mounted there: OAuth clients cannot discover its "
                            "authorization server.",
                            hint=f'Add *well_known_urlpatterns("{endpoint}") (from mcp_resources.urls) to the root '
                            "URLconf.",
                            obj="ROOT_URLCONF",
                            id="mcp_resources.W030",
                        )
                    )
                continue
            view = getattr(match.func, "view_class", None)
            if isinstance(view, type) and issubclass(view, ProtectedResourceMetadataView):
                continue
            messages.append(
                checks.Error(
                    f"{url}, the protected resource metadata of the MCP endpoint /{endpoint}, is served by "
                    f"{_view_name(view if isinstance(view, type) else None)}, which shadows the endpoint's own: "
                    "clients are told scopes and authorization servers that are not the endpoint's.",
                    hint="Put *well_known_urlpatterns(...) before the patterns that also match it (django-oauth-"
                    "toolkit's metadata_urlpatterns or include('oauth2_provider.urls') at the root), or mount "
                    "mcp_resources.auth.server_urls.authorization_server_urlpatterns() instead of them.",
                    obj="ROOT_URLCONF",
                    id="mcp_resources.E030",
                )
            )
    return messages


def _origin(url: object) -> str | None:
    from urllib.parse import urlsplit

    from mcp_resources.auth.metadata import normalize_resource_uri

    normal = normalize_resource_uri(url) if isinstance(url, str) else ""
    if not normal:
        return None
    parts = urlsplit(normal)
    return f"{parts.scheme}://{parts.netloc}"


def _local_authorization_servers() -> list[tuple[str, str]]:
    """The authorization servers the metadata names that this project serves: ``(as named, issuer path)``.

    Configured URLs (``AUTHORIZATION_SERVERS``, else django-oauth-toolkit's own settings) count when their origin is
    ``RESOURCE_URI``'s; without any, django-oauth-toolkit derives the issuer from its mounted metadata route.
    """
    from urllib.parse import urlsplit

    from mcp_resources.auth import server_urls

    configured = (getattr(settings, "MCP_RESOURCES", None) or {}).get("AUTHORIZATION_SERVERS") or []
    if not isinstance(configured, list | tuple) or not all(isinstance(url, str) for url in configured):
        return []  # reported as E017
    configured = list(configured) or server_urls.configured_issuers()
    if configured:
        ours = _origin((getattr(settings, "MCP_RESOURCES", None) or {}).get("RESOURCE_URI"))
        return [(url, urlsplit(url).path) for url in configured if ours is not None and _origin(url) == ours]
    issuer_path = server_urls.local_issuer_path()
    return [] if issuer_path is None else [(f"this project's issuer ({issuer_path or '/'})", issuer_path)]


def check_authorization_server_metadata() -> list[checks.CheckMessage]:
    """E031: an authorization server served by this project has no RFC 8414 document where clients look."""
    from mcp_resources.auth import server_urls

    if not _oauth2_authentication():
        return []
    messages: list[checks.CheckMessage] = []
    for named, issuer_path in _local_authorization_servers():
        locations = server_urls.metadata_locations(issuer_path)
        if any(server_urls.serves_metadata(location) for location in locations):
            continue
        messages.append(
            checks.Error(
                f"The protected resource metadata names the authorization server {named}, but this project serves "
                f"no authorization server metadata for it at {locations[0]} (nor at {', '.join(locations[1:])}): "
                "MCP clients fall back to guessed endpoints and fail (POST /register answers 404).",
                hint="Mount mcp_resources.auth.server_urls.authorization_server_urlpatterns() at the root of the "
                "URLconf (its RFC 8414 document is at /.well-known/oauth-authorization-server), rather than "
                "include('oauth2_provider.urls') under a prefix.",
                obj="ROOT_URLCONF",
                id="mcp_resources.E031",
            )
        )
    return messages


def _issues_the_tokens() -> bool:
    """Whether this project's django-oauth-toolkit is the MCP endpoint's authorization server."""
    from mcp_resources.auth import server_urls

    if not _oauth2_authentication() or not server_urls.authorization_endpoint_mounted():
        return False
    configured = (getattr(settings, "MCP_RESOURCES", None) or {}).get("AUTHORIZATION_SERVERS") or []
    return not configured or bool(_local_authorization_servers())


def check_authorization_server_scopes(registry: ResourceRegistry) -> list[checks.CheckMessage]:
    """E032: a template (or code-registered static resource) requires a scope the authorization server does not know."""
    from mcp_resources.auth import server_urls

    if not _issues_the_tokens():
        return []
    known = server_urls.scopes_declared()
    messages: list[checks.CheckMessage] = []
    declared: list[tuple[str, Any, tuple[str, ...]]] = [
        (type(template).__name__, type(template), template.scopes) for template in registry.templates
    ]
    declared += [(f"Static resource {resource.uri}", None, resource.scopes) for resource in registry.iter_resources()]
    for label, obj, scopes in declared:
        missing = [scope for scope in scopes if scope not in known]
        if missing:
            messages.append(
                checks.Error(
                    f"{label} requires {', '.join(map(repr, missing))}, which django-oauth-toolkit's scopes "
                    "(OAUTH2_PROVIDER['SCOPES']) do not declare: the authorization server refuses to grant it "
                    "(invalid_scope) and no client can read the resource.",
                    hint="Add it, with the description the consent page shows, to the scopes given to "
                    "authorization_server_settings() (or to OAUTH2_PROVIDER['SCOPES']).",
                    obj=obj or "MCP_RESOURCES",
                    id="mcp_resources.E032",
                )
            )
    return messages


def check_client_registration() -> list[checks.CheckMessage]:
    """W031: this project issues the tokens but an MCP client has no way to register itself."""
    from mcp_resources.auth import server_urls

    if not _issues_the_tokens() or server_urls.client_registration_open():
        return []
    return [
        checks.Warning(
            "This project's authorization server offers MCP clients no way to register themselves: client ID "
            "metadata documents are off (CIMD_ENABLED) and dynamic client registration is off (DCR_ENABLED), not "
            "mounted, or limited to signed-in users (DOT's default DCR_REGISTRATION_PERMISSION_CLASSES).",
            hint="Use authorization_server_settings() for OAUTH2_PROVIDER (both are on), or pre-register every "
            "client and silence this warning.",
            obj="OAUTH2_PROVIDER",
            id="mcp_resources.W031",
        )
    ]


@checks.register("mcp_resources")
def mcp_resources_authorization_server_check(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    return (
        check_resource_metadata_routes()
        + check_authorization_server_metadata()
        + check_authorization_server_scopes(registry)
        + check_client_registration()
    )
