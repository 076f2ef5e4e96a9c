"""What Django's PostgreSQL connection puts on the wire: libpq's own trace of the protocol messages, and a fixture
that runs a test under both of Django's parameter bindings (client side, its default; server side, which lets
psycopg prepare statements)."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from django.db import connection


@dataclass
class WireTrace:
    """The protocol messages exchanged inside a :func:`wire_trace` block, one line each (``F``: sent, ``B``:
    received), as libpq traces them."""

    lines: list[str] = field(default_factory=list)

    @property
    def round_trips(self) -> int:
        """Every simple query and every extended-protocol sync is answered by one ``ReadyForQuery``."""
        return sum(1 for line in self.lines if line.startswith("B\t") and "\tReadyForQuery" in line)

    def sent(self, kind: str) -> list[str]:
        """The sent messages of one kind (``Query``, ``Parse``, ``Bind``, ``Sync``)."""
        return [line for line in self.lines if line.startswith("F\t") and f"\t{kind}\t" in f"{line}\t"]


@contextlib.contextmanager
def wire_trace() -> Iterator[WireTrace]:
    """Trace the default connection's protocol messages for the block (PostgreSQL with psycopg 3)."""
    from psycopg import pq

    connection.ensure_connection()
    pgconn = connection.connection.pgconn
    trace = WireTrace()
    with tempfile.TemporaryFile() as sink:
        pgconn.trace(sink.fileno())
        pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        try:
            yield trace
        finally:
            pgconn.untrace()
            sink.seek(0)
            trace.lines.extend(sink.read().decode(errors="replace").splitlines())


@pytest.fixture(params=["client", "server"])
def binding(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run the test with client-side binding (Django's default) and again with server-side binding and psycopg
    preparing every statement from its second run. Needs ``transaction=True``: the connection is reopened."""
    if connection.vendor != "postgresql":
        pytest.skip("parameter binding is a PostgreSQL setting")
    options = connection.settings_dict.setdefault("OPTIONS", {})
    saved = dict(options)
    connection.close()
    if request.param == "server":
        options.update(server_side_binding=True, prepare_threshold=1)
    else:
        options.pop("server_side_binding", None)
        options.pop("prepare_threshold", None)
    try:
        yield request.param
    finally:
        connection.close()
        options.clear()
        options.update(saved)
