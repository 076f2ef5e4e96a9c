"""The ASGI deployment: Channels' routers with ``MCPEndpoint`` at ``/mcp`` and Django everywhere else.

``testproject.asgi.application`` is driven in-process. A POST to ``/mcp`` goes through Django's request handler and
the project's middleware (a recording middleware added to ``MIDDLEWARE`` must see it): by default Django's WSGI
handler in one worker thread, or, with ``MCPEndpoint.as_asgi(django_asgi_app)``, Django's ASGI handler.
``MCPEndpoint.as_asgi(middleware=False)`` skips both and still validates ``Host``, ``Origin`` and the token itself.
A body over ``MAX_REQUEST_BYTES`` is refused with 413 before Django reads it. The stream side is tested in
test_streams.py.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from asgiref.testing import ApplicationCommunicator
from django.core import signals
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse, HttpResponseBase

from mcp_resources.cancellation import token_for
from mcp_resources.transport import MCPEndpoint
from tests.conftest import RESOURCE
from tests.stream_support import (
    ACKNOWLEDGED,
    Exchange,
    application,
    in_thread,
    listen_body,
    listen_headers,
    meta,
    scope,
)

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]

DISCOVER = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "server/discover", "params": {"_meta": meta()}}).encode()
DISCOVER_HEADERS = {
    "content-type": "application/json",
    "mcp-protocol-version": "2026-07-28",
    "mcp-method": "server/discover",
}


@pytest.fixture(autouse=True)
def mcp_settings(settings: Any) -> None:
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "RESOURCE_URI": RESOURCE}


def fast_front() -> MCPEndpoint:
    """The opt-in front without Django's handler and middleware (a router sends the other paths to Django)."""
    return MCPEndpoint.as_asgi(middleware=False)


# The project's middleware, seen from inside -------------------------------------------------------------------

SEEN: list[dict[str, Any]] = []


def recording_middleware(get_response: Callable[[HttpRequest], HttpResponseBase]) -> Any:
    """Records every request it sees, and whether it carries ``MCPEndpoint``'s cancellation token."""

    def middleware(request: HttpRequest) -> HttpResponseBase:
        SEEN.append({"method": request.method, "path": request.path, "token": token_for(request) is not None})
        HANDLERS.append((type(request).__name__, threading.current_thread().name))
        return get_response(request)

    return middleware


HANDLERS: list[tuple[str, str]] = []
"""The request class (``WSGIRequest``, ``ASGIRequest``) and thread of each request ``recording_middleware`` saw."""


def asgi_front() -> MCPEndpoint:
    """The endpoint handing requests to the project's Django ASGI application (its handler in async mode)."""
    from testproject.asgi import django_asgi_app

    return MCPEndpoint.as_asgi(django_asgi_app)


def _load_middleware() -> None:
    """Rebuild the middleware chains of the project's handlers (each builds its chain once, at start)."""
    from testproject.asgi import django_asgi_app, mcp_endpoint

    django_asgi_app.load_middleware(is_async=True)
    assert mcp_endpoint.django_handler is not None
    mcp_endpoint.django_handler.load_middleware()  # type: ignore[attr-defined]


@pytest.fixture
def recorded(settings: Any) -> Iterator[list[dict[str, Any]]]:
    """``recording_middleware`` appended to ``MIDDLEWARE`` of the project's Django handlers."""
    original = list(settings.MIDDLEWARE)
    settings.MIDDLEWARE = [*original, f"{__name__}.recording_middleware"]
    _load_middleware()
    SEEN.clear()
    HANDLERS.clear()
    try:
        yield SEEN
    finally:
        settings.MIDDLEWARE = original
        _load_middleware()
        SEEN.clear()
        HANDLERS.clear()


@pytest.fixture
def started_requests() -> Iterator[list[str]]:
    """The threads in which Django's ``request_started`` was sent (by its handler or by the fast front)."""
    names: list[str] = []

    def record(**kwargs: Any) -> None:
        names.append(threading.current_thread().name)

    signals.request_started.connect(record, dispatch_uid="test_asgi.started_requests")
    yield names
    signals.request_started.disconnect(dispatch_uid="test_asgi.started_requests")


