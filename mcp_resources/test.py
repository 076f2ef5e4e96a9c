"""An MCP test client for a project's own test suite, like Django REST framework's ``APIClient``.

Requests go through Django's test client, so the project's URLconf, middleware and the real
:class:`~mcp_resources.MCPView` serve them, as over HTTP; no server process and no token are needed::

    from mcp_resources.test import MCPClient

    def test_alice_lists_her_documents(alice):
        client = MCPClient()
        client.force_authenticate(alice, scopes=["documents:read"])
        uris = [r["uri"] for r in client.list_all_resources()]
        assert "learn://documents/1" in uris
        assert client.read_resource("learn://documents/1")["contents"][0]["text"] == "..."

``MCPClient(protocol_version="2025-11-25")`` speaks the session era (``initialize`` first, then
``Mcp-Session-Id``). Errors come back as :class:`~mcp_resources.exceptions.MCPError` with the code, message and
data the client received; a 401 as :class:`~mcp_resources.exceptions.AuthenticationRequired` and a 403 as
:class:`~mcp_resources.exceptions.InsufficientScope`. ``client.post_message(method, params)`` returns the raw
response.

An unexpected exception (a bug in a template) is raised as it is, like DRF's ``APIClient`` and Django's test
client: the endpoint sends ``got_request_exception``, which the test client re-raises after the response.
``MCPClient(raise_request_exception=False)`` gets the answer a real client gets instead: ``MCPError`` -32603
``"Internal error"`` with no detail.
"""

from __future__ import annotations

import base64
import itertools
import json
from collections.abc import Iterable
from typing import Any

from django.http import HttpRequest, HttpResponseBase
from django.test import Client
from django.test.client import ClientHandler
from django.urls import NoReverseMatch, reverse

from mcp_resources.auth.authentication import user_principal
from mcp_resources.exceptions import AuthenticationRequired, InsufficientScope, MCPError
from mcp_resources.principal import Principal
from mcp_resources.protocol.versions import (
    CLIENT_CAPABILITIES_META,
    LATEST_VERSION,
    PROTOCOL_VERSION_META,
    SESSION_VERSIONS,
)
from mcp_resources.transport.headers import NAME_BEARING
from mcp_resources.transport.views import FORCED_PRINCIPAL, SESSION_HEADER

CLIENT_ID = "mcp_resources.test"


