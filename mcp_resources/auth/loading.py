"""Loading an access token for django-oauth-toolkit's validator in one plain SQL query, without the ORM's compiler.

django-oauth-toolkit's ``OAuth2Validator`` loads a bearer token with
``AccessToken.objects.select_related("application", "user").filter(token_checksum=...).first()``: a queryset built
and compiled on every request, which costs more than the round trip itself. :class:`TokenLoading` loads the same
row with the same join, through documented APIs only: the models' ``_meta`` (table, concrete fields and their
columns), ``connection.cursor()`` (so query logging, ``execute_wrapper`` hooks and debug tools see the SQL) and
``Model.from_db()``. The SQL text is built once per database and set of models.

Only the loading changes. Whether the token is valid (known, not expired, scopes, audience, application usable) is
decided, as before, by the validator's ``validate_bearer_token``, whichever class ``OAUTH2_VALIDATOR_CLASS`` names:
:func:`validator_class` puts the mixin in front of it only when that class loads tokens with django-oauth-toolkit's
own ``_load_access_token`` and the token model's manager is Django's plain ``Manager`` (a swapped token model whose
manager leaves rows out, soft-revoked tokens say, is loaded by django-oauth-toolkit through that manager); anything
unexpected while loading falls back to it. ``tests/test_token_loading.py`` checks that both loaders give the
validator identical tokens and it identical decisions.
"""

from __future__ import annotations

import functools
import hashlib
import logging
from dataclasses import dataclass
from typing import Any

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, models, router

from mcp_resources.queries import native_timestamps

logger = logging.getLogger("mcp_resources.auth")


@dataclass(frozen=True)
class _Query:
    sql: str
    token_fields: tuple[str, ...]
    application_fields: tuple[str, ...]
    user_fields: tuple[str, ...]
    converters: tuple[tuple[Any, tuple[Any, ...]], ...]  # (field, its converters) for each column, in order


def _concrete(model: Any) -> list[Any]:
    return list(model._meta.concrete_fields)


@functools.cache
def _query(alias: str, token_model: Any, application_model: Any, user_model: Any) -> _Query:
    """``SELECT`` the token, its application and its user by checksum (what ``select_related`` would join)."""
    quote = connections[alias].ops.quote_name
    token_table, app_table, user_table = quote("t"), quote("a"), quote("u")
    token_fields = _concrete(token_model)
    app_fields = _concrete(application_model)
    user_fields = _concrete(user_model)
    columns = [f"{token_table}.{quote(f.column)}" for f in token_fields]
    columns += [f"{app_table}.{quote(f.column)}" for f in app_fields]
    columns += [f"{user_table}.{quote(f.column)}" for f in user_fields]
    application = token_model._meta.get_field("application")
    user = token_model._meta.get_field("user")
    checksum = token_model._meta.get_field("token_checksum")
    # Identifiers only, each quoted by the backend; the checksum is a parameter.
    sql = (
        f"SELECT {', '.join(columns)} FROM {quote(token_model._meta.db_table)} {token_table}"  # noqa: S608
        f" LEFT OUTER JOIN {quote(application_model._meta.db_table)} {app_table}"
        f" ON {token_table}.{quote(application.column)} = {app_table}.{quote(application.target_field.column)}"
        f" LEFT OUTER JOIN {quote(user_model._meta.db_table)} {user_table}"
        f" ON {token_table}.{quote(user.column)} = {user_table}.{quote(user.target_field.column)}"
        f" WHERE {token_table}.{quote(checksum.column)} = %s"
        f" ORDER BY {token_table}.{quote(token_model._meta.pk.column)} LIMIT 1"
    )
    connection = connections[alias]
    converters = tuple(
        (
            field,
            tuple(connection.ops.get_db_converters(field.get_col(field.model._meta.db_table)))
            + tuple(field.get_db_converters(connection)),
        )
        for field in (*token_fields, *app_fields, *user_fields)
    )
    return _Query(
        sql,
        tuple(f.attname for f in token_fields),
        tuple(f.attname for f in app_fields),
        tuple(f.attname for f in user_fields),
        converters,
    )


@functools.cache
def _models() -> tuple[Any, Any, Any]:
    """The access token, application and user models (swappable: looked up again after a settings change)."""
    from django.contrib.auth import get_user_model
    from oauth2_provider.models import get_access_token_model, get_application_model

    return get_access_token_model(), get_application_model(), get_user_model()


