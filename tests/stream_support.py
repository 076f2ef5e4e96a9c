"""Helpers for the ASGI tests: drive the project's ASGI application in-process and read its SSE.

:func:`application` is ``testproject.asgi.application``, the deployment the project documents: Channels'
``ProtocolTypeRouter`` and ``URLRouter`` with :class:`~mcp_resources.transport.asgi.MCPEndpoint` at ``/mcp`` (streams
on the event loop, every other request through Django's ASGI handler and its middleware) and Django for every other
path. A test that needs another server or registry drives an ``MCPEndpoint`` of its own the same way.

An :class:`Exchange` is one HTTP request to an ASGI application through asgiref's ``ApplicationCommunicator``. Its
output is read from the communicator's queue directly, so waiting for "nothing more arrives" never cancels the
application (``receive_output`` would on a timeout). Server-sent events are parsed strictly: every event is an
optional ``id:`` line, ``event: message`` and one ``data:`` line, and comments (keep-alives) are kept apart. A
notification's event id (the SSE ``id`` and, on a listen stream, the same id in its ``_meta``) is checked, kept in
``Exchange.event_ids`` and removed from the message, so tests compare messages without it.

:class:`Clock` moves the clock of the stream code forward, so that token expiry is tested without waiting for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest
from asgiref.testing import ApplicationCommunicator

from mcp_resources.protocol.versions import V2026_07_28

RESOURCE = "http://127.0.0.1:8000/mcp"
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
PROTOCOL_VERSION_META = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_META = "io.modelcontextprotocol/clientCapabilities"
UPDATED = "notifications/resources/updated"
LIST_CHANGED = "notifications/resources/list_changed"
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
EVENT_ID = "io.github.django-mcp-resources/eventId"
TRUNCATED = "io.github.django-mcp-resources/truncated"

T = TypeVar("T")


def application() -> Any:
    """``testproject.asgi.application``: the project's ASGI application, as uvicorn serves it."""
    from testproject.asgi import application as project_application

    return project_application


def scope(method: str = "POST", headers: dict[str, str] | None = None, path: str = "/mcp") -> dict[str, Any]:
    """An HTTP scope for ``path``; ``Host`` is ``127.0.0.1:8000`` unless ``headers`` has one."""
    raw = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in (headers or {}).items()]
    if not any(name == b"host" for name, _ in raw):
        raw.insert(0, (b"host", b"127.0.0.1:8000"))
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": raw,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }


def meta(version: str = V2026_07_28) -> dict[str, Any]:
    return {PROTOCOL_VERSION_META: version, CLIENT_CAPABILITIES_META: {}}


OMIT: Any = object()


def listen_body(request_id: Any = 1, notifications: Any = OMIT, *, version: str = V2026_07_28) -> bytes:
    """A ``subscriptions/listen`` request body; ``notifications=OMIT`` leaves the filter out."""
    params: dict[str, Any] = {"_meta": meta(version)}
    if notifications is not OMIT:
        params["notifications"] = notifications
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "subscriptions/listen", "params": params}).encode()


def listen_headers(token: str | None = None, *, version: str = V2026_07_28, **extra: str | None) -> dict[str, str]:
    headers: dict[str, str | None] = {
        "content-type": "application/json",
        "accept": "text/event-stream",
        "mcp-protocol-version": version,
        "mcp-method": "subscriptions/listen",
    }
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    headers.update({name.replace("_", "-"): value for name, value in extra.items()})
    return {name: value for name, value in headers.items() if value is not None}


