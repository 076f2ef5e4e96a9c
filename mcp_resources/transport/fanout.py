"""One channel per process: the channel layer's messages routed to the open streams of this process.

Every stream served by an event loop shares one channel of the layer (one receive loop, one buffer of the layer's
``capacity``), and a group is joined once per process however many streams subscribe to it. For each change:

1. Its number is checked (:mod:`mcp_resources.subscriptions.broker` numbers publications per publisher and group).
   A number skipped and not filled within :data:`LOSS_GRACE_SECONDS` means the layer dropped a message (this
   process's channel was over the layer's ``capacity``): every stream of that group is ended with a final
   message, so its client subscribes again and re-reads instead of missing an update silently. A publisher's fence
   (its last number, sent once the group falls silent) reveals the last publications lost before a silence.
2. The streams that want it are grouped by caller (the same credentials on the same server): one access decision
   per caller, every caller decided in one thread hop, in one query where the template allows
   (:meth:`~mcp_resources.server.MCPServer.may_read_each`). At most :data:`CONCURRENT_DECISIONS` URIs are decided
   at once; a change of a URI whose update is still waiting joins it as a count (decided once, delivered as many
   times), so the receive loop never waits and the layer's buffer stays empty. Messages reach the streams in the
   order they arrived (an update before the list change published after it).
3. The notification is queued on each stream that may read it; a stream's queue holds at most
   ``STREAM_QUEUE_SIZE`` messages, and a stream whose queue is full is ended with a final message.

Every ended stream is logged (a warning) and counted in :func:`delivery_counts`.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async
from django.core import signals

from mcp_resources.exceptions import CredentialsRejected
from mcp_resources.subscriptions import broker

if TYPE_CHECKING:
    from mcp_resources.transport.streams import Stream

logger = logging.getLogger("mcp_resources.subscriptions")

LOSS_GRACE_SECONDS = 2.0
"""How long a skipped number may arrive late (publishers on several threads can send out of order)."""
MAX_HOLES = 1024
"""Skipped numbers remembered per publisher and group; a larger gap is a loss at once."""
JOIN_SKEW_SECONDS = 2.0
"""A sequence that began this long after the process joined the group must be seen from its first number."""
CONCURRENT_DECISIONS = 8
"""URIs whose access decisions run at once (each in one worker thread); further changes wait, counted per URI."""
FAILED = "failed"
"""An access decision that raised: the streams concerned end (their clients resynchronise), nothing is withheld."""
TICK_SECONDS = 0.5
RECEIVE_ATTEMPTS = 3
DEFAULT_GROUP_EXPIRY = 86400

counts: Counter[str] = Counter()
"""Delivery counters of this process (see :func:`delivery_counts`)."""


def delivery_counts() -> dict[str, int]:
    """What this process delivered, withheld and ended since it started.

    ``delivered`` notifications written to streams; ``withheld`` updates a caller may no longer read;
    ``lost_messages`` publications the channel layer dropped before they reached this process;
    ``ended_lost``, ``ended_queue_full``, ``ended_credentials``, ``ended_check_failed`` and
    ``ended_layer_failed``: streams ended with a final message for each reason; ``ended_send_timeout``: streams
    whose client stopped reading (closed, as nothing more can reach it).
    """
    return dict(counts)


class Sequence:
    """One publisher's numbers for one group, as this process has seen them."""

    __slots__ = ("high", "holes", "lost")

    def __init__(self, high: int) -> None:
        self.high = high
        self.holes: dict[int, float] = {}  # skipped number -> when it was found missing
        self.lost = 0

    def see(self, seq: int, now: float) -> bool:
        """Record ``seq``; whether its message is new (not a duplicate)."""
        if seq > self.high:
            missing = seq - self.high - 1
            if missing > MAX_HOLES:
                self.lost += missing
            else:
                for number in range(self.high + 1, seq):
                    self.holes[number] = now
            self.high = seq
            return True
        return self.holes.pop(seq, None) is not None

    def expect(self, seq: int, now: float) -> None:
        """A fence: every number up to ``seq`` was published; those not seen yet are missing from now."""
        if seq > self.high:
            self.see(seq, now)
            self.holes[seq] = now

    def overdue(self, now: float) -> int:
        """Forget and count the numbers given up on (and gaps too large to wait for)."""
        late = [number for number, since in self.holes.items() if now - since >= LOSS_GRACE_SECONDS]
        for number in late:
            del self.holes[number]
        lost, self.lost = self.lost + len(late), 0
        return lost


