"""Streams under gunicorn's gevent worker: the same :class:`~mcp_resources.transport.streams.Stream`, served by WSGI.

In a process that gevent has monkey-patched, one asyncio event loop runs in a greenlet of its own (a patched
``threading.Thread``). Its selector and its self-pipe are gevent's, so it waits cooperatively like any greenlet. The
hub, the log's reader and every :class:`Stream` live on it as they do under uvicorn, so ordering, resume, access
re-checks, keep-alives and final answers come from the same code. :class:`GreenletStreamResponse` hands the WSGI
server a sync iterator: a task on that loop iterates :meth:`Stream.events` and hands each chunk over, and the
request's greenlet waits for it on gevent's ``Event``, which parks only that greenlet.

Every greenlet of the process shares one OS thread, and asyncio keeps the running loop per OS thread. So that no
other greenlet (a request's, a worker thread's) sees the loop as running (Django would refuse its ORM calls there,
asgiref its ``async_to_sync``), a greenlet trace function (``greenlet.settrace``) unsets the running loop when the
loop's greenlet switches out and sets it again when it switches back in.

A client that goes away is noticed on the next write (an event or a keep-alive, every ``STREAM_KEEPALIVE_SECONDS``):
the worker closes the response, which ends the stream and releases it. When the process is told to stop (``SIGTERM``,
as gunicorn's arbiter stops a worker gracefully), every stream ends with its final answer, so the worker's graceful
shutdown does not wait ``--graceful-timeout`` for them: the handler the server installed runs after ours.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
import threading
import time
import weakref
from collections.abc import AsyncGenerator, Callable, Iterator
from typing import Any, cast

from django.db import close_old_connections

from mcp_resources.conf import mcp_settings
from mcp_resources.transport.fanout import counts
from mcp_resources.transport.streams import EventStreamResponse, Stream, end_all_streams

logger = logging.getLogger("mcp_resources.transport")


def gevent_patched() -> bool:
    """Whether gevent has monkey-patched this process's threads (as a gunicorn gevent worker does before it loads
    the project). gevent is never imported here: a process that has not imported it is not patched."""
    monkey = sys.modules.get("gevent.monkey")
    return monkey is not None and bool(monkey.is_module_patched("threading"))


class _LoopHost:
    """The process's event loop for streams, in a greenlet of its own (started on first use, again after a fork)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.pid = 0

    def get(self) -> asyncio.AbstractEventLoop:
        with self.lock:
            if self.loop is None or self.pid != os.getpid() or self.loop.is_closed():
                self.pid = os.getpid()
                self.loop = asyncio.new_event_loop()
                started = threading.Event()
                thread = threading.Thread(
                    target=self._run, args=(self.loop, started), name="mcp-resources-streams", daemon=True
                )
                thread.start()
                started.wait()
                _end_streams_on_sigterm(self.loop)
            return self.loop

    @staticmethod
    def _run(loop: asyncio.AbstractEventLoop, started: threading.Event) -> None:
        import greenlet

        own = greenlet.getcurrent()
        previous = greenlet.gettrace()

        def trace(event: str, args: Any) -> Any:
            if event in ("switch", "throw"):
                origin, target = args
                if target is own:
                    if loop.is_running():
                        asyncio._set_running_loop(loop)
                elif origin is own:
                    asyncio._set_running_loop(None)
            if previous is not None:
                return previous(event, args)
            return None

        greenlet.settrace(trace)
        asyncio.set_event_loop(loop)
        loop.call_soon(started.set)
        try:
            loop.run_forever()
        finally:
            greenlet.settrace(previous)


_host = _LoopHost()