def loads_every_row(token_model: Any) -> bool:
    """Whether ``token_model``'s managers are Django's plain ``Manager``, so that the plain query sees what
    django-oauth-toolkit's ``AccessToken.objects`` sees. A manager of the project's own (one that leaves out
    soft-revoked tokens, say) may hide rows the table holds: its tokens are loaded through it, never around it."""
    managers = (token_model._default_manager, getattr(token_model, "objects", token_model._default_manager))
    return all(type(manager) is models.Manager for manager in managers)


def load_access_token(token: str) -> Any:
    """The access token whose checksum matches ``token``, with its application and user, or ``None``.

    Raises ``LookupError`` when the plain query would not load what django-oauth-toolkit loads (a token model with a
    manager of its own, relations to other models than the configured ones)."""
    token_model, application_model, user_model = _models()
    if not loads_every_row(token_model):
        raise LookupError("the access token model's manager is not a plain Manager: it decides which rows exist")
    if (
        token_model._meta.get_field("application").related_model is not application_model
        or token_model._meta.get_field("user").related_model is not user_model
    ):
        raise LookupError("the access token's relations are not the configured application and user models")
    alias = router.db_for_read(token_model) or DEFAULT_DB_ALIAS
    query = _query(alias, token_model, application_model, user_model)
    checksum = hashlib.sha256(token.encode("utf-8")).hexdigest()
    with native_timestamps(alias), connections[alias].cursor() as cursor:
        cursor.execute(query.sql, [token_model._meta.get_field("token_checksum").get_prep_value(checksum)])
        row = cursor.fetchone()
    if row is None:
        return None
    values = _converted(connections[alias], query, row)
    n_token, n_app = len(query.token_fields), len(query.application_fields)
    access_token = token_model.from_db(alias, query.token_fields, values[:n_token])
    app_values, user_values = values[n_token : n_token + n_app], values[n_token + n_app :]
    has_app, has_user = access_token.application_id is not None, access_token.user_id is not None
    access_token.application = (
        application_model.from_db(alias, query.application_fields, app_values) if has_app else None
    )
    access_token.user = user_model.from_db(alias, query.user_fields, user_values) if has_user else None
    return access_token


def _converted(connection: Any, query: _Query, row: tuple[Any, ...]) -> list[Any]:
    """The row's values as the ORM returns them: the backend's converters, then each field's ``from_db_value``."""
    out = []
    for (field, converters), value in zip(query.converters, row, strict=True):
        for converter in converters:
            value = converter(value, field, connection)
        out.append(value)
    return out


class TokenLoading:
    """A mixin for an ``OAuth2Validator`` class: ``_load_access_token`` through :func:`load_access_token`.

    Falls back to the validator's own loading when the plain query cannot run (an unexpected model layout or
    database error); the decision about the loaded token stays with the validator.
    """

    def _load_access_token(self, token: str) -> Any:
        try:
            return load_access_token(token)
        except (LookupError, DatabaseError, AttributeError, TypeError, ValueError) as exc:
            logger.debug("loading the token with one query failed (%r): django-oauth-toolkit loads it", exc)
            return super()._load_access_token(token)  # type: ignore[misc]


@functools.cache
def validator_class(configured: type) -> type:
    """The validator to use: ``configured`` with :class:`TokenLoading` in front when ``configured`` loads tokens
    with django-oauth-toolkit's own ``_load_access_token`` and the token model's manager is a plain ``Manager``
    (:func:`loads_every_row`); ``configured`` itself otherwise."""
    from oauth2_provider.oauth2_validators import OAuth2Validator

    if getattr(configured, "_load_access_token", None) is not OAuth2Validator._load_access_token:
        return configured
    if not loads_every_row(_models()[0]):
        return configured
    return type(configured.__name__, (TokenLoading, configured), {"__module__": __name__})


def settings_changed(setting: str) -> None:
    """Forget the token's query, models and validator class when a setting they depend on changes
    (``override_settings``; connected in :mod:`mcp_resources.receivers`)."""
    if setting in ("DATABASES", "AUTH_USER_MODEL") or setting.startswith("OAUTH2_PROVIDER"):
        _query.cache_clear()
        _models.cache_clear()
        validator_class.cache_clear()
