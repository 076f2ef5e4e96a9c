"""The MCP endpoint: one Django view serving protocol 2026-07-28 and the 2025-11-25 / 2025-06-18 sessions.

Served by Django's own handlers, WSGI or ASGI, behind the project's middleware. Every failure answers with the
status and JSON-RPC error the spec names; nothing escapes as an HTTP 500 and no backend detail reaches the client.
Long-lived streams need an event loop: under ASGI the view answers them with an
:class:`~mcp_resources.transport.streams.EventStreamResponse`, which :class:`~mcp_resources.transport.asgi.MCPEndpoint`
serves on the loop with no thread (Django's own ASGI handler serves it too, with one thread per open stream); under
gunicorn's gevent worker with a :class:`~mcp_resources.transport.greenlets.GreenletStreamResponse`, served from one
event loop in a greenlet of the process.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import logging
import threading
import weakref
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import DisallowedHost, RequestDataTooBig
from django.core.handlers.asgi import ASGIRequest
from django.core.signals import got_request_exception
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.views import View
from django.views.decorators.csrf import csrf_exempt

from mcp_resources import telemetry
from mcp_resources.auth.tokencache import token_cache
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
from mcp_resources.server.static_uris import static_uris
from mcp_resources.subscriptions import broker
from mcp_resources.transport import greenlets
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
from mcp_resources.transport.streams import EVENT_ID_META, EventStreamResponse, Stream, StreamPlan, acquire

logger = logging.getLogger("mcp_resources.transport")

SESSION_HEADER = "Mcp-Session-Id"
STREAMS_SCOPE_KEY = "mcp_resources.streams"
"""Set in the ASGI scope by :class:`~mcp_resources.transport.asgi.MCPEndpoint`: it serves streams on its loop."""
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
    """How an open stream re-checks its caller before each update: who the caller is, then what it may read.

    When the authentication class declares that every change to what it accepts travels on the delivery log as a
    change of the bearer token (:attr:`~mcp_resources.auth.BaseAuthentication.credential_changes_published`, on for
    :class:`~mcp_resources.auth.OAuth2Authentication`), the stream authenticates its opening request once, at its
    first decision, keeps the caller (``request.user`` and the principal), and authenticates again only when its
    token's change arrives (:meth:`credentials_changed`, :meth:`credentials_hold`). Any other credentials (a session
    cookie, a project's own authentication, the test client's principal) are authenticated again before every
    update. Access to the URI is asked of the server on every update either way.

    Streams opened with the same credentials (``caller``) share one decision per change, and
    :meth:`check_each` decides for several callers of one server in as few queries as the template allows. They
    share one ``StreamAccess`` too (:meth:`shared`): the first stream's request and view, kept for the re-checks,
    serve them all, and the other streams' requests are freed once they are answered.
    """

    _shared: weakref.WeakValueDictionary[tuple[Any, ...], StreamAccess] = weakref.WeakValueDictionary()
    _shared_lock = threading.Lock()

    @classmethod
    def shared(
        cls, view: MCPView, request: HttpRequest, protocol_version: str, principal: Principal | None = None
    ) -> StreamAccess:
        """The access of the open streams with the same credentials on the same view class and server, or a new
        one for ``request``."""
        caller = cls.caller_of(view.get_server(), request, protocol_version)
        key = (type(view), caller)
        with cls._shared_lock:
            access = cls._shared.get(key)
            if access is None:
                access = cls._shared[key] = cls(view, request, protocol_version, principal)
            elif principal is not None and principal.expires_at is not None:
                access.expires_at = principal.expires_at  # as authenticated now
        return access

    @staticmethod
    def caller_of(server: MCPServer, request: HttpRequest, protocol_version: str) -> tuple[Any, ...]:
        """Who ``request``'s credentials are, for sharing decisions: the server, the version, a digest of the
        credentials."""
        forced = getattr(request, FORCED_PRINCIPAL, None)
        credentials = "\x00".join(
            (
                header(request, "Authorization") or "",
                request.COOKIES.get(settings.SESSION_COOKIE_NAME, ""),
                "" if forced is None else f"forced:{id(forced)}",
            )
        )
        digest = hashlib.sha256(credentials.encode("utf-8", "surrogatepass")).hexdigest()
        return (id(server), protocol_version, digest)

    def __init__(
        self, view: MCPView, request: HttpRequest, protocol_version: str, principal: Principal | None = None
    ) -> None:
        # The view without its request, which the handler set on it (a view keeps no other state of a request).
        self.view = copy.copy(view)
        for name in ("request", "args", "kwargs", "head"):
            vars(self.view).pop(name, None)
        self.request = request
        self._slimmed = False
        self.protocol_version = protocol_version
        self.server = view.get_server()
        forced = getattr(request, FORCED_PRINCIPAL, None)
        self.caller: tuple[Any, ...] = self.caller_of(self.server, request, protocol_version)
        authorization = header(request, "Authorization") or ""
        scheme, _, token = authorization.partition(" ")
        self.token_checksum: str | None = (
            hashlib.sha256(token.strip().encode("utf-8", "surrogatepass")).hexdigest()
            if scheme.lower() == "bearer" and token.strip()
            else None
        )
        """SHA-256 of the bearer token, as django-oauth-toolkit's ``token_checksum`` stores it."""
        self.expires_at: float | None = None if principal is None else principal.expires_at
        """The expiry of the credentials as last authenticated (a token change may move it)."""
        self.keeps = (
            principal is not None
            and forced is None
            and bool(getattr(mcp_settings.authentication_class, "credential_changes_published", False))
            and (self.token_checksum is not None or not principal.authenticated)
        )
        """Whether the caller is kept between token changes; else it is authenticated again before every update
        (changes to its credentials do not travel on the log: nothing would tell the stream)."""
        # Authenticated at the first decision, once the stream hears its token's changes (a change between the
        # opening request and the stream joining its hub is not missed), then kept until the next change.
        self._kept: CallContext | None = None
        self._generation = 0

    def authenticate(self) -> CallContext:
        """The caller as its credentials authenticate now; raise :exc:`CredentialsRejected` when they no longer
        hold."""
        # A copy: changes of several URIs are decided at once, and authenticating sets attributes on the request.
        self.slim()
        request = copy.copy(self.request)
        try:
            principal = self.view.authenticate(request)
        except AuthenticationRequired as exc:
            raise CredentialsRejected() from exc
        self.expires_at = principal.expires_at
        return CallContext(request, self.protocol_version, principal, streams=True)

    # What the re-checks of a caller never use: the body (read, as its stream and ``wsgi.input``), the messages
    # storage and the URL match.
    SLIMMED = ("_stream", "_messages", "resolver_match")

    def slim(self) -> None:
        """Drop what the re-checks never use from the kept request (once; called when the stream opens, after the
        response left the middleware, else at the first check)."""
        if self._slimmed:
            return
        self._slimmed = True
        for name in self.SLIMMED:
            vars(self.request).pop(name, None)
        self.request.META.pop("wsgi.input", None)

    def context(self) -> CallContext:
        """The caller for one decision: a copy of the kept caller (authenticated again first when its token changed
        since), or the credentials authenticated again; raise :exc:`CredentialsRejected` when they no longer hold."""
        if not self.keeps:
            return self.authenticate()
        kept = self._kept
        if kept is None:
            generation = self._generation
            ctx = self.authenticate()
            if generation != self._generation:  # the token changed again meanwhile: not kept
                return ctx
            self._kept = kept = ctx
        return self._fresh(kept)

    @staticmethod
    def _fresh(kept: CallContext) -> CallContext:
        # The request and its user copied: what a decision caches on them (permissions, related objects) is not
        # kept for the next one, which reads them again as a request would.
        request = copy.copy(kept.request)
        request.user = copy.copy(kept.request.user)
        return CallContext(request, kept.protocol_version, kept.principal, streams=True)

    def credentials_changed(self) -> None:
        """The log says the stream's token changed (on the event loop, in the log's order): decisions started from
        now on authenticate again, past the token cache."""
        self._generation += 1
        self._kept = None
        if self.token_checksum is not None:
            token_cache.discard(self.token_checksum)

    def __call__(self, uri: str) -> bool:
        return self.server.may_read(uri, self.context())

    def credentials_hold(self) -> bool:
        """Whether the stream's credentials are still accepted (checked when its token changes): authenticated again,
        past the token cache, and kept as they are now."""
        if self.token_checksum is not None:
            token_cache.discard(self.token_checksum)  # cached by this process before the change, maybe elsewhere
        generation = self._generation
        try:
            ctx = self.authenticate()
        except CredentialsRejected:
            return False
        if self.keeps and generation == self._generation:
            self._kept = ctx
        return True

    @classmethod
    def check_each(cls, uri: str, accesses: list[StreamAccess]) -> list[bool | None]:
        """Decide ``uri`` for each of ``accesses``: ``True``, ``False``, or ``None`` (credentials rejected)."""
        outcome: list[bool | None] = [None] * len(accesses)
        by_server: dict[int, list[tuple[int, CallContext]]] = {}
        known = static_uris.get()  # the log's reader forgets them as it reads a change (no query per URI)
        for index, access in enumerate(accesses):
            try:
                ctx = access.context()
            except CredentialsRejected:
                continue
            ctx.static_uris = known
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
    """Whether a stream can be served: under ASGI, by :class:`~mcp_resources.transport.asgi.MCPEndpoint` (on its
    loop) or by Django's own ASGI handler (one thread per stream); under WSGI only in a process gevent has patched
    (gunicorn's gevent worker: :mod:`~mcp_resources.transport.greenlets`)."""
    return endpoint_serves(request) or isinstance(request, ASGIRequest) or greenlets.gevent_patched()