def _end_streams_on_sigterm(loop: asyncio.AbstractEventLoop) -> None:
    """Before the process's own ``SIGTERM`` handler (gunicorn's graceful stop), end the streams of ``loop``; a
    process without a Python handler for it (one that dies at once) is left as it is."""
    previous = signal.getsignal(signal.SIGTERM)
    if not callable(previous):
        return

    def stop(signum: int, frame: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop has closed
            loop.call_soon_threadsafe(lambda: loop.create_task(end_all_streams()))
        previous(signum, frame)

    signal.signal(signal.SIGTERM, stop)


def stream_loop() -> asyncio.AbstractEventLoop:
    """The event loop that serves this process's streams under gevent (started on first use)."""
    return _host.get()


PENDING_CHUNKS = 2
"""Chunks a stream's pump puts ahead of its writer at most; past them it waits (and the stream's own queue fills)."""

_watched: weakref.WeakSet[_Events] = weakref.WeakSet()
_watching: list[asyncio.Task[None]] = []


async def _watch_writes() -> None:
    """On the streams' loop: end each stream whose write has waited past ``STREAM_SEND_TIMEOUT_SECONDS`` (one
    watcher a process, looking every quarter of the timeout, at most every second)."""
    while True:
        timeout = mcp_settings.stream_send_timeout_seconds
        await asyncio.sleep(min(1.0, timeout / 4))
        now = time.monotonic()
        for events in list(_watched):
            since = events.writing_since
            if since is not None and now - since > timeout:
                events.writing_since = None
                events.stuck()


class _Events:
    """The chunks of a stream, as a sync iterator for the WSGI server.

    A pump task on the streams' loop iterates :meth:`Stream.events` and puts each chunk in a short queue; the
    request's greenlet takes them from it, waiting on gevent's ``Event`` that the pump sets: no hop to
    the loop for each chunk. ``sock`` is the client's socket (gunicorn's ``environ["gunicorn.socket"]``): a write
    that waits ``STREAM_SEND_TIMEOUT_SECONDS`` (a client that stopped reading) shuts it down, and the stream ends."""

    def __init__(
        self, stream: Stream, sock: socket.socket | None = None, on_start: Callable[[], None] | None = None
    ) -> None:
        self.stream = stream
        self.sock = sock
        self.on_start = on_start  # once the response has left Django's handler, before the first chunk
        self.loop = stream_loop()
        self.events = cast(AsyncGenerator[bytes, None], stream.events())  # an async generator
        self.chunks: list[bytes | None] = []  # at most PENDING_CHUNKS, and the end
        self.ready = _event()
        self.room: asyncio.Future[None] | None = None  # the pump waits for the writer to take a chunk
        self.pumping = False
        self.finished = False
        self.writing_since: float | None = None

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        if self.finished:
            raise StopIteration
        if not self.pumping:
            # The response is out of the view and its middleware: the request's database connections go back
            # (to Django's pool) now, not when the stream ends, as request_finished would.
            self.pumping = True
            close_old_connections()
            on_start, self.on_start = self.on_start, None
            if on_start is not None:
                on_start()
            asyncio.run_coroutine_threadsafe(self._pump(), self.loop)
        self.writing_since = None
        while not self.chunks:
            self.ready.clear()
            self.ready.wait()
        chunk = self.chunks.pop(0)
        room = self.room
        if room is not None:
            self.room = None
            self.loop.call_soon_threadsafe(_make_room, room)
        if chunk is None:
            self.finished = True
            raise StopIteration
        if self.sock is not None:
            self.writing_since = time.monotonic()
        return chunk

    def _put(self, chunk: bytes | None) -> None:
        self.chunks.append(chunk)
        self.ready.set()

    async def _pump(self) -> None:
        """On the streams' loop: open the stream (then the status and headers go out), and hand over its chunks."""
        try:
            with contextlib.suppress(Exception):  # Stream.events() opens it again: a failure ends it with its answer
                await self.stream.open()
            if self.sock is not None:
                _watched.add(self)
                if not _watching or _watching[0].get_loop() is not self.loop:  # one watcher, on this loop
                    _watching[:] = [self.loop.create_task(_watch_writes())]
            self._put(b"")
            async for chunk in self.events:
                self._put(chunk)
                if len(self.chunks) >= PENDING_CHUNKS and not self.finished:
                    self.room = self.loop.create_future()
                    await self.room
        finally:
            _watched.discard(self)
            self._put(None)

    def stuck(self) -> None:
        """On the streams' loop: a write waited past ``STREAM_SEND_TIMEOUT_SECONDS``; end the stream (as
        :class:`MCPEndpoint` does)."""
        counts["ended_send_timeout"] += 1
        logger.warning("stream %s ended: a write waited past STREAM_SEND_TIMEOUT_SECONDS", self.stream.id)
        self.stream.disconnected()
        assert self.sock is not None
        # Shut the connection down through a duplicate of its descriptor: the waiting write then fails as on any
        # closed connection (EPIPE, which the server ignores), where gevent would fail it as a descriptor closed
        # under it, which gunicorn logs as an error.
        with contextlib.suppress(OSError):
            duplicate = socket.fromfd(self.sock.fileno(), self.sock.family, self.sock.type)
            try:
                duplicate.shutdown(socket.SHUT_RDWR)
            finally:
                duplicate.close()

    def close(self) -> None:
        """The response is closed (the stream ended, or the client went away): end the stream on its loop."""
        if self.finished and not self.pumping:
            return
        self.finished = True
        self.writing_since = None
        if self.pumping:
            self.pumping = False
            with contextlib.suppress(RuntimeError):  # the loop has closed (the process is exiting)
                self.loop.call_soon_threadsafe(self._close)

    def _close(self) -> None:
        self.stream.disconnected()
        room, self.room = self.room, None
        if room is not None:
            _make_room(room)


def _event() -> Any:
    """gevent's own ``Event``: compiled, about 1 KB less a stream than the patched ``threading.Event`` (a
    ``Condition`` with its lock and ``deque``), and fewer frames on the greenlet's stack while it waits. Only made
    in a process that gevent has patched."""
    from gevent.event import Event

    return Event()


def _make_room(room: asyncio.Future[None]) -> None:
    if not room.done():
        room.set_result(None)


class GreenletStreamResponse(EventStreamResponse):
    """An :class:`EventStreamResponse` that a WSGI server iterates: under gunicorn's gevent worker."""

    def __init__(self, stream: Stream, headers: dict[str, str] | None = None, sock: Any = None) -> None:
        super().__init__(stream, headers)
        # The request is closed (and let go) once the response has left the handler, as under MCPEndpoint.
        sock = sock if isinstance(sock, socket.socket) else None
        self.events = _Events(stream, sock, self.close_request)  # type: ignore[assignment]
        self.streaming_content = self.events
