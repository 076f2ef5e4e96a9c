"""An ASGI front for the MCP endpoint: one thread hop per request instead of Django's dozen.

Django's ASGI handler moves a request between the event loop and threads about twelve times (middleware,
signals, the view), which costs more than the whole page on a small machine. ``MCPApplication`` answers POST,
GET and DELETE on the MCP path itself: it reads the body on the event loop (bounded), runs the same
:class:`~mcp_resources.transport.MCPView` synchronously in one worker thread, and writes the response.
Every other path goes to the wrapped Django application, so the admin and the OAuth views are untouched.

The view runs in a pool of its own, ``MCP_RESOURCES["ASGI_THREADS"]`` threads (default 2), not in the event loop's
default executor: requests share one interpreter lock, so a few threads keep it busy while others wait on the
database, and more threads only add switching between them (measured in docs/benchmarks.md, item 5). The pool
also bounds the database connections MCP requests hold in one process.

Middleware does not run for the MCP path: the view does its own ``Host``/``Origin`` validation, needs no CSRF,
session or message middleware, and authenticates every request from its ``Authorization`` header.

While the view runs, ``MCPApplication`` listens for ``http.disconnect``: a client that disconnects cancels the
request (:mod:`mcp_resources.cancellation`), which stops a running ``resources/list`` and frees the worker thread,
and no response is sent to it.

``MCPApplication`` answers the ASGI lifespan protocol itself (Django's handler does not speak it): at shutdown it
ends the open streams, 2026-07-28 listeners with the final result. Servers end the streams only when they stop
waiting for open connections: run uvicorn with ``--timeout-graceful-shutdown``.

    # asgi.py
    from django.core.asgi import get_asgi_application
    from mcp_resources.asgi import MCPApplication

    application = MCPApplication(get_asgi_application(), path="/mcp")
"""

from __future__ import annotations

import asyncio
import io
import logging
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import sync_to_async
from django.core import signals
from django.core.handlers.asgi import ASGIRequest
from django.core.signals import setting_changed
from django.http import HttpRequest, HttpResponse, HttpResponseBase

from mcp_resources import cancellation
from mcp_resources.conf import mcp_settings
from mcp_resources.server import MCPServer

logger = logging.getLogger("mcp_resources.asgi")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[..., Awaitable[None]]


_request_pool: ThreadPoolExecutor | None = None
_request_pool_size = 0
_request_pool_lock = threading.Lock()


def request_executor() -> ThreadPoolExecutor:
    """The threads that run MCP requests under :class:`MCPApplication`: ``ASGI_THREADS`` per process."""
    global _request_pool, _request_pool_size
    with _request_pool_lock:
        if _request_pool is None:
            _request_pool_size = mcp_settings.asgi_threads
            _request_pool = ThreadPoolExecutor(_request_pool_size, thread_name_prefix="mcp-request")
        return _request_pool


