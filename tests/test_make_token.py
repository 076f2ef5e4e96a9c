"""``make token`` (and ``make manage``): the demo's second-terminal commands honour ``PORT`` and ``DEMO_DB``.

Runs ``make`` in the repository against a demo database of its own in a temporary directory (SQLite, as ``make
demo`` makes it), with this test run's virtualenv (``VENV=``, and ``-o`` so that make never reinstalls it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import live

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")

VENV = Path(sys.prefix)
_OUT = (
    "MCP_TEST_DB",
    "PGDATABASE",
    "MCP_DEMO_DB",
    "DJANGO_SETTINGS_MODULE",
    "MCP_RESOURCE_URI",
    "MAKEFLAGS",
    "MAKELEVEL",
    "MFLAGS",
    "DEMO_DB",
    "PORT",
    "SCOPE",
)


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of a user's second terminal: none of the test run's database settings, none of an outer
    make's (``make test`` runs this suite)."""
    env = {key: value for key, value in os.environ.items() if key not in _OUT}
    env.update(extra)
    return env


def make(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", "-s", "-o", str(VENV / ".installed"), f"VENV={VENV}", *args],
        cwd=live.ROOT,
        env=env or clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated demo database with alice and bob, where ``make demo DEMO_DB=...`` would leave it."""
    path = tmp_path_factory.mktemp("demo") / "other.sqlite3"
    env = clean_env(MCP_DEMO_DB=str(path), DJANGO_SETTINGS_MODULE="testproject.settings")
    live.manage(env, "migrate", "--verbosity", "0")
    live.manage(env, "load_demo_data", "--alice", "1", "--bob", "1", "--notes", "0")
    return path


def stored(demo_db: Path, token: str) -> dict[str, object]:
    """The stored row of ``token`` in ``demo_db``: its user, scope and resource."""
    env = clean_env(MCP_DEMO_DB=str(demo_db), DJANGO_SETTINGS_MODULE="testproject.settings")
    code = (
        "import hashlib, json; from oauth2_provider.models import AccessToken; "
        f"t = AccessToken.objects.get(token_checksum=hashlib.sha256({token!r}.encode()).hexdigest()); "
        "print(json.dumps({'user': t.user.username, 'scope': t.scope, 'resource': t.resource}))"
    )
    return json.loads(live.manage(env, "shell", "--no-imports", "-c", code).strip().splitlines()[-1])


def test_make_token_uses_the_demo_database_and_port(demo_db: Path) -> None:
    completed = make("token", "USER=bob", "PORT=9123", f"DEMO_DB={demo_db}")
    assert completed.returncode == 0, completed.stderr
    # Only the token on standard output: TOKEN=$(make -s token USER=bob) works.
    token = completed.stdout.strip()
    assert completed.stdout == token + "\n"
    assert len(token.split()) == 1
    assert stored(demo_db, token) == {
        "user": "bob",
        "scope": "documents:read",
        "resource": ["http://127.0.0.1:9123/mcp"],
    }


def test_make_token_defaults_to_alice_not_the_login_name(demo_db: Path) -> None:
    # The shell's USER is the login name: only USER= on make's command line chooses the token's owner.
    completed = make("token", f"DEMO_DB={demo_db}", "SCOPE=documents", env=clean_env(USER="bob"))
    assert completed.returncode == 0, completed.stderr
    assert stored(demo_db, completed.stdout.strip()) == {
        "user": "alice",
        "scope": "documents",
        "resource": ["http://127.0.0.1:8000/mcp"],
    }


def test_make_token_refuses_a_scope_nothing_declares(demo_db: Path) -> None:
    completed = make("token", f"DEMO_DB={demo_db}", "SCOPE=bogus")
    assert completed.returncode != 0
    assert completed.stdout == ""
    assert "unknown scope 'bogus'" in completed.stderr
    assert "Traceback" not in completed.stderr


def test_make_token_without_the_demo_database_says_so(tmp_path: Path) -> None:
    missing = tmp_path / "never-made.sqlite3"
    completed = make("token", "PORT=9123", f"DEMO_DB={missing}")
    assert completed.returncode != 0
    assert completed.stdout == ""
    assert f"No demo database at {missing}: run 'make demo PORT=9123 DEMO_DB={missing}' first." in completed.stderr
    assert "Traceback" not in completed.stderr
    # No empty database file is left behind.
    assert not missing.exists()


def test_make_manage_runs_a_command_on_the_demo_database(demo_db: Path) -> None:
    completed = make("manage", f"DEMO_DB={demo_db}", "ARGS=mcp_list --user bob --prefix learn://documents/")
    assert completed.returncode == 0, completed.stderr
    [line] = completed.stdout.splitlines()
    assert line.startswith("learn://documents/")
    assert line.endswith("\tBob's document 1")