@dataclass
class Exchange:
    """One request to an ASGI application; its response is read as it is sent (header names in lower case)."""

    app: Any
    scope: dict[str, Any]
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    raw_headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    closed: bool = False
    buffer: bytes = b""
    comments: list[str] = field(default_factory=list)
    event_ids: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.communicator = ApplicationCommunicator(self.app, self.scope)

    async def send_body(self, body: bytes = b"", *, chunks: list[bytes] | None = None) -> None:
        """Send the request body, whole or in ``chunks`` (``more_body`` on all but the last)."""
        parts = chunks if chunks is not None else [body]
        for index, part in enumerate(parts):
            more = index < len(parts) - 1
            await self.communicator.send_input({"type": "http.request", "body": part, "more_body": more})

    async def start(self, body: bytes = b"", timeout: float = 10, *, chunks: list[bytes] | None = None) -> Exchange:
        """Send the body and wait for the response's start."""
        await self.send_body(body, chunks=chunks)
        message = await self._next(timeout)
        assert message["type"] == "http.response.start", message
        self.status = message["status"]
        self.raw_headers = list(message["headers"])
        self.headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in message["headers"]}
        return self

    async def _next(self, timeout: float) -> dict[str, Any]:
        future = self.communicator.future  # starts the application
        queue = self.communicator.output_queue
        getter = asyncio.ensure_future(queue.get())
        done, _ = await asyncio.wait({getter, future}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if getter in done:
            return getter.result()
        getter.cancel()
        if future in done:
            # The application ended: surface its exception (none expected), then anything it still queued.
            if not future.cancelled():
                future.result()
            if not queue.empty():
                return queue.get_nowait()
            raise AssertionError("the application ended without sending anything more")
        raise TimeoutError(f"nothing from the application within {timeout}s")

    async def body(self, timeout: float = 10) -> bytes:
        """The whole body of a response that is not a stream."""
        chunks = []
        while True:
            message = await self._next(timeout)
            assert message["type"] == "http.response.body", message
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                self.closed = True
                return b"".join(chunks)

    async def json(self, timeout: float = 10) -> Any:
        return json.loads(await self.body(timeout))

    async def _fill(self, timeout: float) -> None:
        if self.closed:
            raise EOFError("the stream is closed")
        message = await self._next(timeout)
        assert message["type"] == "http.response.body", message
        self.buffer += message.get("body", b"")
        if not message.get("more_body", False):
            self.closed = True

    async def frame(self, timeout: float = 10) -> tuple[str, Any]:
        """The next SSE frame: ``("event", payload)`` or ``("comment", text)``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while b"\r\n\r\n" not in self.buffer:
            if self.closed:
                raise EOFError(f"the stream closed (left over: {self.buffer!r})")
            await self._fill(max(0.0, deadline - loop.time()))
        raw, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        lines = raw.decode("utf-8").split("\r\n")
        if all(line.startswith(":") for line in lines):
            return "comment", "\n".join(line[1:].strip() for line in lines)
        event_id = None
        if lines[0].startswith("id: "):
            event_id = lines.pop(0)[len("id: ") :]
        assert lines[0] == "event: message", lines
        assert len(lines) == 2, lines
        assert lines[1].startswith("data: "), lines
        message = json.loads(lines[1][len("data: ") :])
        meta = (message.get("params") or {}).get("_meta") or {}
        if EVENT_ID in meta:
            assert meta.pop(EVENT_ID) == event_id, (message, event_id)
        if "method" in message:
            assert event_id is not None, message  # every notification carries its id
            self.event_ids.append(event_id)
        return "event", message

    async def event(self, timeout: float = 10) -> dict[str, Any]:
        """The next JSON-RPC message on the stream (keep-alive comments are skipped and remembered)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            kind, value = await self.frame(max(0.0, deadline - loop.time()))
            if kind == "event":
                return value
            self.comments.append(value)

    async def silent(self, seconds: float = 0.3) -> None:
        """Assert that no message arrives within ``seconds`` (keep-alive comments allowed)."""
        with contextlib.suppress(TimeoutError):
            message = await self.event(seconds)
            raise AssertionError(f"unexpected message: {message}")

    async def until_closed(self, timeout: float = 10) -> list[dict[str, Any]]:
        """Every message until the server ends the stream."""
        messages = []
        while True:
            try:
                messages.append(await self.event(timeout))
            except EOFError:
                return messages

    async def disconnect(self, timeout: float = 10) -> None:
        await self.communicator.send_input({"type": "http.disconnect"})
        await self.finished(timeout)

    async def finished(self, timeout: float = 10) -> None:
        """Wait until the application returned (it must not raise)."""
        future = self.communicator.future
        await asyncio.wait({future}, timeout=timeout)
        assert future.done(), "the application is still running"
        if not future.cancelled():
            future.result()

    def cancel(self) -> None:
        self.communicator.stop(exceptions=False)


def updated(uri: str, subscription_id: Any = ...) -> dict[str, Any]:
    params: dict[str, Any] = {"uri": uri}
    if subscription_id is not ...:
        params["_meta"] = {SUBSCRIPTION_ID: subscription_id}
    return {"jsonrpc": "2.0", "method": UPDATED, "params": params}


def list_changed(subscription_id: Any = ...) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": LIST_CHANGED}
    if subscription_id is not ...:
        message["params"] = {"_meta": {SUBSCRIPTION_ID: subscription_id}}
    return message


def final_result(subscription_id: Any) -> dict[str, Any]:
    """The result that ends a ``subscriptions/listen`` stream gracefully."""
    return {
        "jsonrpc": "2.0",
        "id": subscription_id,
        "result": {"resultType": "complete", "_meta": {SUBSCRIPTION_ID: subscription_id}},
    }


async def in_thread(function: Callable[..., T], *args: Any) -> T:
    """Run ``function`` in a worker thread (Django ORM code) and close that thread's connections afterwards."""
    from django.db import connections

    def run() -> T:
        try:
            return function(*args)
        finally:
            for connection in connections.all(initialized_only=True):
                if not connection.in_atomic_block:
                    connection.close()

    return await asyncio.to_thread(run)


async def until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Wait (without blocking the loop) until ``condition()`` holds; fail after ``timeout`` seconds."""
    limit = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < limit, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


class Clock:
    """The ``time`` module as seen by the stream code, ``offset`` seconds ahead.

    Installed with :meth:`install` (through pytest's ``monkeypatch``) in ``mcp_resources.transport.streams`` (token
    expiry and keep-alive timers). :meth:`advance` moves it forward at once; everything else (``asyncio`` timers
    included) keeps the real clock.
    """

    def __init__(self) -> None:
        self.offset = 0.0

    def time(self) -> float:
        return time.time() + self.offset

    def monotonic(self) -> float:
        return time.monotonic() + self.offset

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    def advance(self, seconds: float) -> None:
        self.offset += seconds

    def install(self, monkeypatch: pytest.MonkeyPatch) -> Clock:
        from mcp_resources.transport import streams

        monkeypatch.setattr(streams, "time", self)
        return self


def revoke_token(raw: str) -> None:
    """Delete the access token row of ``raw`` (as revocation does)."""
    from oauth2_provider.models import get_access_token_model

    deleted, _ = (
        get_access_token_model().objects.filter(token_checksum=hashlib.sha256(raw.encode()).hexdigest()).delete()
    )
    assert deleted == 1