class Fanout:
    """The channel of one event loop on one layer, the groups it joined and the streams of each group."""

    def __init__(self, layer: Any) -> None:
        self.layer = layer
        self.channel = ""
        self.members: dict[str, set[Stream]] = {}
        self.joined_at: dict[str, float] = {}  # group -> wall-clock time this process joined it
        self.sequences: dict[str, dict[tuple[str, float], Sequence]] = {}
        self.receiver: asyncio.Task[None] | None = None
        self.lock = asyncio.Lock()
        self.pipeline: deque[Entry] = deque()  # messages in order of arrival, delivered from the head
        self.undecided: dict[str, Entry] = {}  # URI -> its update in the pipeline whose decision has not started
        self.deciding = 0
        self.renew_at = time.monotonic() + _group_renewal(layer)
        self.closed = False

    async def start(self) -> None:
        if not self.channel:
            self.channel = await self.layer.new_channel()
        if self.receiver is None:
            self.receiver = asyncio.get_running_loop().create_task(self._receive())

    # Membership ----------------------------------------------------------------------------------------------

    async def join(self, stream: Stream, group: str) -> None:
        """Add ``stream`` to ``group``, joining it on the layer if it is the first here."""
        async with self.lock:
            streams = self.members.get(group)
            if streams is None:
                await self.layer.group_add(group, self.channel)
                self.members[group] = streams = set()
                self.joined_at[group] = time.time()
            streams.add(stream)

    async def leave(self, stream: Stream, group: str) -> None:
        """Remove ``stream`` from ``group``; the last one out leaves it on the layer."""
        async with self.lock:
            streams = self.members.get(group)
            if streams is None:
                return
            streams.discard(stream)
            if streams:
                return
            del self.members[group]
            self.joined_at.pop(group, None)
            self.sequences.pop(group, None)
            if self.closed:
                return
            try:
                await self.layer.group_discard(group, self.channel)
            except Exception:
                logger.debug("could not leave %s", group)

    async def send(self, group: str, message: dict[str, Any]) -> None:
        await self.layer.group_send(group, message)

    # Receiving -----------------------------------------------------------------------------------------------

    async def _receive(self) -> None:
        # One receive stays pending across ticks: cancelling a receive can lose a message (channels_redis pops it
        # from Redis, then drops it when cancelled).
        receiving: asyncio.Future[Any] | None = None
        started = 0.0
        failures = 0
        try:
            while True:
                if receiving is None:
                    receiving = asyncio.ensure_future(self.layer.receive(self.channel))
                    started = time.monotonic()
                done, _ = await asyncio.wait({receiving}, timeout=TICK_SECONDS)
                await self._tick()
                if not done:
                    continue
                finished, receiving = receiving, None
                try:
                    message = finished.result()
                except Exception as exc:
                    # A receive that waited a while and then failed is transient (redis-py times out an idle
                    # blocking read); quick repeated failures mean the layer is down.
                    failures = failures + 1 if time.monotonic() - started < 1 else 1
                    if failures >= RECEIVE_ATTEMPTS:
                        raise
                    logger.debug("fan-out: receive failed (%r); receiving again", exc)
                    await asyncio.sleep(0.1 * failures)
                    continue
                failures = 0
                await self._route(message)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("fan-out: the channel layer failed; ending this process's streams")
            self._fail()
        finally:
            if receiving is not None:
                receiving.cancel()

    def _fail(self) -> None:
        self.closed = True
        _forget(self)
        for stream in {stream for streams in self.members.values() for stream in streams}:
            stream.end("layer_failed")

    async def _tick(self) -> None:
        now = time.time()
        for group, publishers in list(self.sequences.items()):
            lost = sum(sequence.overdue(now) for sequence in publishers.values())
            if lost:
                self._lost(group, lost)
        if time.monotonic() >= self.renew_at:
            # Layers forget group members after ``group_expiry``: join again every half of it.
            self.renew_at = time.monotonic() + _group_renewal(self.layer)
            for group in list(self.members):
                await self.layer.group_add(group, self.channel)

    def _lost(self, group: str, lost: int) -> None:
        streams = list(self.members.get(group, ()))
        counts["lost_messages"] += lost
        logger.warning(
            "the channel layer dropped %d message(s) for %d stream(s) of this process (its channel was over the "
            "layer's capacity?); ending those streams so their clients resynchronise",
            lost,
            len(streams),
        )
        for stream in streams:
            stream.end("lost")

    def _fresh(self, group: str, message: dict[str, Any]) -> bool:
        """Check the message's number; whether to deliver it (not a duplicate)."""
        publisher = _publisher(message)
        if publisher is None:
            return True  # not numbered (published by other code): delivered, nothing to check
        origin, since, seq = publisher
        # A sequence that began after this process joined is expected from its first number; one that began
        # before is taken up where it is.
        high = 0 if since > self._joined(group) else seq - 1
        return self._sequence(group, origin, since, high).see(seq, time.time())

    def _fence(self, group: str, message: dict[str, Any]) -> None:
        """A publisher's fence: what it published up to its number and did not arrive is missing."""
        publisher, at = _publisher(message), message.get("at")
        if publisher is None or not isinstance(at, int | float):
            return
        origin, since, seq = publisher
        # A publisher not heard from since this process joined: only what it published after joining counts.
        joined = self._joined(group)
        high = 0 if since > joined else seq - 1 if at > joined else seq
        self._sequence(group, origin, since, high).expect(seq, time.time())

    def _joined(self, group: str) -> float:
        """When this process joined ``group``, give or take the publishers' clock skew."""
        return self.joined_at.get(group, float("inf")) + JOIN_SKEW_SECONDS

    def _sequence(self, group: str, origin: str, since: float, high: int) -> Sequence:
        """The sequence of ``origin`` begun at ``since`` in ``group``; new ones start after ``high``."""
        publishers = self.sequences.setdefault(group, {})
        sequence = publishers.get((origin, since))
        if sequence is None:
            publishers[(origin, since)] = sequence = Sequence(high)
        return sequence

    async def _route(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == broker.UPDATED:
            uri = message.get("uri")
            if not isinstance(uri, str):
                return
            group = broker.uri_group(uri)
            if group not in self.members or not self._fresh(group, message):
                return
            waiting = self.undecided.get(uri)
            if waiting is not None:
                waiting.changes += 1  # decided once with the earlier change, delivered as many times
                return
            self.undecided[uri] = entry = Entry(group, uri=uri)
            self.pipeline.append(entry)
            self._start_decisions()
        elif kind == broker.LIST_CHANGED:
            group = broker.LIST_CHANGED_GROUP
            if group in self.members and self._fresh(group, message):
                self._append_ready(Entry(group, message=message))
        elif kind == broker.FENCE:
            fenced = message.get("group")
            if isinstance(fenced, str) and fenced in self.members:
                self._fence(fenced, message)
        elif kind == broker.SESSION_CONTROL:
            session = message.get("group")
            if isinstance(session, str) and session in self.members and self._fresh(session, message):
                self._append_ready(Entry(session, message=message))

    def _append_ready(self, entry: Entry) -> None:
        entry.ready = True
        self.pipeline.append(entry)
        self._flush()

    def _start_decisions(self) -> None:
        """Start deciding waiting updates, oldest first, while fewer than CONCURRENT_DECISIONS are under way."""
        for entry in self.pipeline:
            if self.deciding >= CONCURRENT_DECISIONS:
                return
            if entry.uri is None or entry.ready or entry.task is not None:
                continue
            del self.undecided[entry.uri]
            entry.streams = [stream for stream in self.members.get(entry.group, ()) if entry.uri in stream.plan.uris]
            self.deciding += 1
            entry.task = asyncio.get_running_loop().create_task(self._decide(entry))

    async def _decide(self, entry: Entry) -> None:
        try:
            assert entry.uri is not None
            entry.decisions = await decide_for(entry.uri, entry.streams)
        except Exception:
            logger.exception("access checks for %s failed", (entry.uri or "")[:200])
            entry.decisions = None
        finally:
            entry.ready = True
            self.deciding -= 1
            self._flush()
            self._start_decisions()

    def _flush(self) -> None:
        """Deliver the decided entries at the head of the pipeline: each stream gets its messages in order."""
        while self.pipeline and self.pipeline[0].ready:
            entry = self.pipeline.popleft()
            if entry.uri is not None:
                _deliver(entry)
            elif entry.message is not None and entry.message.get("type") == broker.LIST_CHANGED:
                for stream in list(self.members.get(entry.group, ())):
                    if stream.plan.list_changed:
                        stream.offer(stream.notification("notifications/resources/list_changed"))
            elif entry.message is not None:
                for stream in list(self.members.get(entry.group, ())):
                    stream.control(entry.message)


def _publisher(message: dict[str, Any]) -> tuple[str, float, int] | None:
    """A numbered message's ``(origin, since, seq)``; ``None`` when it is not numbered."""
    origin, since, seq = message.get("origin"), message.get("since"), message.get("seq")
    if not isinstance(origin, str) or not isinstance(since, int | float) or type(seq) is not int:
        return None
    return origin, since, seq


@dataclass(eq=False)
class Entry:
    """One message of the layer on its way to the streams: an update waiting for its access decision, or a list
    change or a session's control message (ready at once). Entries are delivered in the order they arrived."""

    group: str
    uri: str | None = None
    message: dict[str, Any] | None = None
    changes: int = 1
    ready: bool = False
    streams: list[Stream] = field(default_factory=list)
    task: asyncio.Task[None] | None = None
    decisions: dict[Any, bool | str | None] | None = None


async def decide_for(uri: str, streams: list[Stream]) -> dict[Any, bool | str | None]:
    """One decision per caller of ``streams`` on ``uri``, all in one worker-thread hop."""
    representatives: dict[Any, Stream] = {}
    for stream in streams:
        representatives.setdefault(_caller(stream), stream)
    keys = list(representatives)
    if not keys:
        return {}
    checks = [representatives[key].plan.check for key in keys]
    outcome = await sync_to_async(decide, thread_sensitive=False)(uri, checks)
    return dict(zip(keys, outcome, strict=True))


def _deliver(entry: Entry) -> None:
    """Queue ``entry.changes`` notifications on each of its streams that may read its URI; end the others that
    must end."""
    uri = entry.uri
    assert uri is not None
    for stream in entry.streams:
        allowed = FAILED if entry.decisions is None else entry.decisions.get(_caller(stream), FAILED)
        if allowed is None:
            stream.end("credentials")
        elif allowed is FAILED:
            stream.end("check_failed")
        elif not allowed:
            counts["withheld"] += entry.changes
            logger.debug("stream %s: access to %s is gone; update withheld", stream.id, uri[:200])
        elif uri in stream.plan.uris:
            data = stream.notification("notifications/resources/updated", {"uri": uri})
            for _ in range(entry.changes):
                stream.offer(data)


def _caller(stream: Stream) -> Any:
    caller = stream.plan.caller
    return ("stream", stream.id) if caller is None else caller


def decide(uri: str, checks: list[Callable[[str], bool]]) -> list[bool | str | None]:
    """Each check's decision on ``uri``: ``True``, ``False``, ``None`` (its credentials are no longer accepted) or
    :data:`FAILED` (the check raised: logged).

    Checks whose type offers ``check_each(uri, checks)`` (the endpoint's) are decided together; others one by
    one. Runs in a worker thread, as one request for Django (stale database connections are closed around it).
    """
    signals.request_started.send(sender=Fanout)
    try:
        outcome: list[bool | str | None] = [FAILED] * len(checks)
        batches: dict[Any, list[int]] = {}
        for index, check in enumerate(checks):
            batches.setdefault(getattr(type(check), "check_each", None), []).append(index)
        for check_each, indexes in batches.items():
            if check_each is not None:
                try:
                    decided = check_each(uri, [checks[i] for i in indexes])
                except Exception:
                    logger.exception("access checks for %s failed", uri[:200])
                    continue
                for index, allowed in zip(indexes, decided, strict=True):
                    outcome[index] = allowed
                continue
            for index in indexes:
                try:
                    outcome[index] = bool(checks[index](uri))
                except CredentialsRejected:
                    outcome[index] = None
                except Exception:
                    logger.exception("access check for %s failed", uri[:200])
        return outcome
    finally:
        signals.request_finished.send(sender=Fanout)


_fanouts: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Fanout] = weakref.WeakKeyDictionary()


