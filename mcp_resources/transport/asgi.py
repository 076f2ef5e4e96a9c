"""The MCP path under ASGI: streams on the event loop, every other request through Django's own handler.

Route the endpoint's path to :class:`MCPEndpoint` with Channels' routers, in front of Django's ASGI application::

    # asgi.py
    django_asgi_app = get_asgi_application()

    from channels.routing import ProtocolTypeRouter, URLRouter
    from django.urls import path, re_path
    from mcp_resources.transport.asgi import MCPEndpoint

    mcp_endpoint = MCPEndpoint.as_asgi(django_asgi_app)
    application = ProtocolTypeRouter({
        "http": URLRouter([path("mcp", mcp_endpoint), re_path(r"", django_asgi_app)]),
        "lifespan": mcp_endpoint,
    })

- ``subscriptions/listen`` (a POST with ``Mcp-Method: subscriptions/listen``) and a 2025-11-25 session's GET stream
  are served here, on the event loop, with no thread per stream: the request is checked by
  :class:`~mcp_resources.transport.views.MCPView` in one thread hop, then the stream waits on the channel layer
  (:mod:`mcp_resources.transport.streams`).
- Every other request (POST, DELETE) goes to Django's ASGI handler, so the project's middleware sees it, as any
  request. The endpoint only bounds the body first (``MAX_REQUEST_BYTES``: a larger one is answered 413 before
  Django spools it) and watches for the client's disconnect, which cancels the request's work
  (:mod:`mcp_resources.cancellation`): a running ``resources/list`` query stops at once.
- ``MCPEndpoint.as_asgi(django_asgi_app, middleware=False)`` opts out of the middleware: the view then runs in one
  thread hop without Django's handler, which is faster under ASGI (docs/performance.md) but skips every
  middleware of the project (Sentry, OpenTelemetry, security, CORS). The view still validates ``Host`` and
  ``Origin`` and authenticates every request itself.
- As the ``lifespan`` application it ends the open streams at shutdown (2026-07-28 listeners with the final
  result).
"""

from __future__ import annotations

import asyncio
import io
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from asgiref.sync import sync_to_async
from django.core import signals
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponse, HttpResponseBase

from mcp_resources import cancellation
from mcp_resources.conf import mcp_settings
from mcp_resources.server import MCPServer
from mcp_resources.transport.streams import Stream, StreamPlan, end_all_streams
from mcp_resources.transport.views import STREAMS_SCOPE_KEY, MCPView, too_large_response

logger = logging.getLogger("mcp_resources.transport")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[..., Awaitable[None]]


class _ClientGone(Exception):
    """The client disconnected before the end of its request body."""


class MCPEndpoint:
    """The ASGI application for the MCP path: streams here, other requests on to ``django_app``.

    ``django_app`` is the project's Django ASGI application (default: a new ``get_asgi_application()``);
    ``server`` serves another registry; ``middleware=False`` serves requests without Django's handler.
    """

    def __init__(
        self, django_app: ASGIApp | None = None, *, server: MCPServer | None = None, middleware: bool = True
    ) -> None:
        if django_app is None:
            from django.core.asgi import get_asgi_application

            django_app = get_asgi_application()
        self.django_app: ASGIApp = django_app
        self.middleware = middleware
        self.view = MCPView.as_view(server=server)
        self.streams = MCPView(server=server)

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
        headers = dict(scope.get("headers") or [])
        if scope["method"] == "GET" and b"mcp-session-id" in headers:
            await self._stream(scope, receive, send, b"", self.streams.prepare_session_stream)
            return
        try:
            body = await self._read_body(receive, mcp_settings.max_request_bytes)
        except _ClientGone:
            logger.debug("the client disconnected during its request body: nothing to do")
            return
        if body is None:
            await self._send(too_large_response(), send)
            return
        if scope["method"] == "POST" and headers.get(b"mcp-method") == b"subscriptions/listen":
            await self._stream(scope, receive, send, body, self.streams.prepare_listen)
            return
        token = cancellation.CancellationToken()
        scope = {**scope, cancellation.SCOPE_KEY: token, STREAMS_SCOPE_KEY: True}
        if self.middleware:
            await self.django_app(scope, _replay(body, receive, token), send)
            return
        await self._serve_directly(scope, body, receive, send, token)

    # Streams ---------------------------------------------------------------------------------------------

    async def _stream(
        self, scope: Scope, receive: Receive, send: Send, body: bytes, prepare: Callable[[HttpRequest], Any]
    ) -> None:
        request = ASGIRequest({**scope, STREAMS_SCOPE_KEY: True}, io.BytesIO(body))
        outcome = await sync_to_async(_as_request, thread_sensitive=False)(prepare, request)
        if isinstance(outcome, StreamPlan):
            await Stream(outcome, receive, send).serve()
        else:
            await self._send(outcome, send)

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

    # Requests without Django's handler (middleware=False) ---------------------------------------------------

    async def _serve_directly(
        self, scope: Scope, body: bytes, receive: Receive, send: Send, token: cancellation.CancellationToken
    ) -> None:
        request = ASGIRequest(scope, io.BytesIO(body))
        view = asyncio.ensure_future(sync_to_async(self._handle, thread_sensitive=False)(request, token))
        watcher = asyncio.ensure_future(_watch_disconnect(receive, token))
        try:
            response = await view
        except asyncio.CancelledError:
            # The server abandoned the request (a forced shutdown): free the worker thread as a disconnect would.
            cancellation.cancel(token)
            raise
        finally:
            watcher.cancel()
            await asyncio.wait({watcher})
        if token.cancelled:
            logger.debug("the client disconnected before the response: nothing sent")
            return
        try:
            await self._send(response, send)
        except OSError:
            # A server refuses sends after the client has gone with an OSError (the ASGI spec): nobody to tell.
            logger.debug("the client disconnected while the response was sent")

    def _handle(self, request: HttpRequest, token: cancellation.CancellationToken) -> HttpResponseBase:
        if token.cancelled:
            # The client left while the request waited for a free thread: no work, and nothing will be sent.
            return HttpResponse(status=204)
        return _as_request(self.view, request)

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
    async def _send(response: HttpResponseBase, send: Send) -> None:
        headers = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in response.items()]
        body = response.content if isinstance(response, HttpResponse) else b""
        if not any(name == b"content-length" for name, _ in headers) and response.status_code not in (204, 304):
            headers.append((b"content-length", str(len(body)).encode("ascii")))
        await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _as_request(handler: Callable[[HttpRequest], Any], request: HttpRequest) -> Any:
    """Run ``handler`` between Django's request signals, which close stale database connections as its handlers do."""
    signals.request_started.send(sender=MCPEndpoint, scope=getattr(request, "scope", None))
    try:
        return handler(request)
    finally:
        signals.request_finished.send(sender=MCPEndpoint)


def _replay(body: bytes, receive: Receive, token: cancellation.CancellationToken) -> Receive:
    """A ``receive`` for Django's handler: the body already read, then the client's messages; a disconnect cancels
    ``token`` before Django hears of it."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        message = await receive()
        if message["type"] == "http.disconnect":
            cancellation.cancel(token)
        return message

    return replayed


async def _watch_disconnect(receive: Receive, token: cancellation.CancellationToken) -> None:
    """Wait for ``http.disconnect`` (the body has been read: nothing else comes), then cancel ``token``."""
    while (await receive())["type"] != "http.disconnect":
        pass
    cancellation.cancel(token)