def _in_request_thread(func: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    # asgiref's wrapper around the pool: an async_to_sync call made by the view still runs on this event loop.
    return sync_to_async(func, thread_sensitive=False, executor=request_executor())


def _settings_changed(*, setting: str, **kwargs: Any) -> None:
    global _request_pool
    if setting != "MCP_RESOURCES":
        return
    with _request_pool_lock:
        if _request_pool is None or _request_pool_size == mcp_settings.asgi_threads:
            return
        previous, _request_pool = _request_pool, None
    previous.shutdown(wait=False)  # requests it runs finish; the next ones get a pool of the new size


setting_changed.connect(_settings_changed, dispatch_uid="mcp_resources.asgi.settings_changed")


class MCPApplication:
    """Serve ``path`` with the MCP view in one thread hop; delegate everything else to ``fallback``."""

    def __init__(self, fallback: ASGIApp, path: str = "/mcp", server: MCPServer | None = None):
        from mcp_resources.transport import MCPView

        self.fallback = fallback
        self.path = path
        self.view = MCPView.as_view(server=server)
        self.streams = MCPView(server=server)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http" or scope["path"] != self.path:
            await self.fallback(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        if scope["method"] == "GET" and b"mcp-session-id" in headers:
            await self._stream(scope, receive, send, b"", self.streams.prepare_session_stream)
            return
        body = await self._read_body(receive, mcp_settings.max_request_bytes)
        if body is not None and scope["method"] == "POST" and headers.get(b"mcp-method") == b"subscriptions/listen":
            await self._stream(scope, receive, send, body, self.streams.prepare_listen)
            return
        if body is None:
            from mcp_resources.transport.views import too_large_response

            response: HttpResponseBase = too_large_response()
        else:
            request = ASGIRequest(scope, io.BytesIO(body))
            token = cancellation.attach(request)
            response = await self._respond(request, receive, token)
            if token.cancelled:
                logger.debug("the client disconnected before the response: nothing sent")
                return
        try:
            await self._send(response, send)
        except OSError:
            # A server refuses sends after the client has gone with an OSError (the ASGI spec): nobody to tell.
            logger.debug("the client disconnected while the response was sent")

    async def _respond(
        self, request: HttpRequest, receive: Receive, token: cancellation.CancellationToken
    ) -> HttpResponseBase:
        """Run the view in one worker thread while listening for the client's disconnect, which cancels ``token``."""
        view = asyncio.ensure_future(_in_request_thread(self._handle)(request))
        watcher = asyncio.ensure_future(self._watch_disconnect(receive, token))
        try:
            return await view
        except asyncio.CancelledError:
            # The server abandoned the request (a forced shutdown): free the worker thread as a disconnect would.
            token.cancel(run_hooks=False)
            asyncio.get_running_loop().run_in_executor(cancellation.hook_executor(), token.run_hooks)
            raise
        finally:
            watcher.cancel()
            await asyncio.wait({watcher})  # the watcher ends here, whether it was waiting or cancelling
            if not watcher.cancelled() and watcher.exception() is not None:
                logger.warning("listening for a disconnect failed: %r", watcher.exception())

    @staticmethod
    async def _watch_disconnect(receive: Receive, token: cancellation.CancellationToken) -> None:
        """Wait for ``http.disconnect`` (the body has been read: nothing else comes), then cancel ``token``."""
        while (await receive())["type"] != "http.disconnect":
            pass
        token.cancel(run_hooks=False)  # at once: the view sees it at its next check
        loop = asyncio.get_running_loop()
        executor = cancellation.hook_executor()  # a hook blocks on a round trip to the database: not on the loop
        delay = 0.05
        while token.has_hooks:
            # Repeated while the block that registered the hook still runs: PostgreSQL ignores a cancel request that
            # arrives before it has read the query, so a query sent just as the first one arrived would run on.
            await loop.run_in_executor(executor, token.run_hooks)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)

    @staticmethod
    async def _lifespan(receive: Receive, send: Send) -> None:
        from mcp_resources.subscriptions.streams import end_all_streams

        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await end_all_streams()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _stream(
        self, scope: Scope, receive: Receive, send: Send, body: bytes, prepare: Callable[[HttpRequest], Any]
    ) -> None:
        from mcp_resources.subscriptions.streams import Stream, StreamPlan

        request = ASGIRequest(scope, io.BytesIO(body))
        outcome = await _in_request_thread(self._prepared)(prepare, request)
        if isinstance(outcome, StreamPlan):
            await Stream(outcome, receive, send).serve()
        else:
            await self._send(outcome, send)

    def _prepared(self, prepare: Callable[[HttpRequest], Any], request: HttpRequest) -> Any:
        signals.request_started.send(sender=type(self), scope=getattr(request, "scope", None))
        try:
            return prepare(request)
        finally:
            signals.request_finished.send(sender=type(self))

    @staticmethod
    async def _read_body(receive: Receive, limit: int) -> bytes | None:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return b""
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    def _handle(self, request: HttpRequest) -> HttpResponseBase:
        if cancellation.is_cancelled(request):
            # The client left while the request waited for a free thread: no work, and nothing will be sent.
            return HttpResponse(status=204)
        # The request signals close stale database connections, as Django's own handlers do.
        signals.request_started.send(sender=type(self), scope=getattr(request, "scope", None))
        try:
            return self.view(request)
        finally:
            signals.request_finished.send(sender=type(self))

    @staticmethod
    async def _send(response: HttpResponseBase, send: Send) -> None:
        headers = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in response.items()]
        body = response.content if isinstance(response, HttpResponse) else b""
        if not any(name == b"content-length" for name, _ in headers) and response.status_code not in (204, 304):
            headers.append((b"content-length", str(len(body)).encode("ascii")))
        await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
        await send({"type": "http.response.body", "body": body})
