"""Fixtures of the teams project's suite."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest

import live


@pytest.fixture(scope="session", autouse=True)
def _fast_password_hashing() -> Iterator[None]:
    from django.test.utils import override_settings

    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        yield


@pytest.fixture
def seeded(db: None) -> dict[str, Any]:
    """``manage.py seed_teams`` in the test database: users ann, ben and cat, and what they may see."""
    from django.core.management import call_command

    out = io.StringIO()
    call_command("seed_teams", "--tickets", "45", stdout=out)
    made: dict[str, Any] = json.loads(out.getvalue())
    return made


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[live.Project]:
    """The teams project served live (30 tickets), in a fresh database of this module's own. A module that needs
    another setup (a Redis database, more tickets) defines its own ``project``."""
    with live.project(tmp_path_factory.mktemp("teams"), tickets=30) as made:
        yield made
