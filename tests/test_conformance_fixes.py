"""Server fixes found by the official MCP conformance suite (``make conformance``), one test per fix.

``initialize`` on the 2026-07-28 wire: conformance 0.2.0-alpha.12, scenario ``server-stateless``, check
``sep-2575-http-server-method-not-found-404-initialize``. ``initialize`` is removed in 2026-07-28, so a request
that announces that revision (the ``MCP-Protocol-Version`` header or the per-request ``_meta``) must get
404 + -32601 like any unknown method, not the 2025-11-25 handshake or its -32602. An ``initialize`` of
2025-11-25 still opens a session.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

V2026_07_28 = "2026-07-28"
META_2026_07_28 = {
    "io.modelcontextprotocol/protocolVersion": V2026_07_28,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "conformance-client", "version": "1.0.0"},
}


@pytest.fixture(autouse=True)
def _unauthenticated(settings: Any) -> None:
    # As the conformance profile does: the suite sends no credentials.
    settings.MCP_RESOURCES = {**settings.MCP_RESOURCES, "AUTHENTICATION_CLASS": "mcp_resources.auth.NoAuthentication"}


def post(client: Client, body: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
    return client.post(
        "/mcp",
        data=json.dumps(body),
        content_type="application/json",
        headers={"Accept": "application/json, text/event-stream", **(headers or {})},
    )


def test_initialize_of_2026_07_28_is_method_not_found(client: Client) -> None:
    response = post(
        client,
        {"jsonrpc": "2.0", "id": 500, "method": "initialize", "params": {"_meta": META_2026_07_28}},
        {"MCP-Protocol-Version": V2026_07_28, "Mcp-Method": "initialize"},
    )
    assert response.status_code == 404
    body = response.json()
    assert body["id"] == 500
    assert body["error"]["code"] == -32601
    assert "Mcp-Session-Id" not in response.headers


def test_initialize_with_2026_07_28_meta_but_no_headers_is_a_2026_07_28_request(client: Client) -> None:
    response = post(client, {"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {"_meta": META_2026_07_28}})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32020
    assert "Mcp-Session-Id" not in response.headers


def test_initialize_of_2025_11_25_still_opens_a_session(client: Client) -> None:
    response = post(
        client,
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "conformance-client", "version": "1.0.0"},
            },
        },
    )
    assert response.status_code == 200
    assert response.json()["result"]["protocolVersion"] == "2025-11-25"
    assert response.headers["Mcp-Session-Id"]
