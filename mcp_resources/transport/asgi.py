"""The MCP path under ASGI: streams on the event loop, every other request through Django's handler.

Route the endpoint's path to :class:`MCPEndpoint` with Channels' routers, in front of Django's ASGI application::

    # asgi.py
    django_asgi_app = get_asgi_application()

    from channels.routing import ProtocolTypeRouter, URLRouter
    from django.urls import path, re_path
    from mcp_resources.transport.asgi import MCPEndpoint

    mcp_endpoint = MCPEndpoint.as_asgi()
    application = ProtocolTypeRouter({
        "http": URLRouter([path("mcp", mcp_endpoint), re_path(r"", django_asgi_app)]),
        "lifespan": mcp_endpoint,
    })

- Streams (``subscriptions/listen`` and a 2025-11-25 session's GET) are answered by the view like any request, with
  an :class:`~mcp_resources.transport.streams.EventStreamResponse` that the middleware sees and decorates; the
  endpoint then serves that response's async iterator here, on the event loop, with no thread per stream (Django's
  own ASGI handler would hold one for each). Its writes are bounded by ``STREAM_SEND_TIMEOUT_SECONDS`` and the
  client's disconnect ends it.
- Every request goes through Django's request handler and the project's whole middleware
  stack, as any request. By default the handler is Django's WSGI handler (``get_wsgi_application()``), run in one
  worker thread: the middleware runs synchronously, as under gunicorn, in one thread hop for the whole request,
  where Django's ASGI handler hops threads twice for every synchronous middleware (``MiddlewareMixin``) and once
  more for the view (docs/performance.md). ``MCPEndpoint.as_asgi(django_asgi_app)`` hands these requests to that
  ASGI application instead (the middleware then runs in Django's async mode: for a stack of async-only
  middleware). Either way the endpoint bounds the body first (``MAX_REQUEST_BYTES``: a larger one is answered 413
  before Django reads it) and watches for the client's disconnect, which cancels the request's work
  (:mod:`mcp_resources.cancellation`): a running ``resources/list`` query stops at once.
- ``MCPEndpoint.as_asgi(middleware=False)`` opts out of the middleware: the view then runs in one thread hop
  without Django's handler, which skips every middleware of the project (Sentry, OpenTelemetry, security, CORS).
  The view still validates ``Host`` and ``Origin`` and authenticates every request itself. It is the endpoint's
  own view, and the URLconf is not consulted: give it ``server=`` and ``session_store=`` if the project's differ
  from the defaults. With the middleware on, the URLconf's view serves every request, streams included, and these
  two are refused (``ImproperlyConfigured``): give them to ``MCPView.as_view()``. Without the middleware, Django's
  ASGI application is not the endpoint's to call: ``MCPEndpoint.as_asgi(django_asgi_app, middleware=False)`` is
  refused too (route the other paths to it in the router, as above).
- As the ``lifespan`` application it ends the open streams at shutdown (2026-07-28 listeners with the final
  result).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import sys
import weakref
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.core import signals
from django.core.exceptions import ImproperlyConfigured
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponse, HttpResponseBase

from mcp_resources import cancellation
from mcp_resources.conf import mcp_settings
from mcp_resources.exceptions import InvalidRequest
from mcp_resources.server import MCPServer
from mcp_resources.transport.fanout import counts
from mcp_resources.transport.sessions import SessionStore
from mcp_resources.transport.streams import EventStreamResponse, end_all_streams
from mcp_resources.transport.views import STREAMS_SCOPE_KEY, MCPView, error_response, too_large_response

logger = logging.getLogger("mcp_resources.transport")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[..., Awaitable[None]]
WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class _ClientGone(Exception):
    """The client disconnected before the end of its request body."""


class MCPEndpoint:
    """The ASGI application for the MCP path: streams here, other requests through Django's handler.

    Without ``django_app``, requests other than streams run through Django's WSGI handler in one worker thread,
    the project's middleware included; with it, they are handed to that ASGI application (the project's
    ``get_asgi_application()``). Either way the URLconf's view answers them and prepares the streams.
    ``middleware=False`` serves requests with the endpoint's own view, without Django's handler and the middleware;
    ``server`` and ``session_store`` are that view's, and are refused with the middleware on (the URLconf's view has
    its own). ``django_app`` is refused with ``middleware=False`` (nothing would use it: the router sends the
    project's other paths to Django).
    """

    body_timeout_seconds: float = 30.0
    """The most a request body may take to arrive (a slow or stalled client), like a proxy's ``client_body_timeout``:
    answered 408 with ``-32600``. Subclass to change it."""

    def __init__(
        self,
        django_app: ASGIApp | None = None,
        *,
        server: MCPServer | None = None,
        session_store: SessionStore | None = None,
        middleware: bool = True,
    ) -> None:
        if not middleware and django_app is not None:
            raise ImproperlyConfigured(
                "MCPEndpoint takes no django_app with middleware=False: it then serves MCP requests itself, without "
                "Django's handler, and would never use it; pass no django_app (MCPEndpoint.as_asgi(middleware=False)) "
                "and route the project's other paths to the Django application in the router "
                '(URLRouter([path("mcp", mcp_endpoint), re_path(r"", django_asgi_app)]))'
            )
        options = {"server": server, "session_store": session_store}
        given = {name: value for name, value in options.items() if value is not None}
        if middleware and given:
            names = " and ".join(given)
            raise ImproperlyConfigured(
                f"MCPEndpoint takes {names} only with middleware=False: with the middleware, the URLconf's MCPView "
                f"serves every request, streams included; give {names} to MCPView.as_view() in the URLconf"
            )
        self.django_app = django_app
        self.middleware = middleware
        self.view = MCPView.as_view(**given)
        self.django_handler: WSGIApp | None = None
        if middleware and django_app is None:
            from django.core.wsgi import get_wsgi_application

            self.django_handler = get_wsgi_application()

    @classmethod
    def as_asgi(cls, django_app: ASGIApp | None = None, **initkwargs: Any) -> MCPEndpoint:
        """The endpoint as an ASGI application (Channels' spelling: one instance serves every request)."""
        return cls(django_app, **initkwargs)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            raise ValueError(f"MCPEndpoint serves HTTP, not {scope['type']!r}")
        try:
            async with asyncio.timeout(self.body_timeout_seconds):
                body = await self._read_body(receive, mcp_settings.max_request_bytes)
        except _ClientGone:
            logger.debug("the client disconnected during its request body: nothing to do")
            return
        except TimeoutError:
            logger.info("refused an MCP request whose body took over %gs to arrive", self.body_timeout_seconds)
            await self._send(error_response(InvalidRequest("Request body timeout", request_id=None), 408), send)
            return
        if body is None:
            await self._send(too_large_response(), send)
            return
        token = cancellation.CancellationToken()
        scope = {**scope, cancellation.SCOPE_KEY: token, STREAMS_SCOPE_KEY: True}
        if self.middleware and self.django_app is not None:
            await self.django_app(scope, _replay(body, receive, token), send)
            return
        await self._serve_in_thread(scope, body, receive, send, token)

    # Streams ---------------------------------------------------------------------------------------------

    @staticmethod
    async def _stream(streamed: Streamed, receive: Receive, send: Send) -> None:
        """Serve a stream's response on this loop: its headers as the middleware left them, then its iterator's
        chunks until it ends, the client disconnects or stops reading (a write waits past
        ``STREAM_SEND_TIMEOUT_SECONDS``: :class:`SendWatch`)."""
        response = streamed.response
        stream = response.stream
        watcher = asyncio.ensure_future(_watch_disconnect(receive, None, stream.disconnected))
        headers = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in streamed.headers]
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        watch = SendWatch.of(loop)
        sending, clock = watch.sending, loop.time
        try:
            await stream.open()  # joined before the client hears of the stream: nothing published after is missed
            await send({"type": "http.response.start", "status": streamed.status, "headers": headers})
            async for chunk in response.streaming_content:
                sending[task] = clock()
                if watch.task is None:
                    watch.start()
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                del sending[task]
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except asyncio.CancelledError:
            if task in watch.timed_out and task.uncancel() == 0:
                counts["ended_send_timeout"] += 1
                logger.warning("stream %s ended: a write waited past STREAM_SEND_TIMEOUT_SECONDS", stream.id)
                return
            # The server cancels its connections at shutdown: a listen gets its final result, written at once (no
            # timer task, so the bytes reach the transport before the server stops the loop).
            stream.end("shutdown")
            final = stream.final()
            with contextlib.suppress(Exception):
                await send({"type": "http.response.body", "body": final or b"", "more_body": False})
            raise
        except OSError:
            logger.debug("stream %s: the client has gone", stream.id)
        finally:
            sending.pop(task, None)
            watch.timed_out.discard(task)
            watcher.cancel()
            stream.disconnected()
            await sync_to_async(response.close, thread_sensitive=False)()

    @staticmethod
    async def _lifespan(receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await end_all_streams()
                await send({"type": "lifespan.shutdown.complete"})
                return

    # Requests served in one worker thread: Django's WSGI handler, or the view alone (middleware=False) -------------

    async def _serve_in_thread(
        self, scope: Scope, body: bytes, receive: Receive, send: Send, token: cancellation.CancellationToken
    ) -> None:
        # The watcher first, and one turn of the loop for it: a disconnect already received cancels the token before
        # the view's thread starts (else the thread could pass its check first, and call the sources for nobody).
        watcher = asyncio.ensure_future(_watch_disconnect(receive, token))
        try:
            await asyncio.sleep(0)
            view = asyncio.ensure_future(sync_to_async(self._handle, thread_sensitive=False)(scope, body, token))
            response = await view
        except asyncio.CancelledError:
            # The server abandoned the request (a forced shutdown): free the worker thread as a disconnect would.
            cancellation.cancel(token)
            raise
        finally:
            watcher.cancel()
            await asyncio.wait({watcher})
        # Not kept for a stream's whole life: the finished tasks (the cancelled one with its traceback and frames).
        del view, watcher
        if isinstance(response, EventStreamResponse):
            response = Streamed(response, response.status_code, list(response.items()))
        if isinstance(response, Streamed):
            if token.cancelled:
                await sync_to_async(response.response.close, thread_sensitive=False)()
                return
            await self._stream(response, receive, send)
            return
        if token.cancelled:
            logger.debug("the client disconnected before the response: nothing sent")
            return
        try:
            await self._send(response, send)
        except OSError:
            # A server refuses sends after the client has gone with an OSError (the ASGI spec): nobody to tell.
            logger.debug("the client disconnected while the response was sent")

    def _handle(
        self, scope: Scope, body: bytes, token: cancellation.CancellationToken
    ) -> HttpResponseBase | Answer | Streamed:
        if token.cancelled:
            # The client left while the request waited for a free thread: no work, and nothing will be sent.
            return HttpResponse(status=204)
        if self.django_handler is not None:
            return _through_wsgi(self.django_handler, wsgi_environ(scope, body))
        return _as_request(self.view, ASGIRequest(scope, io.BytesIO(body)))

    # Plumbing --------------------------------------------------------------------------------------------

    @staticmethod
    async def _read_body(receive: Receive, limit: int) -> bytes | None:
        """The whole request body, or ``None`` once it grows past ``limit`` bytes; :exc:`_ClientGone` if the client
        disconnects first."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _ClientGone()
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    @staticmethod
    async def _send(response: HttpResponseBase | Answer, send: Send) -> None:
        answer = response if isinstance(response, Answer) else Answer.of(response)
        headers = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in answer.headers]
        if not any(name == b"content-length" for name, _ in headers) and answer.status not in (204, 304):
            headers.append((b"content-length", str(len(answer.body)).encode("ascii")))
        await send({"type": "http.response.start", "status": answer.status, "headers": headers})
        await send({"type": "http.response.body", "body": answer.body})


class SendWatch:
    """The streams' writes under way on one event loop, and one task that ends those waiting past
    ``STREAM_SEND_TIMEOUT_SECONDS`` (a client that stops reading), looking every quarter of it (at most every
    second), where a timeout around each write would cost a timer per chunk. The task stops once no write is
    under way when it looks, and the next write starts it again."""

    _watches: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, SendWatch] = weakref.WeakKeyDictionary()

    def __init__(self) -> None:
        self.sending: dict[asyncio.Task[Any], float] = {}  # task -> since when
        self.timed_out: set[asyncio.Task[Any]] = set()
        self.task: asyncio.Task[None] | None = None

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop) -> SendWatch:
        watch = cls._watches.get(loop)
        if watch is None:
            watch = cls._watches[loop] = cls()
        return watch

    def start(self) -> None:
        if self.task is None:
            self.task = asyncio.get_running_loop().create_task(self.run())

    async def run(self) -> None:
        try:
            while self.sending:
                timeout = mcp_settings.stream_send_timeout_seconds
                await asyncio.sleep(min(1.0, timeout / 4))
                now = asyncio.get_running_loop().time()
                for task, since in list(self.sending.items()):
                    if now - since > timeout and task not in self.timed_out:
                        self.timed_out.add(task)
                        task.cancel()
        finally:
            self.task = None


def wsgi_environ(scope: Scope, body: bytes) -> dict[str, Any]:
    """The WSGI environ (PEP 3333) of an ASGI HTTP request whose whole ``body`` has been read.

    Headers become ``HTTP_*`` keys as Django's ASGI request makes them (repeated headers joined with commas, names
    with underscores dropped: they could pose as their hyphenated twins); ``CONTENT_LENGTH`` is the body's length,
    also for a chunked request. The scope's ``mcp_resources.*`` keys (the cancellation token, the streams mark)
    carry over, so the view finds them in ``request.META``.
    """
    root_path = scope.get("root_path", "")
    path = scope["path"]
    path_info = path[len(root_path) :] if root_path and path.startswith(root_path) else path
    query = scope.get("query_string", b"")
    environ: dict[str, Any] = {
        "REQUEST_METHOD": scope["method"].upper(),
        "SCRIPT_NAME": root_path.encode("utf-8").decode("latin-1"),
        "PATH_INFO": path_info.encode("utf-8").decode("latin-1"),
        "QUERY_STRING": query.decode("latin-1") if isinstance(query, bytes) else query,
        "SERVER_PROTOCOL": "HTTP/" + scope.get("http_version", "1.1"),
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": scope.get("scheme", "http"),
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }
    server = scope.get("server")
    environ["SERVER_NAME"], environ["SERVER_PORT"] = (
        (str(server[0]), str(server[1] if server[1] is not None else 80)) if server else ("unknown", "0")
    )
    client = scope.get("client")
    if client:
        environ["REMOTE_ADDR"] = environ["REMOTE_HOST"] = str(client[0])
        environ["REMOTE_PORT"] = str(client[1])
    headers: dict[str, list[str]] = {}
    for raw_name, raw_value in scope.get("headers") or ():
        name = raw_name.decode("latin-1").lower()
        if "_" in name:
            continue
        key = {"content-length": "CONTENT_LENGTH", "content-type": "CONTENT_TYPE"}.get(name)
        headers.setdefault(key or "HTTP_" + name.upper().replace("-", "_"), []).append(raw_value.decode("latin-1"))
    environ.update((key, ",".join(values)) for key, values in headers.items())
    environ["CONTENT_LENGTH"] = str(len(body))
    environ.update((key, value) for key, value in scope.items() if key.startswith("mcp_resources."))
    return environ


@dataclass(frozen=True)
class Answer:
    """A whole HTTP response, ready for ASGI: its status, header pairs and body."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes

    @classmethod
    def of(cls, response: HttpResponseBase) -> Answer:
        body = response.content if isinstance(response, HttpResponse) else b""
        return cls(response.status_code, list(response.items()), body)


@dataclass(frozen=True)
class Streamed:
    """A stream's response from Django's handler: the response, its status and headers (the middleware's too)."""

    response: EventStreamResponse
    status: int
    headers: list[tuple[str, str]]


def _through_wsgi(handler: WSGIApp, environ: dict[str, Any]) -> Answer | Streamed:
    """Run ``environ`` through a WSGI application (Django's handler) and collect its whole response; a stream's
    response is returned as it is, to be served on the loop."""
    started: list[tuple[str, list[tuple[str, str]]]] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], None]:
        started[:] = [(status, headers)]
        return _no_write

    result = handler(environ, start_response)
    if isinstance(result, EventStreamResponse):
        result.close_request()
        status, headers = started[0]
        return Streamed(result, int(status.split(" ", 1)[0]), [(name, value.strip()) for name, value in headers])
    try:
        content = b"".join(result)
    finally:
        close = getattr(result, "close", None)
        if close is not None:
            close()  # Django sends request_finished here, in this thread, as under a WSGI server
    status, headers = started[0]
    # Django's handler writes each Set-Cookie value with a leading space (``Morsel.output(header="")``).
    return Answer(int(status.split(" ", 1)[0]), [(name, value.strip()) for name, value in headers], content)


def _no_write(data: bytes) -> None:
    raise RuntimeError("the WSGI write() callable is not supported: return the body")


def _as_request(handler: Callable[[HttpRequest], Any], request: HttpRequest) -> Any:
    """Run ``handler`` between Django's request signals, which close stale database connections as its handlers do."""
    signals.request_started.send(sender=MCPEndpoint, scope=getattr(request, "scope", None))
    try:
        return handler(request)
    finally:
        signals.request_finished.send(sender=MCPEndpoint)


def _replay(body: bytes, receive: Receive, token: cancellation.CancellationToken | None) -> Receive:
    """A ``receive`` for Django's handler: the body already read, then the client's messages; a disconnect cancels
    ``token`` before Django hears of it."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        message = await receive()
        if message["type"] == "http.disconnect" and token is not None:
            cancellation.cancel(token)
        return message

    return replayed


async def _watch_disconnect(
    receive: Receive, token: cancellation.CancellationToken | None, then: Callable[[], None] | None = None
) -> None:
    """Wait for ``http.disconnect`` (the body has been read: nothing else comes), then cancel ``token``."""
    while (await receive())["type"] != "http.disconnect":
        pass
    if token is not None:
        cancellation.cancel(token)
    if then is not None:
        then()