async def call(
    app: Any,
    method: str = "POST",
    headers: dict[str, str] | None = None,
    body: bytes = b"",
    *,
    path: str = "/mcp",
    chunks: list[bytes] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    exchange = await Exchange(app, scope(method, headers, path)).start(body, chunks=chunks)
    content = await exchange.body()
    await exchange.finished()
    return exchange.status, exchange.headers, content


# POST through Django's handler and the middleware ----------------------------------------------------------------


async def test_a_post_goes_through_djangos_handler_and_the_middleware(recorded: list[dict[str, Any]]) -> None:
    status, headers, body = await call(application(), "POST", DISCOVER_HEADERS, DISCOVER)
    assert status == 200
    assert headers["content-type"] == "application/json"
    assert int(headers["content-length"]) == len(body)
    result = json.loads(body)
    assert result["id"] == 7
    assert result["result"]["resultType"] == "complete"
    # The request reached the project's middleware, with its cancellation token in the scope Django kept...
    assert recorded == [{"method": "POST", "path": "/mcp", "token": True}]
    # ...and the rest of the stack ran too (XFrameOptionsMiddleware, SecurityMiddleware).
    assert headers["x-frame-options"] == "DENY"
    assert headers["x-content-type-options"] == "nosniff"


async def test_a_body_arriving_in_chunks_is_reassembled(recorded: list[dict[str, Any]]) -> None:
    status, _, body = await call(
        application(), "POST", DISCOVER_HEADERS, chunks=[DISCOVER[:10], DISCOVER[10:40], DISCOVER[40:]]
    )
    assert status == 200
    assert json.loads(body)["result"]["supportedVersions"][0] == "2026-07-28"
    assert len(recorded) == 1


async def test_a_session_delete_goes_through_the_middleware(
    recorded: list[dict[str, Any]], alice: Any, make_token: Callable[..., str]
) -> None:
    token = await in_thread(make_token, alice)
    initialize = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        }
    ).encode()
    auth = {"authorization": f"Bearer {token}"}
    status, headers, _ = await call(application(), "POST", {"content-type": "application/json", **auth}, initialize)
    assert status == 200
    session = {"mcp-session-id": headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25", **auth}
    status, _, _ = await call(application(), "DELETE", session)
    assert status == 204
    assert [(seen["method"], seen["path"]) for seen in recorded] == [("POST", "/mcp"), ("DELETE", "/mcp")]


async def test_get_without_a_session_is_405_from_the_view(recorded: list[dict[str, Any]]) -> None:
    status, headers, _ = await call(application(), "GET")
    assert status == 405
    assert headers["allow"] == "POST, DELETE"
    assert recorded == [{"method": "GET", "path": "/mcp", "token": True}]


async def test_other_paths_go_to_django(recorded: list[dict[str, Any]]) -> None:
    status, _, body = await call(application(), "GET", path="/admin/login/")
    assert status == 200
    assert b"<form" in body
    assert recorded == [{"method": "GET", "path": "/admin/login/", "token": False}]
    status, _, body = await call(application(), "GET", path="/.well-known/oauth-protected-resource/mcp")
    assert status == 200
    assert json.loads(body)["resource"] == RESOURCE


async def test_by_default_a_post_runs_through_djangos_wsgi_handler_in_one_worker_thread(
    recorded: list[dict[str, Any]], started_requests: list[str]
) -> None:
    status, _, _ = await call(application(), "POST", DISCOVER_HEADERS, DISCOVER)
    assert status == 200
    [(request_class, thread)] = HANDLERS
    # Django's WSGI handler built the request and ran the whole chain, the view included, in one thread that is
    # not the event loop's; Django's request signals were sent there too.
    assert request_class == "WSGIRequest"
    assert thread != threading.current_thread().name
    assert started_requests == [thread]


async def test_given_the_asgi_application_a_post_goes_through_djangos_asgi_handler(
    recorded: list[dict[str, Any]],
) -> None:
    status, headers, body = await call(asgi_front(), "POST", DISCOVER_HEADERS, DISCOVER)
    assert status == 200
    assert json.loads(body)["result"]["resultType"] == "complete"
    assert recorded == [{"method": "POST", "path": "/mcp", "token": True}]
    assert [request_class for request_class, _ in HANDLERS] == ["ASGIRequest"]
    assert headers["x-frame-options"] == "DENY"


def two_cookies_middleware(get_response: Callable[[HttpRequest], HttpResponseBase]) -> Any:
    """Sets two cookies on every response: both must reach the client."""

    def middleware(request: HttpRequest) -> HttpResponseBase:
        response = get_response(request)
        response.set_cookie("first", "1")
        response.set_cookie("second", "2")
        return response

    return middleware


async def test_repeated_response_headers_from_the_middleware_all_reach_the_client(settings: Any) -> None:
    original = list(settings.MIDDLEWARE)
    settings.MIDDLEWARE = [*original, f"{__name__}.two_cookies_middleware"]
    _load_middleware()
    try:
        exchange = await Exchange(application(), scope("POST", DISCOVER_HEADERS)).start(DISCOVER)
        await exchange.body()
        await exchange.finished()
    finally:
        settings.MIDDLEWARE = original
        _load_middleware()
    cookies = sorted(value.decode().split(";")[0] for name, value in exchange.raw_headers if name == b"set-cookie")
    assert cookies == ["first=1", "second=2"]


SCOPES = {
    "plain": scope("POST", DISCOVER_HEADERS),
    "repeated and underscored headers": {
        **scope("POST", DISCOVER_HEADERS),
        "headers": [
            (b"host", b"127.0.0.1:8000"),
            (b"x-forwarded-for", b"10.0.0.1"),
            (b"x-forwarded-for", b"10.0.0.2"),
            (b"x_forwarded_for", b"spoofed"),
            (b"content-type", b"application/json; charset=utf-8"),
            (b"authorization", b"Bearer abc"),
            (b"cookie", b"a=1; b=2"),
        ],
    },
    "a root path, a query string and a non-ASCII path": {
        **scope("GET", {}, "/prefix/mcp/\u00e9t\u00e9"),
        "root_path": "/prefix",
        "query_string": b"a=1&b=%C3%A9&a=2",
    },
    "no client, no server, https": {**scope("DELETE", {}), "client": None, "server": None, "scheme": "https"},
}


@pytest.mark.parametrize("asgi_scope", SCOPES.values(), ids=SCOPES.keys())
def test_the_wsgi_environ_makes_the_request_djangos_asgi_handler_makes(asgi_scope: dict[str, Any]) -> None:
    """Differential: Django's WSGIRequest of ``wsgi_environ(scope, body)`` against Django's ASGIRequest of the scope."""
    import io

    from django.core.handlers.asgi import ASGIRequest
    from django.core.handlers.wsgi import WSGIRequest

    from mcp_resources.transport.asgi import wsgi_environ

    body = b'{"jsonrpc": "2.0"}'
    through_wsgi = WSGIRequest(wsgi_environ(asgi_scope, body))
    through_asgi = ASGIRequest(asgi_scope, io.BytesIO(body))
    for attribute in ("method", "path", "path_info", "scheme", "content_type", "encoding", "body"):
        assert getattr(through_wsgi, attribute) == getattr(through_asgi, attribute), attribute
    assert list(through_wsgi.GET.lists()) == list(through_asgi.GET.lists())
    assert through_wsgi.COOKIES == through_asgi.COOKIES
    assert {**through_wsgi.headers, "Content-Length": None} == {**through_asgi.headers, "Content-Length": None}
    for key, value in through_asgi.META.items():
        if not key.startswith("wsgi.") and key != "CONTENT_LENGTH":
            assert through_wsgi.META[key] == str(value), key
    assert through_wsgi.META["CONTENT_LENGTH"] == str(len(body))  # also for a chunked request
    if asgi_scope["server"]:
        assert through_wsgi.get_host() == through_asgi.get_host()


# Streams: a response the middleware sees, served on the event loop -------------------------------------------------


def refusing_middleware(get_response: Callable[[HttpRequest], HttpResponseBase]) -> Any:
    """Refuses every request carrying ``X-Refuse`` (a stand-in for a WAF or a rate limiter)."""

    def middleware(request: HttpRequest) -> HttpResponseBase:
        if "HTTP_X_REFUSE" in request.META:
            return HttpResponse("refused by the middleware", status=429)
        return get_response(request)

    return middleware


@pytest.fixture
def refusing(settings: Any) -> Iterator[None]:
    original = list(settings.MIDDLEWARE)
    settings.MIDDLEWARE = [*original, f"{__name__}.refusing_middleware"]
    _load_middleware()
    yield
    settings.MIDDLEWARE = original
    _load_middleware()


async def _open_listen(front: MCPEndpoint, token: str, **headers: str) -> Exchange:
    exchange = Exchange(front, scope("POST", listen_headers(token, **headers)))
    return await exchange.start(listen_body(1, {"resourcesListChanged": True}))


@pytest.mark.parametrize("front", [application, asgi_front], ids=["wsgi-handler", "asgi-handler"])
async def test_a_listen_stream_opens_through_the_middleware_and_then_streams_on_the_loop(
    recorded: list[dict[str, Any]], alice: Any, make_token: Callable[..., str], front: Callable[[], MCPEndpoint]
) -> None:
    token = await in_thread(make_token, alice)
    stream = await _open_listen(front(), token)
    assert stream.status == 200
    assert stream.headers["content-type"] == "text/event-stream"
    # The middleware saw the opening request (cancellable like any other), and the headers it adds are on the
    # stream's own response: no placeholder, no header merging.
    assert recorded == [{"method": "POST", "path": "/mcp", "token": True}]
    assert stream.headers["x-frame-options"] == "DENY"
    assert stream.headers["x-content-type-options"] == "nosniff"
    assert "x-mcp-stream-plan" not in stream.headers
    assert "content-length" not in stream.headers
    acknowledged = await stream.event()
    assert acknowledged["method"] == ACKNOWLEDGED
    assert acknowledged["params"]["notifications"]["resourcesListChanged"] is True
    await stream.disconnect()


@pytest.mark.parametrize("front", [application, asgi_front], ids=["wsgi-handler", "asgi-handler"])
async def test_a_session_get_stream_opens_through_the_middleware(
    recorded: list[dict[str, Any]], alice: Any, make_token: Callable[..., str], front: Callable[[], MCPEndpoint]
) -> None:
    token = await in_thread(make_token, alice)
    initialize = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        }
    ).encode()
    auth = {"authorization": f"Bearer {token}"}
    status, headers, _ = await call(application(), "POST", {"content-type": "application/json", **auth}, initialize)
    assert status == 200
    session = {"mcp-session-id": headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25", **auth}
    stream = await Exchange(front(), scope("GET", {**session, "accept": "text/event-stream"})).start()
    assert stream.status == 200
    assert stream.headers["content-type"] == "text/event-stream"
    assert stream.headers["mcp-session-id"] == session["mcp-session-id"]
    assert stream.headers["x-frame-options"] == "DENY"
    assert [(seen["method"], seen["path"]) for seen in recorded] == [("POST", "/mcp"), ("GET", "/mcp")]
    await stream.disconnect()


@pytest.mark.parametrize("front", [application, asgi_front], ids=["wsgi-handler", "asgi-handler"])
async def test_a_middleware_can_refuse_a_stream(
    refusing: None, alice: Any, make_token: Callable[..., str], front: Callable[[], MCPEndpoint]
) -> None:
    token = await in_thread(make_token, alice)
    stream = await _open_listen(front(), token, x_refuse="1")
    assert stream.status == 429
    assert await stream.body() == b"refused by the middleware"
    await stream.finished()


async def test_a_stream_the_view_refuses_answers_the_views_refusal(recorded: list[dict[str, Any]]) -> None:
    stream = await _open_listen(application(), "not-a-token")
    assert stream.status == 401
    assert stream.headers["www-authenticate"].startswith("Bearer ")
    assert "x-mcp-stream-plan" not in stream.headers
    await stream.body()
    await stream.finished()
    assert len(recorded) == 1


# The opt-in fast front -------------------------------------------------------------------------------------------


async def test_the_fast_front_skips_djangos_handler_and_the_middleware(
    recorded: list[dict[str, Any]], started_requests: list[str]
) -> None:
    status, headers, body = await call(fast_front(), "POST", DISCOVER_HEADERS, DISCOVER)
    assert status == 200
    assert json.loads(body)["result"]["resultType"] == "complete"
    assert int(headers["content-length"]) == len(body)
    assert recorded == []
    assert "x-frame-options" not in headers
    assert len(started_requests) == 1  # the front still sends Django's request signals around the view


async def test_the_fast_front_still_checks_host_origin_and_the_token(
    recorded: list[dict[str, Any]], alice: Any, make_token: Callable[..., str]
) -> None:
    front = fast_front()
    status, _, body = await call(front, "POST", {**DISCOVER_HEADERS, "host": "evil.example"}, DISCOVER)
    assert status == 400
    assert json.loads(body)["error"]["message"] == "Invalid Host header"
    status, _, body = await call(front, "POST", {**DISCOVER_HEADERS, "origin": "http://evil.example"}, DISCOVER)
    assert status == 403
    assert json.loads(body)["error"]["message"] == "Origin not allowed"
    listing = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "resources/list", "params": {"_meta": meta()}}).encode()
    list_headers = {**DISCOVER_HEADERS, "mcp-method": "resources/list"}
    status, headers, _ = await call(front, "POST", list_headers, listing)
    assert status == 401
    assert headers["www-authenticate"].startswith("Bearer ")
    status, _, _ = await call(front, "POST", {**list_headers, "authorization": "Bearer not-a-token"}, listing)
    assert status == 401
    token = await in_thread(make_token, alice)
    status, _, body = await call(front, "POST", {**list_headers, "authorization": f"Bearer {token}"}, listing)
    assert status == 200
    assert "resources" in json.loads(body)["result"]
    assert recorded == []


