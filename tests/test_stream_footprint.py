"""What an open stream keeps: the garbage collector's tracked objects per open ``subscriptions/listen`` stream, served
by ``MCPEndpoint`` through the project's middleware (issue 28: 5,000 listeners on one worker in at most 32 KB each,
and full collections that walk every object an open stream holds).

Counted, not timed: the objects the collector tracks that came with 40 more open streams of one caller, less what
the test's own client holds for them (measured on the same clients once their streams ended). Before the streams
shed their requests, the finished tasks and containers, one stream held about 117 of them; now about 45 when the
streams are one caller's (they share what re-checks it) and about 60 when each is a different caller's.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

import pytest

from mcp_resources.transport import streams
from testproject.library.models import Document
from tests.conftest import RESOURCE
from tests.stream_support import ACKNOWLEDGED, Exchange, application, in_thread, listen_body, listen_headers, scope

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]

STREAMS = 40
TRACKED_PER_STREAM = 80
"""The bound: about 45 and 60 now, about 117 before (docs/performance.md, issue 28)."""


@pytest.fixture(autouse=True)
def mcp_settings(settings: Any) -> None:
    settings.MCP_RESOURCES = {
        **settings.MCP_RESOURCES,
        "RESOURCE_URI": RESOURCE,
        "STREAM_KEEPALIVE_SECONDS": 30,
        "STREAMS_PER_CALLER": 10 * STREAMS,
    }


def tracked() -> int:
    gc.collect()
    return len(gc.get_objects())


@pytest.mark.parametrize("callers", ["one caller", "a caller each"])
async def test_an_open_stream_keeps_few_objects(alice: Any, make_token: Callable[..., str], callers: str) -> None:
    """One caller's streams share what re-checks it; streams of different callers each keep a slimmed request."""
    doc = await in_thread(lambda: Document.objects.create(owner=alice, title="A", body="a"))
    tokens = [await in_thread(make_token, alice) for _ in range(1 if callers == "one caller" else STREAMS + 3)]
    app = application()
    body = listen_body(1, {"resourceSubscriptions": [f"learn://documents/{doc.pk}"]})

    async def listen(index: int) -> Exchange:
        token = tokens[index % len(tokens)]
        exchange = await Exchange(app, scope("POST", listen_headers(token))).start(body)
        assert exchange.status == 200
        assert (await exchange.event())["method"] == ACKNOWLEDGED
        return exchange

    first = [await listen(index) for index in range(3)]  # the hub, caches (and one caller's access): not per stream
    before = tracked()
    opened = [await listen(index) for index in range(3, STREAMS + 3)]
    with_streams = tracked()
    assert streams.open_stream_count() == STREAMS + len(first)
    # The client's share: what the test keeps per exchange once its stream has ended (the server side is gone).
    for exchange in opened:
        await exchange.disconnect()
    client = (tracked() - before) / STREAMS
    per_stream = (with_streams - before) / STREAMS - client
    for exchange in first:
        await exchange.disconnect()
    assert per_stream <= TRACKED_PER_STREAM, f"{per_stream:.1f} tracked objects per open stream (client {client:.1f})"
