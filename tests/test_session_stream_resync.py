"""A 2025-11-25 session's GET stream re-reads the session's subscriptions once it has joined its session group.

The stream's plan is built from the stored subscriptions (by ``MCPView.prepare_session_stream``, in a worker thread)
before the stream joins the channel layer's groups on the event loop. A ``resources/subscribe`` (or
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
    """A stream served on the running loop, its ASGI output collected."""

    def __init__(self, plan: StreamPlan) -> None:
        self.plan = plan
        self.output: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.gone = asyncio.Event()

    async def receive(self) -> dict[str, Any]:
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Any) -> None:
        await self.output.put(dict(message))

    async def started(self) -> None:
        message = await asyncio.wait_for(self.output.get(), 5)
        assert message["type"] == "http.response.start"
        assert message["status"] == 200

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
    task = asyncio.ensure_future(Stream(plan, served.receive, served.send).serve())
    try:
        await served.started()
        yield served
    finally:
        served.gone.set()
        await asyncio.wait_for(task, 5)


async def publish(uri: str) -> None:
    await broker.apublish(broker.uri_group(uri), {"type": broker.UPDATED, "uri": uri})


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