# Bodies ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("middleware", [True, False], ids=["default", "fast"])
async def test_an_oversized_chunked_body_is_413_before_django_reads_it(
    settings: Any, recorded: list[dict[str, Any]], started_requests: list[str], middleware: bool
) -> None:
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "MAX_REQUEST_BYTES": 100}
    front = application() if middleware else fast_front()
    # Chunked (no Content-Length): only the bytes read tell the size.
    status, headers, body = await call(front, "POST", DISCOVER_HEADERS, chunks=[b"x" * 60, b"x" * 60])
    assert status == 413
    assert headers["content-type"] == "application/json"
    assert json.loads(body)["error"]["code"] == -32600
    # A listen request too: it is read before it is told apart.
    status, _, body = await call(front, "POST", listen_headers("t"), chunks=[listen_body(1, {}), b" " * 100])
    assert status == 413
    assert recorded == []
    assert started_requests == []
    # Exactly at the limit is read and served.
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "MAX_REQUEST_BYTES": len(DISCOVER)}
    status, _, _ = await call(front, "POST", DISCOVER_HEADERS, chunks=[DISCOVER[:50], DISCOVER[50:]])
    assert status == 200


@pytest.mark.parametrize("middleware", [True, False], ids=["default", "fast"])
async def test_a_client_that_leaves_during_its_body_gets_nothing_run(
    recorded: list[dict[str, Any]], started_requests: list[str], middleware: bool
) -> None:
    front = application() if middleware else fast_front()
    exchange = Exchange(front, scope("POST", DISCOVER_HEADERS))
    await exchange.communicator.send_input({"type": "http.request", "body": DISCOVER[:20], "more_body": True})
    await exchange.disconnect()
    assert exchange.communicator.output_queue.empty()
    assert recorded == []
    assert started_requests == []