class _ForcedAuthHandler(ClientHandler):
    """Attaches the forced principal to each request, where the view looks for it instead of a token."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.forced: tuple[Principal, Any] | None = None
        super().__init__(*args, **kwargs)

    def get_response(self, request: HttpRequest) -> HttpResponseBase:
        if self.forced is not None:
            setattr(request, FORCED_PRINCIPAL, self.forced)
        return super().get_response(request)


class MCPClient(Client):
    """Calls the MCP endpoint of this project as an MCP client would, through Django's test client."""

    def __init__(
        self,
        *,
        protocol_version: str = LATEST_VERSION,
        path: str | None = None,
        raise_request_exception: bool = True,
        **defaults: Any,
    ) -> None:
        super().__init__(raise_request_exception=raise_request_exception, **defaults)
        self.handler: _ForcedAuthHandler = _ForcedAuthHandler(enforce_csrf_checks=False)
        self.protocol_version = protocol_version
        self.path = path or _endpoint_path()
        self.session_id: str | None = None
        self._ids = itertools.count(1)

    # Identity ------------------------------------------------------------------------------------------------

    def force_authenticate(self, user: Any = None, scopes: Iterable[str] = (), *, client_id: str = CLIENT_ID) -> None:
        """Call as ``user`` holding ``scopes`` (expanded by ``SCOPE_HIERARCHY``), as a valid token would;
        ``force_authenticate(None)`` calls anonymously again. A session of 2025-11-25 starts afresh."""
        self.end_session()
        if user is None:
            self.handler.forced = None
        else:
            self.handler.forced = (user_principal(user, scopes, client_id), user)

    def end_session(self) -> None:
        """End the client's 2025-11-25 session, if it has one (``DELETE`` with its ``Mcp-Session-Id``), as a client
        that is done does. A person holds a bounded number of sessions (docs/security.md): a test that opens many
        clients for one user in a burst ends each, or uses the client as a context manager."""
        if self.session_id is None:
            return
        session_id, self.session_id = self.session_id, None
        self.generic(
            "DELETE", self.path, headers={"MCP-Protocol-Version": self.protocol_version, SESSION_HEADER: session_id}
        )

    def __enter__(self) -> MCPClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.end_session()

    # Methods -------------------------------------------------------------------------------------------------

    def list_resources(self, *, cursor: str | None = None, prefix: str | None = None) -> dict[str, Any]:
        """One ``resources/list`` page."""
        return self.call("resources/list", _params(cursor=cursor, prefix=prefix))

    def list_all_resources(self, *, prefix: str | None = None) -> list[dict[str, Any]]:
        """Every resource of ``resources/list``, following ``nextCursor`` to the end."""
        resources: list[dict[str, Any]] = []
        cursor = None
        while True:
            page = self.list_resources(cursor=cursor, prefix=prefix)
            resources += page["resources"]
            cursor = page.get("nextCursor")
            if cursor is None:
                return resources

    def list_templates(self, *, cursor: str | None = None, prefix: str | None = None) -> dict[str, Any]:
        """One ``resources/templates/list`` page."""
        return self.call("resources/templates/list", _params(cursor=cursor, prefix=prefix))

    def read_resource(self, uri: str) -> dict[str, Any]:
        """The ``resources/read`` result for ``uri``."""
        return self.call("resources/read", {"uri": uri})

    def complete(
        self, uri_template: str, argument: str, value: str, arguments: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """The ``completion`` object of ``completion/complete`` for the variable ``argument`` of ``uri_template``
        (``arguments``: the values already chosen for its other variables)."""
        params: dict[str, Any] = {
            "ref": {"type": "ref/resource", "uri": uri_template},
            "argument": {"name": argument, "value": value},
        }
        if arguments is not None:
            params["context"] = {"arguments": arguments}
        completion: dict[str, Any] = self.call("completion/complete", params)["completion"]
        return completion

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """The result of ``method``; raises :class:`~mcp_resources.exceptions.MCPError` for an error answer."""
        response = self.post_message(method, params)
        return _result(response)

    # Wire ----------------------------------------------------------------------------------------------------

    def post_message(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """POST one request with the headers and ``_meta`` of the client's protocol version; the raw response."""
        params = dict(params or {})
        headers = {"MCP-Protocol-Version": self.protocol_version}
        if self.protocol_version in SESSION_VERSIONS:
            if self.session_id is None:
                self._initialize()
            assert self.session_id is not None
            headers[SESSION_HEADER] = self.session_id
        else:
            meta = dict(params.get("_meta") or {})
            meta.setdefault(PROTOCOL_VERSION_META, self.protocol_version)
            meta.setdefault(CLIENT_CAPABILITIES_META, {})
            params["_meta"] = meta
            headers["Mcp-Method"] = method
            if method in NAME_BEARING and isinstance(params.get(NAME_BEARING[method]), str):
                headers["Mcp-Name"] = _header_value(params[NAME_BEARING[method]])
        body = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}
        return self._post(body, headers)

    def _initialize(self) -> None:
        body = {
            "jsonrpc": "2.0",
            "id": next(self._ids),
            "method": "initialize",
            "params": {
                "protocolVersion": self.protocol_version,
                "capabilities": {},
                "clientInfo": {"name": CLIENT_ID, "version": "1"},
            },
        }
        response = self._post(body, {})
        _result(response)
        self.session_id = response[SESSION_HEADER]
        headers = {"MCP-Protocol-Version": self.protocol_version, SESSION_HEADER: self.session_id}
        self._post({"jsonrpc": "2.0", "method": "notifications/initialized"}, headers)

    def _post(self, body: dict[str, Any], headers: dict[str, str]) -> Any:
        return self.generic(
            "POST",
            self.path,
            json.dumps(body),
            content_type="application/json",
            headers={"Accept": "application/json, text/event-stream", **headers},
        )


def _endpoint_path() -> str:
    try:
        return reverse("mcp_resources:endpoint")
    except NoReverseMatch:
        return "/mcp"


def _params(**values: Any) -> dict[str, Any]:
    return {name: value for name, value in values.items() if value is not None}


def _header_value(value: str) -> str:
    """A request-metadata header value: as is when it is plain ASCII, else in the ``=?base64?...?=`` form."""
    if value.isascii() and value.isprintable() and value == value.strip():
        return value
    return "=?base64?" + base64.b64encode(value.encode()).decode("ascii") + "?="


def _result(response: Any) -> dict[str, Any]:
    if response.status_code == 401:
        raise AuthenticationRequired(reason=response.get("WWW-Authenticate", ""))
    if response.status_code == 403 and response.get("WWW-Authenticate"):
        raise InsufficientScope(_challenge_scopes(response["WWW-Authenticate"]))
    payload = json.loads(response.content)
    if "error" in payload:
        error = payload["error"]
        raise MCPError(
            error.get("message"), code=error.get("code"), data=error.get("data"), request_id=payload.get("id")
        )
    result: dict[str, Any] = payload["result"]
    return result


def _challenge_scopes(challenge: str) -> list[str]:
    marker = 'scope="'
    start = challenge.find(marker)
    if start < 0:
        return []
    end = challenge.find('"', start + len(marker))
    return challenge[start + len(marker) : end].split()
