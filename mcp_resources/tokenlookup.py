"""Find a django-oauth-toolkit access token by its checksum with one narrow, precompiled query.

django-oauth-toolkit's validator loads a token with ``select_related("application", "user")``: one query of
about fifty columns over three tables, compiled by the ORM on every request (about half of its cost). This
module asks the same question with the columns the resource server needs (the token's expiry, scope and
resource, the application's client id, the user's fields) and compiles that query once per thread and database
connection; each request then executes the compiled SQL with the checksum as its only parameter and applies
the ORM's converters to the row, exactly as a queryset would. Nothing is cached between requests except the
SQL text: every request reads the token's current row, so a revocation is seen by the next request.

It is used only where it answers exactly what django-oauth-toolkit's own validation would
(:func:`fast_path_available`); anything else (a custom validator class, token introspection, an application
model that overrides ``is_usable``, a token model that overrides ``is_valid``) goes through
django-oauth-toolkit.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.core.signals import setting_changed
from django.db import DEFAULT_DB_ALIAS, connections, router

_CHECKSUM_PLACEHOLDER = "\x00mcp_resources.tokenlookup\x00"


@dataclass(frozen=True)
class TokenRow:
    """The fields of one stored access token that the resource server needs."""

    expires: datetime | None
    scope: str
    resource: list[str]
    client_id: str | None
    user: Any  # a user instance, or None for a token without a user (client credentials)


@dataclass(frozen=True)
class _Compiled:
    connection: Any
    sql: str
    params: tuple[Any, ...]
    position: int
    compiler: Any
    converters: dict[int, Any]
    token_model: Any
    user_model: Any
    user_attnames: list[str]


_local = threading.local()


def fast_path_available() -> bool:
    """Whether a lookup here answers exactly as django-oauth-toolkit's default validation would."""
    from oauth2_provider.models import AbstractAccessToken, AbstractApplication, get_access_token_model
    from oauth2_provider.oauth2_validators import OAuth2Validator
    from oauth2_provider.settings import oauth2_settings

    if oauth2_settings.OAUTH2_VALIDATOR_CLASS is not OAuth2Validator:
        return False
    if oauth2_settings.RESOURCE_SERVER_INTROSPECTION_URL:
        return False
    token_model = get_access_token_model()
    if any(
        getattr(token_model, name) is not getattr(AbstractAccessToken, name)
        for name in ("is_valid", "is_expired", "allow_scopes")
    ):
        return False
    application_model = token_model._meta.get_field("application").related_model
    return application_model.is_usable is AbstractApplication.is_usable


def find_token(checksum: str) -> TokenRow | None:
    """The stored token whose ``token_checksum`` is ``checksum``, or ``None``."""
    from oauth2_provider.models import get_access_token_model

    alias = router.db_for_read(get_access_token_model()) or DEFAULT_DB_ALIAS
    compiled = _compiled(alias)
    params = list(compiled.params)
    params[compiled.position] = checksum
    with compiled.connection.cursor() as cursor:
        cursor.execute(compiled.sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    if compiled.converters:
        row = next(iter(compiled.compiler.apply_converters([row], compiled.converters)))
    expires, scope, resource, client_id, user_id, *user_values = row
    user = None
    if user_id is not None:
        user = compiled.user_model.from_db(alias, compiled.user_attnames, user_values)
    return TokenRow(expires=expires, scope=scope or "", resource=list(resource or ()), client_id=client_id, user=user)


def _compiled(alias: str) -> _Compiled:
    from django.contrib.auth import get_user_model
    from oauth2_provider.models import get_access_token_model

    cache: dict[str, _Compiled] = _local.__dict__.setdefault("compiled", {})
    compiled = cache.get(alias)
    if (
        compiled is None
        or compiled.connection is not connections[alias]
        or compiled.token_model is not get_access_token_model()
        or compiled.user_model is not get_user_model()
    ):
        compiled = cache[alias] = _compile(alias)
    return compiled


def _compile(alias: str) -> _Compiled:
    from django.contrib.auth import get_user_model
    from oauth2_provider.models import get_access_token_model

    token_model = get_access_token_model()
    user_model = get_user_model()
    user_attnames = [field.attname for field in user_model._meta.concrete_fields]
    queryset = (
        token_model._default_manager.using(alias)
        .filter(token_checksum=_CHECKSUM_PLACEHOLDER)
        .values_list(
            "expires",
            "scope",
            "resource",
            "application__client_id",
            "user_id",
            *(f"user__{name}" for name in user_attnames),
        )[:1]
    )
    compiler = queryset.query.get_compiler(alias)
    sql, params = compiler.as_sql()
    if list(params).count(_CHECKSUM_PLACEHOLDER) != 1:
        raise RuntimeError("the token lookup query does not have exactly one checksum parameter")
    converters = compiler.get_converters([column for column, _, _ in compiler.select])
    return _Compiled(
        connection=connections[alias],
        sql=sql,
        params=tuple(params),
        position=list(params).index(_CHECKSUM_PLACEHOLDER),
        compiler=compiler,
        converters=converters,
        token_model=token_model,
        user_model=user_model,
        user_attnames=user_attnames,
    )


def _forget(*, setting: str, **kwargs: Any) -> None:
    # Only this thread's copy can be dropped here; other threads recompile when their connection or a model
    # differs from the one they compiled for.
    if setting in ("AUTH_USER_MODEL", "OAUTH2_PROVIDER", "DATABASES", "OAUTH2_PROVIDER_ACCESS_TOKEN_MODEL"):
        _local.__dict__.pop("compiled", None)


setting_changed.connect(_forget, dispatch_uid="mcp_resources.tokenlookup.forget")
