"""The MCP endpoint: one Django view serving protocol 2026-07-28 and the 2025-11-25 / 2025-06-18 sessions.

Served by Django's own handlers, WSGI or ASGI, behind the project's middleware. Every failure answers with the
status and JSON-RPC error the spec names; nothing escapes as an HTTP 500 and no backend detail reaches the client.
Long-lived streams need an event loop: :class:`~mcp_resources.transport.asgi.MCPEndpoint` serves them with the
plans this view prepares (:meth:`MCPView.prepare_listen`, :meth:`MCPView.prepare_session_stream`).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.exceptions import DisallowedHost, RequestDataTooBig
from django.core.signals import got_request_exception
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.views import View
from django.views.decorators.csrf import csrf_exempt

from mcp_resources import telemetry
from mcp_resources.conf import mcp_settings
from mcp_resources.exceptions import (
    AuthenticationRequired,
    CredentialsRejected,
    InsufficientScope,
    InternalError,
    InvalidParams,
    InvalidRequest,
    MCPError,
)
from mcp_resources.principal import Principal
from mcp_resources.protocol import jsonrpc
from mcp_resources.protocol.versions import PROTOCOL_VERSION_META, SESSION_VERSIONS, V2026_07_28
from mcp_resources.protocol.versions import negotiate_session_version as negotiate_version
from mcp_resources.server import CallContext, MCPServer, default_server
from mcp_resources.transport.headers import check_stateless_request, header
from mcp_resources.transport.origin import origin_allowed
from mcp_resources.transport.sessions import (
    Session,
    SessionLimitReached,
    SessionStore,
    default_store,
    owner_of,
    subscriptions_of,
)
from mcp_resources.transport.streams import StreamPlan

logger = logging.getLogger("mcp_resources.transport")

SESSION_HEADER = "Mcp-Session-Id"
STREAMS_SCOPE_KEY = "mcp_resources.streams"
"""Set in the ASGI scope by :class:`~mcp_resources.transport.asgi.MCPEndpoint`: this deployment serves streams."""
STREAM_SLOT_KEY = "mcp_resources.stream_slot"
"""Where :class:`~mcp_resources.transport.asgi.MCPEndpoint` puts a :class:`StreamSlot` (ASGI scope or WSGI
environ) for a stream's opening request that it sends through Django's handler and the middleware."""
STREAM_PLAN_HEADER = "X-MCP-Stream-Plan"
"""The header of the placeholder response that stands for a prepared stream while the middleware sees it."""
FORCED_PRINCIPAL = "_mcp_forced_principal"
"""The request attribute through which :mod:`mcp_resources.test` authenticates a test request without a token."""

# Results the server builds of strings, integers, booleans and None only: encoded with jsonrpc.dumps_plain.
# (Not resources/templates/list: a template's annotations may hold floats, such as a priority.)
PLAIN_RESULTS = frozenset({"resources/list"})


def json_response(
    payload: Any,
    status: int = 200,
    headers: dict[str, str] | None = None,
    encode: Callable[[Any], bytes] = jsonrpc.dumps,
) -> HttpResponse:
    response = HttpResponse(encode(payload), status=status, content_type="application/json")
    for name, value in (headers or {}).items():
        response[name] = value
    return response


class StreamAccess:
    """How an open stream re-checks its caller: authenticate the opening request again, then ask the server.

    Streams opened with the same credentials (``caller``) share one decision per change, and
    :meth:`check_each` decides for several callers of one server in as few queries as the template allows.
    """

    def __init__(self, view: MCPView, request: HttpRequest, protocol_version: str) -> None:
        self.view = view
        self.request = request
        self.protocol_version = protocol_version
        self.server = view.get_server()
        forced = getattr(request, FORCED_PRINCIPAL, None)
        credentials = "\x00".join(
            (
                header(request, "Authorization") or "",
                request.COOKIES.get(settings.SESSION_COOKIE_NAME, ""),
                "" if forced is None else f"forced:{id(forced)}",
            )
        )
        digest = hashlib.sha256(credentials.encode("utf-8", "surrogatepass")).hexdigest()
        self.caller: tuple[Any, ...] = (id(self.server), protocol_version, digest)

    def context(self) -> CallContext:
        """The caller as it is now; raise :exc:`CredentialsRejected` when its credentials no longer hold."""
        # A copy: changes of several URIs are decided at once, and authenticating sets attributes on the request.
        request = copy.copy(self.request)
        try:
            principal = self.view.authenticate(request)
        except AuthenticationRequired as exc:
            raise CredentialsRejected() from exc
        return CallContext(request, self.protocol_version, principal, streams=True)

    def __call__(self, uri: str) -> bool:
        return self.server.may_read(uri, self.context())

    @classmethod
    def check_each(cls, uri: str, accesses: list[StreamAccess]) -> list[bool | None]:
        """Decide ``uri`` for each of ``accesses``: ``True``, ``False``, or ``None`` (credentials rejected)."""
        outcome: list[bool | None] = [None] * len(accesses)
        by_server: dict[int, list[tuple[int, CallContext]]] = {}
        for index, access in enumerate(accesses):
            try:
                ctx = access.context()
            except CredentialsRejected:
                continue
            by_server.setdefault(id(access.server), []).append((index, ctx))
        for members in by_server.values():
            server = accesses[members[0][0]].server
            decisions = server.may_read_each(uri, [ctx for _index, ctx in members])
            for (index, _ctx), allowed in zip(members, decisions, strict=True):
                outcome[index] = allowed
        return outcome


def error_response(error: MCPError, status: int | None = None, headers: dict[str, str] | None = None) -> HttpResponse:
    return json_response(error.to_response(), status=error.http_status if status is None else status, headers=headers)


def is_stateless_request(message: jsonrpc.Message, version_header: str | None) -> bool:
    """True when a request announces 2026-07-28: the version header or the per-request ``_meta``."""
    meta = message.params.get("_meta")
    return version_header == V2026_07_28 or (isinstance(meta, dict) and PROTOCOL_VERSION_META in meta)


def serves_streams(request: HttpRequest) -> bool:
    """Whether the request came through :class:`~mcp_resources.transport.asgi.MCPEndpoint`, which serves streams."""
    scope = getattr(request, "scope", None)
    if isinstance(scope, dict) and scope.get(STREAMS_SCOPE_KEY):
        return True
    return request.META.get(STREAMS_SCOPE_KEY) is True  # MCPEndpoint running Django's WSGI handler


@dataclass
class StreamSlot:
    """A stream's opening request on its way through Django's handler: the view prepares the stream here.

    ``kind`` is ``"listen"`` (a ``subscriptions/listen`` POST) or ``"session"`` (a 2025-11-25 session's GET). Once
    the request has reached the URLconf's view through the middleware, that view prepares the stream (its server,
    session store and hooks). It leaves the plan in ``plan`` and answers a placeholder response (200,
    ``X-MCP-Stream-Plan: <nonce>``) that the middleware sees as the stream's response;
    :class:`~mcp_resources.transport.asgi.MCPEndpoint` then serves the stream with the headers the middleware
    added. Any other response (a refusal of the view or of a middleware) is sent as it is.
    """

    kind: str
    plan: StreamPlan | None = None
    nonce: str = field(default_factory=lambda: secrets.token_hex(8))

    def fill(self, request: HttpRequest, view: MCPView) -> HttpResponse:
        """Prepare the stream with ``view``, the URLconf's view that found this slot."""
        prepare = view.prepare_listen if self.kind == "listen" else view.prepare_session_stream
        outcome = prepare(request)
        if not isinstance(outcome, StreamPlan):
            return outcome
        self.plan = outcome
        response = HttpResponse(status=200, content_type="text/event-stream")
        response[STREAM_PLAN_HEADER] = self.nonce
        return response


