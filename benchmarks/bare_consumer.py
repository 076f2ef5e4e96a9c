"""The baseline of ``bench_listeners.py``: a bare Channels ``AsyncHttpConsumer`` SSE server.

``uvicorn benchmarks.bare_consumer:application`` with the same settings as the MCP server under test
(``benchmarks.settings_listeners`` by default, or ``DJANGO_SETTINGS_MODULE``; ``MCP_REDIS_URL``): every request,
whatever its path, becomes an SSE stream that joins the groups (``uri_group``, the same names on the same channel
layer) of the URIs its body asks for as a ``subscriptions/listen`` request
(``params.notifications.resourceSubscriptions``; ``bench_delivery.py``), or of ``test://watched-resource`` when
the body names none (``bench_listeners.py``), sends an acknowledgement event once it has joined, then writes each
``mcp.resource.updated`` message as a ``notifications/resources/updated`` event framed like ours. Nothing else: no
authentication, no access check, no keep-alives, no limits, so it is the floor that the channel layer and the ASGI
server allow.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchmarks.settings_listeners")
django.setup()

from channels.generic.http import AsyncHttpConsumer  # noqa: E402 - needs the settings above

from mcp_resources.subscriptions.broker import uri_group  # noqa: E402

WATCHED = "test://watched-resource"


def ack(uris: list[str]) -> bytes:
    payload = {
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {"notifications": {"resourceSubscriptions": uris}},
    }
    return b"event: message\r\ndata: " + json.dumps(payload, separators=(",", ":")).encode() + b"\r\n\r\n"


def requested_uris(body: bytes) -> list[str]:
    """The URIs a ``subscriptions/listen`` body asks for; ``[WATCHED]`` when it names none (or is no such body)."""
    try:
        message = json.loads(body)
        uris = message["params"]["notifications"]["resourceSubscriptions"]
    except (ValueError, KeyError, TypeError):
        return [WATCHED]
    if not isinstance(uris, list) or not uris or not all(isinstance(uri, str) for uri in uris):
        return [WATCHED]
    return list(dict.fromkeys(uris))


ACK = ack([WATCHED])

HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]


class BareSSEConsumer(AsyncHttpConsumer):
    """One SSE stream per request, subscribed to the groups of its URIs until the client goes away."""

    joined: list[str] | None = None

    async def http_request(self, message: dict[str, Any]) -> None:
        # AsyncHttpConsumer ends the consumer once handle() returns; a stream must outlive it, so only the
        # disconnect (http_disconnect -> disconnect() -> StopConsumer) ends this one.
        if "body" in message:
            self.body.append(message["body"])
        if not message.get("more_body"):
            await self.handle(b"".join(self.body))

    async def handle(self, body: bytes) -> None:
        uris = requested_uris(body)
        self.joined = [uri_group(uri) for uri in uris]
        for group in self.joined:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.send_headers(headers=HEADERS)
        await self.send_body(ACK if uris == [WATCHED] else ack(uris), more_body=True)

    async def mcp_resource_updated(self, message: dict[str, Any]) -> None:
        payload = {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"uri": message.get("uri")},
        }
        data = json.dumps(payload, separators=(",", ":")).encode()
        await self.send_body(b"event: message\r\ndata: " + data + b"\r\n\r\n", more_body=True)

    async def mcp_fence(self, message: dict[str, Any]) -> None:
        """A publisher's fence (its last number, for loss detection): nothing for a client."""

    async def disconnect(self) -> None:
        joined, self.joined = self.joined or [], None
        for group in joined:
            # Thousands of clients leaving at once can exhaust the Redis connection pool; the benchmarks flush
            # their Redis database between servers, so a failed discard only costs a log line.
            with contextlib.suppress(Exception):
                await self.channel_layer.group_discard(group, self.channel_name)


application = BareSSEConsumer.as_asgi()
