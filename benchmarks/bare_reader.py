"""The baseline of ``bench_delivery.py``: a bare reader of the same engine, Redis Streams, writing SSE.

``uvicorn benchmarks.bare_reader:application`` with ``MCP_REDIS_URL``: one task per process reads the stream
``mcp_resources:events`` (``XREAD BLOCK``, redis-py's asyncio client, from the newest entry on) and hands each
``updated`` event to the requests listening to its URI. Every request, whatever its path, becomes an SSE stream for
the URIs its body asks for as a ``subscriptions/listen`` request (``params.notifications.resourceSubscriptions``),
answered with an acknowledgement, then one ``notifications/resources/updated`` event per event of the log, framed
like ours (with the SSE ``id``). Nothing else: no Django, no authentication, no access check, no keep-alives, no
limits, no catch-up, so it is the floor that Redis and the ASGI server allow.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import redis.asyncio as redis

KEY = "mcp_resources:events"
HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]

_listeners: dict[str, set[asyncio.Queue[bytes]]] = {}
_reader: asyncio.Task[None] | None = None


def frame(payload: dict[str, Any], event_id: str | None = None) -> bytes:
    head = b"id: " + event_id.encode() + b"\r\n" if event_id else b""
    return head + b"event: message\r\ndata: " + json.dumps(payload, separators=(",", ":")).encode() + b"\r\n\r\n"


async def read_log() -> None:
    client = redis.Redis.from_url(os.environ["MCP_REDIS_URL"], decode_responses=True)
    position = "$"
    while True:
        answer = await client.xread({KEY: position}, count=1000, block=1000)
        for _key, entries in answer or ():
            for event_id, fields in entries:
                position = event_id
                if fields.get("k") != "updated":
                    continue
                queues = _listeners.get(fields.get("t", ""))
                if queues:
                    data = frame(
                        {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": fields["t"]}},
                        event_id,
                    )
                    for queue in queues:
                        queue.put_nowait(data)


def requested_uris(body: bytes) -> list[str]:
    try:
        uris = json.loads(body)["params"]["notifications"]["resourceSubscriptions"]
    except (ValueError, KeyError, TypeError):
        return []
    return [uri for uri in uris if isinstance(uri, str)] if isinstance(uris, list) else []


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    global _reader
    if scope["type"] != "http":
        return
    if _reader is None:
        _reader = asyncio.get_running_loop().create_task(read_log())
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    uris = requested_uris(body)
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    for uri in uris:
        _listeners.setdefault(uri, set()).add(queue)
    ack = {
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {"notifications": {"resourceSubscriptions": uris}},
    }
    gone = asyncio.ensure_future(receive())
    try:
        await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
        await send({"type": "http.response.body", "body": frame(ack), "more_body": True})
        while True:
            data = asyncio.ensure_future(queue.get())
            done, _ = await asyncio.wait({data, gone}, return_when=asyncio.FIRST_COMPLETED)
            if gone in done:
                data.cancel()
                return
            await send({"type": "http.response.body", "body": data.result(), "more_body": True})
    except OSError:
        return
    finally:
        for uri in uris:
            _listeners.get(uri, set()).discard(queue)
