"""``manage.py mcp_cursor_key``: a fresh secret for ``CURSOR_KEYS`` that every process can share."""

from __future__ import annotations

import re
import subprocess
import sys
from io import StringIO

import pytest
from django.core.management import call_command

from mcp_resources.exceptions import InvalidCursor
from mcp_resources.protocol.cursors import Binding, CursorCodec, make_cursor, read_cursor
from tests.live import MANAGE, ROOT

BINDING = Binding("resources/list", "", "alice", "sources")


def new_key() -> str:
    out = StringIO()
    call_command("mcp_cursor_key", stdout=out)
    assert out.getvalue().count("\n") == 1
    assert out.getvalue().endswith("\n")
    return out.getvalue().strip()


def test_prints_one_url_safe_key_of_256_bits():
    key = new_key()
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}", key), key
    assert new_key() != key


def test_the_key_opens_the_cursors_of_every_process_holding_it():
    key = new_key()
    # Two processes (two codecs) configured with the same key: one seals, the other opens.
    cursor = make_cursor(CursorCodec([key]), BINDING, ["documents", 42], 1_700_000_000)
    assert read_cursor(CursorCodec([key]), cursor, BINDING, 900, now=1_700_000_001) == (["documents", 42], 1.7e9)
    # A process with another key refuses it, as a worker with its own random key does.
    with pytest.raises(InvalidCursor):
        read_cursor(CursorCodec([new_key()]), cursor, BINDING, 900, now=1_700_000_001)


def test_runs_from_the_command_line_without_a_database():
    # Printed before the deployment is complete: no system checks, no database.
    completed = subprocess.run(
        [sys.executable, str(MANAGE), "mcp_cursor_key"],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "MCP_DEMO_DB": "/nonexistent/dir/db.sqlite3", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}\n", completed.stdout)
    assert completed.stderr == ""
