"""Every exception of the app, in one module.

Errors a client can receive derive from :class:`MCPError`, which carries its JSON-RPC ``code``, a
``default_message`` and the HTTP ``http_status`` of the 2026-07-28 transport as class attributes (Django REST
framework's ``APIException`` pattern). Raise one from a template's hooks and the client gets exactly that error;
any other exception is logged and answered with a generic :class:`InternalError`, so backend details never reach
the client. Configuration errors (registration, URI templates) are ``ImproperlyConfigured`` or ``ValueError``.

This module imports nothing of Django but ``django.core.exceptions``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core.exceptions import ImproperlyConfigured

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
RESOURCE_NOT_FOUND_2025_11_25 = -32002
"""The not-found code of protocol 2025-11-25; 2026-07-28 answers ``-32602`` and must not send this one."""
HEADER_MISMATCH = -32020
UNSUPPORTED_PROTOCOL_VERSION = -32022

_NO_ID: Any = object()


class MCPError(Exception):
    """An error the client receives as a JSON-RPC error: ``code``, ``message`` and optional ``data``.

    Subclasses set ``code``, ``default_message`` and ``http_status`` (the status of a 2026-07-28 answer; sessions of
    2025-11-25 answer application errors with 200). ``request_id`` is filled in by the transport.
    """

    code: int = INTERNAL_ERROR
    default_message: str = "Internal error"
    http_status: int = 200

    def __init__(
        self, message: str | None = None, *, data: Any = None, code: int | None = None, request_id: Any = _NO_ID
    ) -> None:
        self.message = message or self.default_message
        self.data = data
        if code is not None:
            self.code = code
        self.request_id = request_id
        super().__init__(self.message)

    @property
    def has_id(self) -> bool:
        return self.request_id is not _NO_ID

    def with_id(self, request_id: Any) -> MCPError:
        """Set the id of the request this error answers, unless one is set already; returns ``self``."""
        if not self.has_id:
            self.request_id = request_id
        return self

    def to_error(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error

    def to_response(self) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": self.request_id if self.has_id else None, "error": self.to_error()}


# JSON-RPC and MCP wire errors ------------------------------------------------------------------------------------


class ParseError(MCPError):
    code = PARSE_ERROR
    default_message = "Parse error: Invalid JSON"
    http_status = 400


class InvalidRequest(MCPError):
    code = INVALID_REQUEST
    default_message = "Invalid request"
    http_status = 400


class MethodNotFound(MCPError):
    code = METHOD_NOT_FOUND
    default_message = "Method not found"
    http_status = 404


class InvalidParams(MCPError):
    code = INVALID_PARAMS
    default_message = "Invalid params"
    http_status = 400


class InternalError(MCPError):
    """A generic failure; the details stay in the log. HTTP 200: the JSON-RPC body carries the error."""


class HeaderMismatch(MCPError):
    code = HEADER_MISMATCH
    default_message = "Header mismatch"
    http_status = 400


class UnsupportedProtocolVersion(MCPError):
    code = UNSUPPORTED_PROTOCOL_VERSION
    default_message = "Unsupported protocol version"
    http_status = 400


INVALID_CURSOR_DETAIL = (
    "The cursor may come from another server process or from an expired traversal: list again without a cursor."
)
"""``error.data.detail`` of every refused cursor."""


class InvalidCursor(InvalidParams):
    """The cursor cannot be used: tampered, truncated, foreign, expired, or from another traversal.

    Every cause answers the same ``-32602 "Invalid cursor"`` with the same ``data`` (what a client can do about it):
    the client never learns which check failed. ``reason`` is for the server's own use (logs, tests), never sent.
    """

    default_message = "Invalid cursor"

    def __init__(self, reason: str = "") -> None:
        self.reason = reason
        super().__init__(data={"detail": INVALID_CURSOR_DETAIL})


# What a template's hooks raise ---------------------------------------------------------------------------------


class ResourceNotFound(InvalidParams):
    """Raise from a template's read hooks when the URI names no resource this caller may read.

    The client receives the same error whether the record does not exist or belongs to someone else: ``-32602`` in
    protocol 2026-07-28, ``-32002`` in 2025-11-25 sessions, with ``data.uri``.
    """

    default_message = "Resource not found"


class ResourceError(InternalError):
    """Raise to refuse a read with a message meant for the client (sent verbatim as a ``-32603`` error)."""

    def __init__(self, message: str, **kwargs: Any) -> None:
        super().__init__(str(message), **kwargs)


class RequestThrottled(MCPError):
    """A throttle refused the request (a REST framework viewset's ``throttle_classes``): HTTP 429 in 2026-07-28,
    ``-32600``, with ``data.retryAfter`` in seconds when the throttle tells it."""

    code = INVALID_REQUEST
    default_message = "Request was throttled"
    http_status = 429


# Authentication and authorization (answered with HTTP 401 / 403 and a WWW-Authenticate challenge) ----------------


class AuthenticationRequired(MCPError):
    """The operation needs an authenticated caller (HTTP 401 with a Bearer challenge)."""

    code = INVALID_REQUEST
    default_message = "Authentication required"
    http_status = 401

    def __init__(self, scopes: Iterable[str] = (), *, invalid_token: bool = False, reason: str = "") -> None:
        self.scopes = tuple(dict.fromkeys(scopes))
        self.invalid_token = invalid_token
        self.reason = reason
        super().__init__(reason or None)


class InsufficientScope(MCPError):
    """The caller lacks scopes the operation needs (HTTP 403, ``error="insufficient_scope"``)."""

    code = INVALID_REQUEST
    default_message = "Insufficient scope"
    http_status = 403

    def __init__(self, scopes: Iterable[str]) -> None:
        self.scopes = tuple(dict.fromkeys(scopes))
        super().__init__("insufficient scope: " + " ".join(self.scopes))


# Work cut short ------------------------------------------------------------------------------------------------


class RequestCancelled(InternalError):
    """The client disconnected: the work for it stopped, and nothing is sent to it."""

    default_message = "Request timed out"


class DeadlineExceeded(InternalError):
    """The work ran past the request's deadline (``LIST_DEADLINE_SECONDS``)."""

    default_message = "Request timed out"


class SourceContractError(InternalError):
    """A listing source broke the list contract; the client gets a generic internal error, the log gets the detail."""

    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__()

    def __str__(self) -> str:
        return self.detail


class BadPosition(InvalidCursor):
    """A cursor's position does not fit the registered sources or their ordering any more."""


class PageTokenRejected(InvalidCursor):
    """Raise from a repository's ``list_page()`` when its pager refuses the continuation token it is given (expired,
    or from a listing that changed since): the client is told its cursor is invalid, the same ``-32602 "Invalid
    cursor"`` as for any other refused cursor, and lists again. ``reason`` goes to the log, never to the client."""


# Streams -------------------------------------------------------------------------------------------------------


class StreamClosed(Exception):
    """The client of a stream went away or stopped reading."""


class CredentialsRejected(Exception):
    """A stream's credentials are no longer accepted (a revoked token, a deactivated user): the stream ends."""


# Configuration ---------------------------------------------------------------------------------------------------


class TemplateError(ValueError):
    """A URI template that is not valid RFC 6570 level 1 (plus ``{+var}``)."""


class AlreadyRegistered(ImproperlyConfigured):
    """A template or static resource with that name or URI is already registered."""


class NotRegistered(ImproperlyConfigured):
    """The template or static resource is not registered."""


class RegistryFrozen(ImproperlyConfigured):
    """Templates are fixed once the app registry is ready; register them in an app's ``mcp_resources.py``."""