class QuickBodyEndpoint(MCPEndpoint):
    body_timeout_seconds = 0.2


@pytest.mark.parametrize("middleware", [True, False], ids=["default", "fast"])
async def test_a_body_that_stalls_is_answered_408_and_nothing_runs(
    recorded: list[dict[str, Any]], started_requests: list[str], middleware: bool
) -> None:
    front = QuickBodyEndpoint.as_asgi(middleware=middleware)
    exchange = Exchange(front, scope("POST", DISCOVER_HEADERS))
    await exchange.communicator.send_input({"type": "http.request", "body": DISCOVER[:20], "more_body": True})
    await exchange.start(timeout=5, chunks=[])
    assert exchange.status == 408
    assert json.loads(await exchange.body())["error"] == {"code": -32600, "message": "Request body timeout"}
    assert recorded == []
    assert started_requests == []


# Lifespan --------------------------------------------------------------------------------------------------------


async def test_lifespan_startup_and_shutdown() -> None:
    lifespan = ApplicationCommunicator(application(), {"type": "lifespan", "asgi": {"version": "3.0"}})
    await lifespan.send_input({"type": "lifespan.startup"})
    assert await lifespan.receive_output(5) == {"type": "lifespan.startup.complete"}
    await lifespan.send_input({"type": "lifespan.shutdown"})
    assert await lifespan.receive_output(5) == {"type": "lifespan.shutdown.complete"}
    await lifespan.wait(5)


def test_the_fast_front_refuses_a_django_application_it_would_never_call() -> None:
    """Without the middleware the endpoint serves MCP requests itself, without Django's handler: an application given
    to it was ignored silently (a project may believe its requests still reach Django's ASGI handler), so it is
    refused at start-up with what to do instead."""
    from testproject.asgi import django_asgi_app

    with pytest.raises(ImproperlyConfigured, match=r"no django_app with middleware=False.*route the project's other"):
        MCPEndpoint.as_asgi(django_asgi_app, middleware=False)
    with pytest.raises(ImproperlyConfigured, match="no django_app with middleware=False"):
        MCPEndpoint(django_asgi_app, middleware=False)
    MCPEndpoint.as_asgi(middleware=False)
    MCPEndpoint.as_asgi(django_asgi_app)


async def test_the_endpoint_refuses_websockets() -> None:
    with pytest.raises(ValueError, match="HTTP"):
        await fast_front()({"type": "websocket", "path": "/mcp"}, None, None)  # type: ignore[arg-type]
