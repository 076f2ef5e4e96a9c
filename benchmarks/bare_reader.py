"""The baseline of ``bench_delivery.py`` and ``bench_listeners.py``: a bare reader of the same engine, Redis
Streams, writing SSE.

``uvicorn benchmarks.bare_reader:application`` with ``MCP_REDIS_URL``: one task per process reads the stream
``mcp_resources:events`` (``XREAD BLOCK``, redis-py's asyncio client, from the newest entry on) and hands each
``updated`` event to the requests listening to its URI. Every request, whatever its path, becomes an SSE stream for
the URIs its body asks for as a ``subscriptions/listen`` request (``params.notifications.resourceSubscriptions``;
``test://watched-resource`` when it names none), answered with an acknowledgement carrying the log's newest id,
then one ``notifications/resources/updated`` event per event of the log, framed like ours (the SSE ``id`` and
``_meta["io.github.django-mcp-resources/eventId"]``). A request whose ``params._meta`` carries that key resumes:
it first gets every ``updated`` event of its URIs after that id (``XRANGE``), then the live ones after them. Nothing
else: no Django, no authentication, no access check, no keep-alives, no limits, no coalescing, so it is the floor
that Redis and the ASGI server allow.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import redis.asyncio as redis

KEY = "mcp_resources:events"
EVENT_ID_META = "io.github.django-mcp-resources/eventId"
WATCHED = "test://watched-resource"
HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]

Item = tuple[tuple[int, int], bytes]  # (the event id as numbers, its frame)

_listeners: dict[str, set[asyncio.Queue[Item]]] = {}
_reader: asyncio.Task[None] | None = None
_client: redis.Redis | None = None


def client() -> redis.Redis:
    global _client
    if _client is None:
        _client = redis.Redis.from_url(os.environ["MCP_REDIS_URL"], decode_responses=True)
    return _client


def id_key(event_id: str) -> tuple[int, int]:
    ms, _, seq = event_id.partition("-")
    return int(ms), int(seq or 0)


def frame(payload: dict[str, Any], event_id: str | None = None) -> bytes:
    head = b"id: " + event_id.encode() + b"\r\n" if event_id else b""
    return head + b"event: message\r\ndata: " + json.dumps(payload, separators=(",", ":")).encode() + b"\r\n\r\n"


def updated(uri: str, event_id: str) -> Item:
    payload = {
        "jsonrpc": "2.0",
        "method": "notifications/resources/updated",
        "params": {"uri": uri, "_meta": {EVENT_ID_META: event_id}},
    }
    return id_key(event_id), frame(payload, event_id)


async def read_log() -> None:
    reader = redis.Redis.from_url(os.environ["MCP_REDIS_URL"], decode_responses=True)
    position = "$"
    while True:
        answer = await reader.xread({KEY: position}, count=1000, block=1000)
        for _key, entries in answer or ():
            for event_id, fields in entries:
                position = event_id
                if fields.get("k") != "updated":
                    continue
                queues = _listeners.get(fields.get("t", ""))
                if queues:
                    item = updated(fields["t"], event_id)
                    for queue in queues:
                        queue.put_nowait(item)


def parse(body: bytes) -> tuple[list[str], str | None]:
    """The URIs a listen body asks for (``[WATCHED]`` when none) and its resume id."""
    try:
        params = json.loads(body)["params"]
    except (ValueError, KeyError, TypeError):
        return [WATCHED], None
    uris = (params.get("notifications") or {}).get("resourceSubscriptions")
    resume = (params.get("_meta") or {}).get(EVENT_ID_META)
    if not isinstance(uris, list) or not uris:
        uris = [WATCHED]
    return [uri for uri in uris if isinstance(uri, str)], resume if isinstance(resume, str) else None


async def replay(uris: list[str], after: str) -> list[Item]:
    """The ``updated`` events of ``uris`` after the id ``after``, in the log's order."""
    wanted = set(uris)
    items: list[Item] = []
    start = "(" + after
    while True:
        entries = await client().xrange(KEY, min=start, max="+", count=1000)
        for event_id, fields in entries:
            if fields.get("k") == "updated" and fields.get("t") in wanted:
                items.append(updated(fields["t"], event_id))
        if len(entries) < 1000:
            return items
        start = "(" + entries[-1][0]


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
    uris, resume = parse(body)
    queue: asyncio.Queue[Item] = asyncio.Queue()
    for uri in uris:
        _listeners.setdefault(uri, set()).add(queue)
    gone = asyncio.ensure_future(receive())
    try:
        newest = await client().xrevrange(KEY, count=1)
        position = newest[0][0] if newest else "0-0"
        ack = {
            "jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": {"notifications": {"resourceSubscriptions": uris}, "_meta": {EVENT_ID_META: resume or position}},
        }
        await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
        await send({"type": "http.response.body", "body": frame(ack), "more_body": True})
        last = (0, 0)
        if resume:
            for key, data in await replay(uris, resume):
                await send({"type": "http.response.body", "body": data, "more_body": True})
                last = key
        while True:
            got = asyncio.ensure_future(queue.get())
            done, _ = await asyncio.wait({got, gone}, return_when=asyncio.FIRST_COMPLETED)
            if gone in done:
                got.cancel()
                return
            key, data = got.result()
            if key > last:  # an event the replay wrote already is not written twice
                await send({"type": "http.response.body", "body": data, "more_body": True})
    except OSError:
        return
    finally:
        gone.cancel()
        for uri in uris:
            _listeners.get(uri, set()).discard(queue)