async def get_fanout() -> Fanout:
    """The fan-out of the running loop on the configured layer (created, with its channel, on first use)."""
    loop = asyncio.get_running_loop()
    layer = broker.get_layer()
    fanout = _fanouts.get(loop)
    if fanout is None or fanout.layer is not layer or fanout.closed:
        if fanout is not None and fanout.receiver is not None:
            fanout.receiver.cancel()  # the layer was reconfigured (tests): the old one serves nothing new
        fanout = _fanouts[loop] = Fanout(layer)
    await fanout.start()
    return fanout


def _forget(fanout: Fanout) -> None:
    for loop, known in list(_fanouts.items()):
        if known is fanout:
            del _fanouts[loop]


async def stop_fanout() -> None:
    """Stop the running loop's fan-out (at shutdown, once its streams have ended)."""
    fanout = _fanouts.pop(asyncio.get_running_loop(), None)
    if fanout is not None and fanout.receiver is not None:
        fanout.closed = True
        fanout.receiver.cancel()


def _group_renewal(layer: Any) -> float:
    """Seconds until the groups are joined again: half the layer's ``group_expiry``."""
    expiry = getattr(layer, "group_expiry", DEFAULT_GROUP_EXPIRY)
    try:
        return max(0.5, float(expiry) / 2)
    except (TypeError, ValueError):
        return DEFAULT_GROUP_EXPIRY / 2
