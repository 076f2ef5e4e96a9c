"""Exceptions an application raises from its templates, and registry errors.

Protocol errors (JSON-RPC codes) live in :mod:`mcp_resources.jsonrpc`; the server core translates these
application-level exceptions into the code of the caller's protocol era.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.core.exceptions import ImproperlyConfigured


class ResourceNotFound(Exception):
    """Raise from a template's read hooks when the URI names no resource this caller may read.

    The client receives the same not-found error whether the record does not exist or belongs to someone else.
    """


class ResourceError(Exception):
    """Raise to refuse a read with a message meant for the client (sent verbatim as a -32603 error)."""

    def __init__(self, message: str) -> None:
        self.message = str(message)
        super().__init__(self.message)


class AuthenticationRequired(Exception):
    """The operation needs an authenticated caller (HTTP 401 with a Bearer challenge)."""

    def __init__(self, scopes: Iterable[str] = (), *, invalid_token: bool = False, reason: str = "") -> None:
        self.scopes = tuple(dict.fromkeys(scopes))
        self.invalid_token = invalid_token
        self.reason = reason
        super().__init__(reason or "authentication required")


class InsufficientScope(Exception):
    """The caller lacks scopes the operation needs (HTTP 403, ``error="insufficient_scope"``)."""

    def __init__(self, scopes: Iterable[str]) -> None:
        self.scopes = tuple(dict.fromkeys(scopes))
        super().__init__("insufficient scope: " + " ".join(self.scopes))


class AlreadyRegistered(ImproperlyConfigured):
    """A template or static resource with that name or URI is already registered."""


class NotRegistered(ImproperlyConfigured):
    """The template or static resource is not registered."""


class RegistryFrozen(ImproperlyConfigured):
    """Templates are fixed once the app registry is ready; register them in an app's ``mcp_resources.py``."""
