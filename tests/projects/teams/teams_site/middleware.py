"""A middleware that records every request it sees, as Sentry or OpenTelemetry would: one JSON line per request
(method, path, the ``Mcp-Method`` header, the response status, and whether it ran sync or async) appended to the
file named by ``TEAMS_REQUEST_LOG`` (nothing is written without it)."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponseBase

_lock = threading.Lock()


def _record(request: HttpRequest, response: HttpResponseBase, mode: str) -> None:
    path = os.environ.get("TEAMS_REQUEST_LOG")
    if not path:
        return
    line = json.dumps(
        {
            "method": request.method,
            "path": request.path,
            "mcp_method": request.headers.get("Mcp-Method"),
            "session": bool(request.headers.get("Mcp-Session-Id")),
            "status": response.status_code,
            "mode": mode,
        }
    )
    with _lock, open(path, "a", encoding="utf-8") as log:
        log.write(line + "\n")


class RequestRecorder:
    """Records every request, under WSGI (sync) and ASGI (async, without a thread hop of its own)."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self._acall(request)
        response = self.get_response(request)
        _record(request, response, "sync")
        return response

    async def _acall(self, request: HttpRequest) -> HttpResponseBase:
        response_coroutine: Awaitable[HttpResponseBase] = self.get_response(request)
        response = await response_coroutine
        _record(request, response, "async")
        return response
