"""The WSGI front: the MCP path straight to the view (no middleware), everything else through Django's handler.

Served by a real WSGI server (``wsgiref``) on loopback in a thread, requests over HTTP.
"""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pytest
from django.core import signals
from django.core.wsgi import get_wsgi_application

from mcp_resources.wsgi import MCPWSGIApplication
from tests.test_asgi import DISCOVER

MODERN_HEADERS = {
    "Content-Type": "application/json",
    "MCP-Protocol-Version": "2026-07-28",
    "Mcp-Method": "server/discover",
}


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def server(transactional_db: None) -> Iterator[WSGIServer]:
    httpd = make_server("127.0.0.1", 0, MCPWSGIApplication(get_wsgi_application()), handler_class=QuietHandler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()


def request(
    server: WSGIServer, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> Any:
    connection = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
    try:
        connection.request(method, path, body=body, headers={"Host": "127.0.0.1", **(headers or {})})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def test_mcp_path_is_served_by_the_view_without_middleware(server: WSGIServer) -> None:
    status, headers, body = request(server, "POST", "/mcp", json.dumps(DISCOVER).encode(), MODERN_HEADERS)
    assert status == 200
    assert headers["content-type"] == "application/json"
    result = json.loads(body)
    assert result["id"] == 7
    assert result["result"]["resultType"] == "complete"
    # The demo's middleware (security, clickjacking) would have added these.
    assert "x-frame-options" not in headers
    assert "x-content-type-options" not in headers


def test_other_paths_go_through_django_and_its_middleware(server: WSGIServer) -> None:
    status, headers, body = request(server, "GET", "/admin/login/")
    assert status == 200
    assert b"<form" in body
    assert headers["x-frame-options"] == "DENY"


def test_request_signals_are_sent_around_the_view(server: WSGIServer) -> None:
    seen: list[str] = []

    def started(**kwargs: Any) -> None:
        seen.append("started")

    def finished(**kwargs: Any) -> None:
        seen.append("finished")

    signals.request_started.connect(started)
    signals.request_finished.connect(finished)
    try:
        status, _, _ = request(server, "POST", "/mcp", json.dumps(DISCOVER).encode(), MODERN_HEADERS)
    finally:
        signals.request_started.disconnect(started)
        signals.request_finished.disconnect(finished)
    assert status == 200
    assert seen == ["started", "finished"]


def test_the_views_own_checks_still_apply(server: WSGIServer) -> None:
    body = json.dumps(DISCOVER).encode()
    status, _, _ = request(server, "POST", "/mcp", body, {**MODERN_HEADERS, "Origin": "https://evil.example"})
    assert status == 403
    status, _, _ = request(server, "POST", "/mcp", b"not json", MODERN_HEADERS)
    assert status == 400
    status, headers, _ = request(server, "GET", "/mcp")
    assert status == 405
    assert headers["allow"] == "POST, DELETE"


def test_the_demo_wsgi_application_uses_the_front() -> None:
    from testproject.wsgi import application

    assert isinstance(application, MCPWSGIApplication)
    assert application.path == "/mcp"
