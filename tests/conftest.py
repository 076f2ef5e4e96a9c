"""Shared fixtures. ``MCP_TEST_DB=postgres`` runs the suite on PostgreSQL (required when ``CI`` is set)."""

from __future__ import annotations

import os

import pytest

from tests.wire_support import binding  # noqa: F401 (a fixture for every test module)


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("MCP_TEST_DB") != "postgres":
        return
    import psycopg

    try:
        psycopg.connect("host=127.0.0.1 port=5432 dbname=test user=postgres connect_timeout=3").close()
    except psycopg.OperationalError as exc:
        if os.environ.get("CI"):
            raise pytest.UsageError(f"CI requires PostgreSQL on 127.0.0.1:5432: {exc}") from exc
        config._mcp_skip_reason = f"PostgreSQL is not reachable on 127.0.0.1:5432 ({exc})"  # type: ignore[attr-defined]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = getattr(config, "_mcp_skip_reason", None)
    if reason:
        for item in items:
            item.add_marker(pytest.mark.skip(reason=reason))
