"""Find a django-oauth-toolkit access token by its checksum with one narrow, precompiled query.

django-oauth-toolkit's validator loads a token with ``select_related("application", "user")``: one query of
about fifty columns over three tables, compiled by the ORM on every request (about half of its cost). This
module asks the same question with the columns the resource server needs (the token's expiry, scope and
resource, the application's client id, the user's fields), compiled once per thread and database connection
(:mod:`mcp_resources.precompiled`). Nothing is cached between requests except the SQL text: every request reads
the token's current row, so a revocation is seen by the next request.

It is used only where it answers exactly what django-oauth-toolkit's own validation would
(:func:`fast_path_available`); anything else (a custom validator class, token introspection, an application
model that overrides ``is_usable``, a token model that overrides ``is_valid``) goes through
django-oauth-toolkit.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.core.signals import setting_changed
from django.db import DEFAULT_DB_ALIAS, router
from django.db.models import QuerySet

from mcp_resources.precompiled import PrecompiledQuery


@dataclass(frozen=True)
class TokenRow:
    """The fields of one stored access token that the resource server needs."""

    expires: datetime | None
    scope: str
    resource: list[str]
    client_id: str | None
    user: Any  # a user instance, or None for a token without a user (client credentials)


@functools.cache
def fast_path_available() -> bool:
    """Whether a lookup here answers exactly as django-oauth-toolkit's default validation would.

    Computed once (it is asked on every request), again after a change to django-oauth-toolkit's settings.
    """
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


@functools.cache
def _models() -> tuple[Any, Any]:
    """The access token and user models (looked up by name each time otherwise: twice a request)."""
    from django.contrib.auth import get_user_model
    from oauth2_provider.models import get_access_token_model

    return get_access_token_model(), get_user_model()


def _user_attnames(user_model: Any) -> list[str]:
    return [field.attname for field in user_model._meta.concrete_fields]


def _build(shape: None, checksum: str) -> QuerySet[Any]:
    token_model, user_model = _models()
    return token_model._default_manager.filter(token_checksum=checksum).values_list(
        "expires",
        "scope",
        "resource",
        "application__client_id",
        "user_id",
        *(f"user__{name}" for name in _user_attnames(user_model)),
    )[:1]


_lookup = PrecompiledQuery("tokenlookup", _build, arity=1, dependencies=_models)


def find_token(checksum: str) -> TokenRow | None:
    """The stored token whose ``token_checksum`` is ``checksum``, or ``None``."""
    token_model, user_model = _models()
    alias = router.db_for_read(token_model) or DEFAULT_DB_ALIAS
    rows = _lookup.rows(alias, [checksum])
    if not rows:
        return None
    expires, scope, resource, client_id, user_id, *user_values = rows[0]
    user = None
    if user_id is not None:
        user = user_model.from_db(alias, _user_attnames(user_model), user_values)
    return TokenRow(expires=expires, scope=scope or "", resource=list(resource or ()), client_id=client_id, user=user)


def _settings_changed(*, setting: str, **kwargs: Any) -> None:
    if setting.startswith("OAUTH2_PROVIDER"):
        fast_path_available.cache_clear()
    if setting.startswith("OAUTH2_PROVIDER") or setting == "AUTH_USER_MODEL":
        _models.cache_clear()


setting_changed.connect(_settings_changed, dispatch_uid="mcp_resources.tokenlookup.settings_changed")
