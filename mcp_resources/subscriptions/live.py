"""Live resources: a code-registered resource's optional ``subscribe(on_change)`` push source.

``on_change`` takes no value: the server re-reads ``get()`` and compares the serialized value with the last one
dispatched for that URI only (A,A,A pushes once; A,B,A three times). A value that cannot be serialized is pushed
and the baseline dropped (fail open). Re-registering a URI tears the previous subscription down first and clears
the baseline, so the next push always goes out.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from mcp_resources.protocol import jsonrpc
from mcp_resources.resources import normalize_contents

if TYPE_CHECKING:
    from mcp_resources.resources import RegisteredResource

logger = logging.getLogger("mcp_resources.subscriptions")


class LiveSubscription:
    """The push side of one registered resource: its teardown and its comparison baseline."""

    def __init__(self, resource: RegisteredResource, push: Callable[[str], None]) -> None:
        self.resource = resource
        self.push = push
        self.teardown: Callable[[], None] | None = None
        self.baseline: bytes | None = None
        self.pushes = 0
        self.stopped = False
        self._lock = threading.Lock()

    def start(self) -> None:
        subscribe = self.resource.subscribe
        if subscribe is None:
            return
        teardown = subscribe(self.on_change)
        if teardown is None:
            logger.warning(
                "subscribe() of %s returned no teardown: the subscription can never be torn down and leaks",
                self.resource.uri,
            )
        self.teardown = teardown

    def stop(self) -> None:
        teardown, self.teardown = self.teardown, None
        with self._lock:
            # A source that still calls ``on_change`` (no teardown, or a late callback) pushes nothing any more.
            self.stopped = True
            self.baseline = None
        if teardown is not None:
            try:
                teardown()
            except Exception:
                logger.exception("teardown of %s failed", self.resource.uri)

    def on_change(self) -> None:
        """Re-read ``get()``; push unless the serialized value equals the last dispatched one."""
        uri = self.resource.uri
        if self.stopped:
            logger.debug("push of %s ignored: its registration was replaced or removed", uri)
            return
        serialized: bytes | None = None
        try:
            value = self.resource.get()
        except Exception:
            logger.exception("get() of %s failed on a push; pushing and dropping the baseline", uri)
        else:
            try:
                serialized = jsonrpc.dumps(normalize_contents(value, uri=uri, mime_type=self.resource.mime_type))
            except Exception as exc:
                logger.debug("push of %s: value cannot be serialized (%s); pushing and dropping the baseline", uri, exc)
        with self._lock:
            if self.stopped:
                return
            if serialized is not None and serialized == self.baseline:
                logger.debug("push suppressed (value unchanged) for %s", uri)
                return
            self.baseline = serialized
            self.pushes += 1
        self.push(uri)