def endpoint_serves(request: HttpRequest) -> bool:
    """Whether the request came through :class:`~mcp_resources.transport.asgi.MCPEndpoint`."""
    scope = getattr(request, "scope", None)
    if isinstance(scope, dict) and scope.get(STREAMS_SCOPE_KEY):
        return True
    return request.META.get(STREAMS_SCOPE_KEY) is True  # MCPEndpoint running Django's WSGI handler


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

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        refused = self.precheck(request)
        if refused is not None:
            return refused
        try:
            return super().dispatch(request, *args, **kwargs)
        except Exception:
            logger.exception("unexpected error in the MCP endpoint")
            got_request_exception.send(sender=type(self), request=request)
            return error_response(InternalError(request_id=None), 200)

    def http_method_not_allowed(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = HttpResponse(status=405)
        # DELETE ends a session (with its Mcp-Session-Id); its GET stream is served where `serves_streams()` holds.
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

    def post(self, request: HttpRequest) -> HttpResponseBase:
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
            if message.method == "subscriptions/listen":
                return error_response(InvalidRequest("subscriptions/listen must be a request", request_id=None))
            return HttpResponse(status=202)
        try:
            version = check_stateless_request(request, message.method, message.params)
        except MCPError as exc:
            return error_response(exc.with_id(message.id))
        ctx = CallContext(request, version, principal, streams=serves_streams(request))
        if message.method == "subscriptions/listen":
            return self.listen(request, message, ctx)
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

    def get(self, request: HttpRequest) -> HttpResponseBase:
        """A 2025-11-25 session's GET stream (under ASGI or gunicorn's gevent worker; ``405`` under other WSGI servers,
        which the transport allows)."""
        session_id = header(request, SESSION_HEADER)
        if session_id is None or not mcp_settings.subscriptions or not serves_streams(request):
            return self.http_method_not_allowed(request)
        try:
            principal = self.authenticate(request)
        except AuthenticationRequired as exc:
            return self.auth_failure(request, exc)
        session: Session | None = self.session_store.get(session_id, principal)
        if session is None:
            return error_response(InvalidRequest("Session not found", request_id=None), 404)
        last_event_id = header(request, "Last-Event-ID")
        access = self._checker(request, session.protocol_version, principal)
        plan = StreamPlan(
            owner=owner_of(principal),
            uris=set(session.subscriptions),
            list_changed=True,
            check=access,
            caller=access.caller,
            session_id=session.id,
            expires_at=principal.expires_at,
            resync=functools.partial(subscriptions_of, session.id),
            token_checksum=access.token_checksum,
            # An id that is not the log's cannot be resumed: the stream tells its client to read everything again.
            resume_after=None if last_event_id is None else resumable(last_event_id),
        )
        return self.stream_response(request, plan, {SESSION_HEADER: session.id})

    # Streams (prepared here in a worker thread, served on the event loop) ------------------------------------

    def _checker(self, request: HttpRequest, protocol_version: str, principal: Principal) -> StreamAccess:
        """Re-check the stream's caller (``request``, which authenticated as ``principal``) and its read access to
        ``uri`` before each update (:class:`StreamAccess`).

        Credentials that are no longer accepted raise :exc:`CredentialsRejected`: the stream ends.
        """
        return StreamAccess.shared(self, request, protocol_version, principal)

    def listen(self, request: HttpRequest, message: jsonrpc.Message, ctx: CallContext) -> HttpResponseBase:
        """``subscriptions/listen``: validated by the server's method, answered with a stream."""
        server = self.get_server()
        if server.sources() and not ctx.principal.authenticated and ctx.streams and mcp_settings.subscriptions:
            return self.auth_failure(request, AuthenticationRequired(server.inventory_scopes()))
        meta = message.params.get("_meta")
        resume = meta.get(EVENT_ID_META) if isinstance(meta, dict) else None
        if resume is not None and broker.parse_id(resume) is None:
            error = InvalidParams(f"_meta[{EVENT_ID_META!r}] must be an event id of this server's notifications")
            return error_response(error.with_id(message.id))
        with telemetry.operation(
            "subscriptions/listen", message.params, request_id=message.id, protocol_version=ctx.protocol_version
        ) as operation:
            try:
                result = server.call("subscriptions/listen", message.params, ctx)
            except (AuthenticationRequired, InsufficientScope) as exc:
                if operation is not None:
                    operation.fail(exc.code, exc.message)
                return self.auth_failure(request, exc)
            except MCPError as exc:
                if operation is not None:
                    operation.fail(exc.code, exc.message)
                return error_response(exc.with_id(message.id))
        access = self._checker(request, ctx.protocol_version, ctx.principal)
        plan = StreamPlan(
            owner=owner_of(ctx.principal),
            uris=set(result.get("resourceSubscriptions", [])),
            list_changed=bool(result.get("resourcesListChanged")),
            check=access,
            caller=access.caller,
            subscription_id=message.id,
            honoured={key: value for key, value in result.items() if key not in ("resultType", "_meta")},
            expires_at=ctx.principal.expires_at,
            token_checksum=access.token_checksum,
            resume_after=resume,
        )
        return self.stream_response(request, plan)

    def stream_response(
        self, request: HttpRequest, plan: StreamPlan, headers: dict[str, str] | None = None
    ) -> HttpResponseBase:
        """The stream of ``plan`` as a response, or the refusal (429 past ``STREAMS_PER_CALLER``, -32603 when the
        log cannot be reached)."""
        try:
            broker.get_log().last_id()
        except Exception:
            logger.exception("could not reach the log of change notifications")
            return error_response(InternalError(request_id=plan.subscription_id), 200)
        if not acquire(plan):
            error = InvalidRequest("Too many open streams for this caller", request_id=plan.subscription_id)
            return error_response(error, 429)
        if endpoint_serves(request):
            return EventStreamResponse(Stream(plan), headers)
        if not isinstance(request, ASGIRequest):  # WSGI, patched by gevent (serves_streams)
            return greenlets.GreenletStreamResponse(Stream(plan), headers, request.META.get("gunicorn.socket"))
        warn_thread_per_stream()
        return EventStreamResponse(Stream(plan), headers)


def resumable(last_event_id: str) -> str:
    """Where a GET stream resumes: after ``Last-Event-ID``; one that is not the log's id cannot be resumed (``-``:
    the stream tells its client to read everything again, as past the retention window)."""
    return last_event_id if broker.parse_id(last_event_id) else "-"


_warned: list[bool] = []


def warn_thread_per_stream() -> None:
    """Log ``mcp_resources.W014`` once: Django's own ASGI handler holds a thread for each open stream."""
    if not _warned:
        _warned.append(True)
        logger.warning(
            "?: (mcp_resources.W014) A stream is served by Django's own ASGI handler, which holds one thread for "
            "each open stream. HINT: Route the MCP path to mcp_resources.MCPEndpoint, which serves streams on the "
            "event loop without a thread (docs/deployment.md)."
        )