def stream_slot(request: HttpRequest) -> StreamSlot | None:
    """The :class:`StreamSlot` of a stream's opening request sent through Django's handler, else ``None``."""
    scope = getattr(request, "scope", None)
    slot = scope.get(STREAM_SLOT_KEY) if isinstance(scope, dict) else request.META.get(STREAM_SLOT_KEY)
    return slot if isinstance(slot, StreamSlot) else None


def too_large_response() -> HttpResponse:
    """413 with ``-32600``: the request body is over ``MAX_REQUEST_BYTES``."""
    return error_response(InvalidRequest("Request body too large", request_id=None), 413)


class MCPView(View):
    """The MCP endpoint. ``MCPView.as_view(server=MCPServer(registry))`` serves another registry."""

    server: MCPServer | None = None
    session_store: SessionStore = default_store
    """Where 2025-11-25 sessions live, and their bounds (:class:`~mcp_resources.transport.sessions.SessionStore`)."""
    http_method_names = ["get", "post", "delete"]

    @classmethod
    def as_view(cls, **initkwargs: Any) -> Callable[..., HttpResponseBase]:
        server = initkwargs.get("server")
        if server is not None:
            # A registry the project created: checked (and frozen) as its URLconf loads, as the default one is at
            # startup; a configuration the checks that protect answers refuse raises ImproperlyConfigured.
            server.registry.ensure_frozen()
        # Exempt once here: method_decorator(csrf_exempt, name="dispatch") would decorate again on every request.
        return csrf_exempt(super().as_view(**initkwargs))

    def get_server(self) -> MCPServer:
        return self.server or default_server

    def precheck(self, request: HttpRequest) -> HttpResponse | None:
        """``Host`` through ``ALLOWED_HOSTS`` and ``Origin`` against DNS rebinding; a response refuses."""
        try:
            request.get_host()
        except DisallowedHost:
            logger.warning("refused MCP request with a Host not in ALLOWED_HOSTS")
            return error_response(InvalidRequest("Invalid Host header", request_id=None), 400)
        origin = request.META.get("HTTP_ORIGIN")
        if origin is not None and not origin_allowed(request, origin):
            logger.warning("refused MCP request from origin %r", origin[:200])
            return error_response(InvalidRequest("Origin not allowed", request_id=None), 403)
        return None

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        slot = stream_slot(request)
        refused = None if slot is not None else self.precheck(request)  # prepare_* run the same checks
        if refused is not None:
            return refused
        try:
            if slot is not None:
                return slot.fill(request, self)
            return super().dispatch(request, *args, **kwargs)  # type: ignore[return-value]
        except Exception:
            logger.exception("unexpected error in the MCP endpoint")
            got_request_exception.send(sender=type(self), request=request)
            return error_response(InternalError(request_id=None), 200)

    def http_method_not_allowed(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = HttpResponse(status=405)
        # DELETE ends a session (with its Mcp-Session-Id); its GET stream is served by MCPEndpoint under ASGI.
        response["Allow"] = "POST, DELETE"
        return response

    # Authentication --------------------------------------------------------------------------------------

    def authenticate(self, request: HttpRequest) -> Principal:
        forced = getattr(request, FORCED_PRINCIPAL, None)
        if forced is not None:
            principal, user = forced
            request.user = user
            request.auth = principal  # type: ignore[attr-defined]
        else:
            principal = mcp_settings.authentication_class().authenticate(request)
        request.mcp_principal = principal  # type: ignore[attr-defined]
        return principal

    def auth_failure(self, request: HttpRequest, exc: Exception) -> HttpResponse:
        """401/403 with the ``WWW-Authenticate`` challenge the authentication class builds."""
        authenticator = mcp_settings.authentication_class()
        response: HttpResponse = authenticator.failure_response(request, exc, self.get_server().registry)
        return response

    # POST ------------------------------------------------------------------------------------------------

    def read_body(self, request: HttpRequest) -> bytes | HttpResponse:
        limit = mcp_settings.max_request_bytes
        try:
            declared = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return error_response(InvalidRequest("Invalid Content-Length", request_id=None), 400)
        if declared > limit:
            return too_large_response()
        try:
            body = request.read(limit + 1)
        except RequestDataTooBig:
            return too_large_response()
        if len(body) > limit:
            return too_large_response()
        return body

    def read_message(self, request: HttpRequest) -> tuple[jsonrpc.Message, Principal] | HttpResponse:
        """Read, parse and authenticate one POSTed message; a response refuses it."""
        body = self.read_body(request)
        if isinstance(body, HttpResponse):
            return body
        try:
            message = jsonrpc.parse_message(body)
        except MCPError as exc:
            return error_response(exc)
        try:
            principal = self.authenticate(request)
        except AuthenticationRequired as exc:
            logger.info("refused MCP request: %s", exc.reason or "authentication failed")
            return self.auth_failure(request, exc)
        return message, principal

    def post(self, request: HttpRequest) -> HttpResponse:
        read = self.read_message(request)
        if isinstance(read, HttpResponse):
            return read
        message, principal = read

        session_id = header(request, SESSION_HEADER)
        version_header = header(request, "MCP-Protocol-Version")
        # ``initialize`` opens a session unless the request itself is a 2026-07-28 one: there it is a removed
        # method and falls through to the stateless path, which answers 404 + -32601.
        opens_session = message.method == "initialize" and not is_stateless_request(message, version_header)
        in_session = opens_session or (session_id is not None and version_header != V2026_07_28)

        if message.is_response:
            if in_session and session_id is not None and self.session_store.get(session_id, principal) is not None:
                return HttpResponse(status=202)
            return error_response(InvalidRequest("Clients may not send responses", request_id=None))
        assert message.method is not None
        if opens_session:
            return self.initialize(request, message, principal)
        if in_session:
            assert session_id is not None
            return self.session_message(request, message, principal, session_id, version_header)
        if message.is_notification:
            return HttpResponse(status=202)
        try:
            version = check_stateless_request(request, message.method, message.params)
        except MCPError as exc:
            return error_response(exc.with_id(message.id))
        ctx = CallContext(request, version, principal, streams=serves_streams(request))
        return self.run(message, ctx)

    def initialize(self, request: HttpRequest, message: jsonrpc.Message, principal: Principal) -> HttpResponse:
        if message.is_notification:
            return error_response(InvalidRequest("initialize must be a request", request_id=None), 400)
        requested = message.params.get("protocolVersion")
        if not isinstance(requested, str):
            error = InvalidParams("initialize needs a protocolVersion string", request_id=message.id)
            return error_response(error, 400)
        # Anyone may open a session, as anyone may call the 2026-07-28 wire: what needs a token is answered 401 with
        # the challenge when it is asked for, and the caller's first request with a token claims an anonymous
        # session (SessionStore.get): from anonymous to one caller, never from one caller to another.
        version = negotiate_version(requested)
        ctx = CallContext(request, version, principal, streams=serves_streams(request))
        with telemetry.operation(
            "initialize", message.params, request_id=message.id, protocol_version=version
        ) as operation:
            try:
                result = self.get_server().call("initialize", message.params, ctx)
            except MCPError as exc:
                if operation is not None:
                    operation.fail(exc.code, exc.message)
                return error_response(exc.with_id(message.id), 400)
            try:
                session = self.session_store.create(principal, version)
            except SessionLimitReached as exc:
                logger.warning("refused initialize: the caller already holds %d sessions", exc.limit)
                refusal = InvalidRequest("Too many sessions for this caller", data={"maxSessions": exc.limit})
                if operation is not None:
                    operation.fail(refusal.code, refusal.message)
                headers = {"Retry-After": str(exc.retry_after)}
                return error_response(refusal.with_id(message.id), 429, headers=headers)
            if operation is not None:
                operation.set("mcp.session.id", session.id)
            return json_response(
                jsonrpc.result_response(message.id, result),  # type: ignore[arg-type]
                headers={SESSION_HEADER: session.id},
            )

    def session_message(
        self,
        request: HttpRequest,
        message: jsonrpc.Message,
        principal: Principal,
        session_id: str,
        version_header: str | None,
    ) -> HttpResponse:
        session = self.session_store.get(session_id, principal)
        if session is None:
            return error_response(InvalidRequest("Session not found", request_id=message.id), 404)
        if version_header is not None and version_header != session.protocol_version:
            if version_header not in SESSION_VERSIONS:
                error = InvalidRequest(f"Unsupported MCP-Protocol-Version: {version_header[:40]}")
                return error_response(error.with_id(message.id), 400)
            error = InvalidRequest("MCP-Protocol-Version does not match the session's version")
            return error_response(error.with_id(message.id), 400)
        if message.is_notification:
            return HttpResponse(status=202)
        ctx = CallContext(
            request, session.protocol_version, principal, session=session, streams=serves_streams(request)
        )
        return self.run(message, ctx)

    def run(self, message: jsonrpc.Message, ctx: CallContext) -> HttpResponse:
        assert message.method is not None
        assert message.id is not None
        session_id = getattr(ctx.session, "id", None)
        with telemetry.operation(
            message.method,
            message.params,
            request_id=message.id,
            protocol_version=ctx.protocol_version,
            session_id=session_id,
        ) as operation:
            try:
                result = self.get_server().call(message.method, message.params, ctx)
            except (AuthenticationRequired, InsufficientScope) as exc:
                if operation is not None:
                    operation.fail(exc.code, exc.message)
                return self.auth_failure(ctx.request, exc)
            except MCPError as exc:
                if operation is not None:
                    operation.fail(exc.code, exc.message)
                exc.with_id(message.id)
                return error_response(exc, exc.http_status if ctx.stateless else 200)
            encode = jsonrpc.dumps_plain if message.method in PLAIN_RESULTS else jsonrpc.dumps
            return json_response(jsonrpc.result_response(message.id, result), encode=encode)

    # GET / DELETE ----------------------------------------------------------------------------------------

    def delete(self, request: HttpRequest) -> HttpResponse:
        session_id = header(request, SESSION_HEADER)
        if session_id is None:
            return self.http_method_not_allowed(request)
        try:
            principal = self.authenticate(request)
        except AuthenticationRequired as exc:
            return self.auth_failure(request, exc)
        session = self.session_store.get(session_id, principal)
        if session is None:
            return error_response(InvalidRequest("Session not found", request_id=None), 404)
        self.session_store.end(session)
        return HttpResponse(status=204)

    def get(self, request: HttpRequest) -> HttpResponse:
        # A session's GET stream is served by MCPEndpoint under ASGI; served by Django's handler alone (WSGI) the
        # endpoint offers no stream, which the 2025-11-25 transport allows (405).
        return self.http_method_not_allowed(request)

    # Streams (prepared here in a worker thread, served on the event loop by MCPEndpoint) -----------------------

    def _checker(self, request: HttpRequest, protocol_version: str) -> StreamAccess:
        """Re-authenticate the stream's request and re-check read access to ``uri`` (before each update).

        Credentials that are no longer accepted raise :exc:`CredentialsRejected`: the stream ends.
        """
        return StreamAccess(self, request, protocol_version)

    def prepare_listen(self, request: HttpRequest) -> HttpResponse | StreamPlan:
        """Validate a ``subscriptions/listen`` POST; return the stream's plan or the refusal."""
        try:
            return self._prepare_listen(request)
        except Exception:
            logger.exception("unexpected error preparing a listen stream")
            got_request_exception.send(sender=type(self), request=request)
            return error_response(InternalError(request_id=None), 200)

    def _prepare_listen(self, request: HttpRequest) -> HttpResponse | StreamPlan:
        refused = self.precheck(request)
        if refused is not None:
            return refused
        read = self.read_message(request)
        if isinstance(read, HttpResponse):
            return read
        message, principal = read
        if message.method is None or message.is_notification:
            return error_response(InvalidRequest("subscriptions/listen must be a request", request_id=None))
        try:
            version = check_stateless_request(request, message.method, message.params)
        except MCPError as exc:
            return error_response(exc.with_id(message.id))
        server = self.get_server()
        ctx = CallContext(request, version, principal, streams=True)
        if server.sources() and not principal.authenticated:
            return self.auth_failure(request, AuthenticationRequired(server.inventory_scopes()))
        with telemetry.operation(
            message.method, message.params, request_id=message.id, protocol_version=version
        ) as operation:
            try:
                honoured = server.prepare_listen(message.params, ctx)
            except MCPError as exc:
                if operation is not None:
                    operation.fail(exc.code, exc.message)
                return error_response(exc.with_id(message.id))
        return StreamPlan(
            owner=owner_of(principal),
            uris=set(honoured.get("resourceSubscriptions", [])),
            list_changed=bool(honoured.get("resourcesListChanged")),
            check=(access := self._checker(request, version)),
            caller=access.caller,
            subscription_id=message.id,
            honoured=honoured,
            expires_at=principal.expires_at,
        )

    def prepare_session_stream(self, request: HttpRequest) -> HttpResponse | StreamPlan:
        """Validate a session's GET; return the stream's plan or the refusal (405, 401, 404)."""
        refused = self.precheck(request)
        if refused is not None:
            return refused
        session_id = header(request, SESSION_HEADER)
        if session_id is None or not mcp_settings.subscriptions:
            return self.http_method_not_allowed(request)
        try:
            principal = self.authenticate(request)
        except AuthenticationRequired as exc:
            return self.auth_failure(request, exc)
        session: Session | None = self.session_store.get(session_id, principal)
        if session is None:
            return error_response(InvalidRequest("Session not found", request_id=None), 404)
        return StreamPlan(
            owner=owner_of(principal),
            uris=set(session.subscriptions),
            list_changed=True,
            check=(access := self._checker(request, session.protocol_version)),
            caller=access.caller,
            session_id=session.id,
            expires_at=principal.expires_at,
            extra_headers=[(SESSION_HEADER.lower().encode(), session.id.encode())],
            resync=functools.partial(subscriptions_of, session.id),
        )
