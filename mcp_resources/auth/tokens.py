"""Issue a django-oauth-toolkit access token for a user: the development aid behind ``manage.py mcp_token``."""

from __future__ import annotations

from typing import Any


def token_and_user_models() -> tuple[Any, Any]:
    """django-oauth-toolkit's access token model and the user model (both swappable)."""
    from django.contrib.auth import get_user_model
    from oauth2_provider.models import get_access_token_model

    return get_access_token_model(), get_user_model()


def live_token_checksums(**filters: Any) -> list[str]:
    """The ``token_checksum`` of every unexpired access token matching ``filters`` (``user=``, ``application=``)."""
    from django.utils import timezone

    token_model, _user_model = token_and_user_models()
    rows = token_model._default_manager.filter(expires__gt=timezone.now(), **filters)
    return [str(checksum) for checksum in rows.values_list("token_checksum", flat=True) if checksum]


def application_model() -> Any:
    """django-oauth-toolkit's application model (swappable)."""
    from oauth2_provider.models import get_application_model

    return get_application_model()


def authorization_server_scopes() -> list[str]:
    """The scopes django-oauth-toolkit declares (``OAUTH2_PROVIDER["SCOPES"]``, through its scopes backend)."""
    from oauth2_provider.scopes import get_scopes_backend

    return [str(scope) for scope in get_scopes_backend().get_all_scopes()]


def issue_access_token(user: Any, scope: str, resource: list[str], expires_in: int, application_name: str) -> str:
    """Create a django-oauth-toolkit access token for ``user`` (development aid for ``mcp_token``).

    The token is issued to a public authorization-code application named ``application_name`` (created on
    first use) and bound to ``resource``. It is stored hashed when django-oauth-toolkit is configured so.
    """
    import secrets
    from datetime import timedelta

    from django.utils import timezone
    from oauth2_provider.models import get_access_token_model, get_application_model, set_token_value

    application_model = get_application_model()
    application, _ = application_model.objects.get_or_create(
        name=application_name,
        defaults={
            "client_type": application_model.CLIENT_PUBLIC,
            "authorization_grant_type": application_model.GRANT_AUTHORIZATION_CODE,
            "redirect_uris": "http://127.0.0.1/callback",
            "skip_authorization": False,
        },
    )
    raw = secrets.token_urlsafe(32)
    access_token = get_access_token_model()(
        user=user,
        application=application,
        scope=" ".join(scope.split()),
        expires=timezone.now() + timedelta(seconds=expires_in),
        resource=list(resource),
    )
    set_token_value(access_token, raw)
    access_token.save()
    return raw
