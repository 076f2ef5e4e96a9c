"""A 2025-11-25 session's GET stream re-reads the session's subscriptions once it has joined its hub.

The stream's plan is built from the stored subscriptions (by ``MCPView.get``, in a worker thread) before the stream
joins its hub on the event loop. A ``resources/subscribe`` (or
``unsubscribe``) that stores its change and publishes its control message in between would otherwise be lost for
the whole life of the stream. The official SDK client opens the GET stream right after ``initialize``, concurrently
with its first requests, so the window is hit in practice (about one session in a hundred in a loopback run before
the fix). The window cannot be hit on purpose through HTTP, so the stream is served here from a plan built as if the
change had landed in it: the plan says one thing, the stored subscriptions another.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from mcp_resources.subscriptions import broker
from mcp_resources.transport.streams import Stream, StreamPlan

pytestmark = pytest.mark.anyio


class Served:
    """A stream served on the running loop, its chunks collected."""

    def __init__(self, plan: StreamPlan) -> None:
        self.plan = plan
        self.output: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def updates_until(self, last: str, timeout: float = 5) -> list[str]:
        """The URIs of the updates sent, up to the first one for ``last`` (a stream's messages arrive in order, so an
        update published before ``last``'s and withheld is never among them)."""
        uris: list[str] = []
        while last not in uris:
            message = await asyncio.wait_for(self.output.get(), timeout)
            for line in message.get("body", b"").decode().splitlines():
                if line.startswith("data: "):
                    payload = json.loads(line[len("data: ") :])
                    if payload.get("method") == "notifications/resources/updated":
                        uris.append(payload["params"]["uri"])
        return uris


@asynccontextmanager
async def serving(stored: list[str], planned: set[str]) -> AsyncIterator[Served]:
    def resync() -> list[str]:
        return list(stored)  # the session's subscriptions as stored now

    plan = StreamPlan(
        owner="resync-test",
        uris=set(planned),
        list_changed=True,
        check=lambda uri: True,
        session_id="resync-test-session",
        resync=resync,
    )
    served = Served(plan)
    stream = Stream(plan)
    await stream.open()  # as the endpoint does before the response starts

    async def pump() -> None:
        async for chunk in stream.events():
            await served.output.put({"body": chunk})

    task = asyncio.ensure_future(pump())
    try:
        yield served
    finally:
        stream.disconnected()
        await asyncio.wait_for(task, 5)


async def publish(uri: str) -> None:
    await asyncio.to_thread(broker.notify_resource_updated, uri)


async def test_a_subscription_stored_before_the_stream_joined_is_delivered() -> None:
    # The plan was built before the subscribe stored "test://late"; its control message reached no one.
    async with serving(stored=["test://early", "test://late"], planned={"test://early"}) as served:
        assert served.plan.uris == {"test://early", "test://late"}
        await publish("test://late")
        await publish("test://early")
        assert await served.updates_until("test://early") == ["test://late", "test://early"]


async def test_an_unsubscribe_stored_before_the_stream_joined_is_applied() -> None:
    async with serving(stored=["test://kept"], planned={"test://kept", "test://dropped"}) as served:
        assert served.plan.uris == {"test://kept"}
        await publish("test://dropped")
        await publish("test://kept")  # published after: once it is here, the other would have been too
        assert await served.updates_until("test://kept") == ["test://kept"]
