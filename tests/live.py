"""Live servers for end-to-end tests: a project in a server subprocess on a free loopback port, with its own
fresh database (a temporary SQLite file, or a dedicated PostgreSQL database when ``MCP_TEST_DB=postgres``) and,
where asked, its own Redis database.

Used through the fixtures of ``tests/conftest.py``; a module that needs a particular setup builds a
:class:`Project` and starts :class:`Server` processes on it.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
MANAGE = ROOT / "testproject" / "manage.py"
REDIS_HOST, REDIS_PORT = "127.0.0.1", 6379
_INHERITED_OUT = ("MCP_TEST_DB", "PGDATABASE", "MCP_DEMO_DB", "DJANGO_SETTINGS_MODULE", "DJANGO_DEBUG", "MCP_REDIS_URL")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def manage(env: dict[str, str], *args: str, timeout: float = 300) -> str:
    """Run ``testproject/manage.py`` with ``env``; its stdout, or ``RuntimeError`` with both streams."""
    completed = subprocess.run(
        [sys.executable, str(MANAGE), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"manage.py {args[0]} failed:\n{completed.stdout}\n{completed.stderr}")
    return completed.stdout


@contextlib.contextmanager
def postgres_database(prefix: str) -> Iterator[str]:
    """A new, empty PostgreSQL database on 127.0.0.1:5432, dropped afterwards; yields its name."""
    import psycopg
    from psycopg import sql

    name = f"{prefix}_{os.getpid()}_{secrets.token_hex(3)}"

    def admin() -> psycopg.Connection[Any]:
        return psycopg.connect("host=127.0.0.1 port=5432 dbname=postgres user=postgres", autocommit=True)

    with admin() as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield name
    finally:
        with admin() as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def redis_client(db: int) -> Any:
    import redis

    return redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=db, socket_connect_timeout=3, socket_timeout=10)


def require_redis(db: int = 0) -> str:
    """The URL of Redis database ``db``; skips the test without Redis (fails under ``CI``)."""
    import redis

    try:
        redis_client(db).ping()
    except redis.RedisError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI requires Redis on {REDIS_HOST}:{REDIS_PORT}: {exc}")
        pytest.skip(f"Redis is not reachable on {REDIS_HOST}:{REDIS_PORT} ({exc})")
    return f"redis://{REDIS_HOST}:{REDIS_PORT}/{db}"


@contextlib.contextmanager
def redis_database(db: int) -> Iterator[str]:
    """Redis database ``db``, empty before and after (stale groups or sessions would leak across runs)."""
    url = require_redis(db)
    client = redis_client(db)
    client.flushdb()
    try:
        yield url
    finally:
        client.flushdb()


@dataclass
class Project:
    """A project's environment: its settings module, its own database, and ``manage.py`` run against them."""

    env: dict[str, str]
    workdir: Path
    tokens: dict[tuple[str, str, str], str] = field(default_factory=dict)

    def manage(self, *args: str, env: dict[str, str] | None = None) -> str:
        return manage({**self.env, **(env or {})}, *args)

    def shell(self, code: str) -> str:
        """Run ``code`` in ``manage.py shell`` (another process, as a worker would); its last line of output."""
        lines = self.manage("shell", "--no-imports", "-c", code).strip().splitlines()
        return lines[-1] if lines else ""

    def token(self, user: str, resource: str, scope: str = "documents:read") -> str:
        """An access token of ``user`` bound to ``resource`` (``manage.py mcp_token``), made once."""
        key = (user, resource, scope)
        if key not in self.tokens:
            self.tokens[key] = self.manage("mcp_token", "--user", user, "--scope", scope, "--resource", resource).strip()
        return self.tokens[key]

    def ids(self, model: str, user: str) -> list[int]:
        """The primary keys of ``user``'s rows of the demo's ``model`` (``Document`` or ``Note``), in order."""
        code = (
            f"from testproject.library.models import {model}; import json; "
            f"print(json.dumps(list({model}.objects.filter(owner__username={user!r})"
            ".order_by('pk').values_list('pk', flat=True))))"
        )
        return list(json.loads(self.shell(code)))


@contextlib.contextmanager
def project(
    workdir: Path,
    *,
    settings: str = "testproject.settings",
    redis_url: str | None = None,
    demo_data: tuple[str, ...] | None = (),
    **env: str,
) -> Iterator[Project]:
    """A migrated project with a fresh database; ``demo_data`` are the arguments of ``load_demo_data`` (``None``:
    no demo data)."""
    base = {key: value for key, value in os.environ.items() if key not in _INHERITED_OUT}
    base.update(
        DJANGO_SETTINGS_MODULE=settings,
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), base.get("PYTHONPATH")])),
        **env,
    )
    if redis_url:
        base["MCP_REDIS_URL"] = redis_url
    with contextlib.ExitStack() as stack:
        if os.environ.get("MCP_TEST_DB") == "postgres":
            name = stack.enter_context(postgres_database("mcp_live"))
            base.update(MCP_TEST_DB="postgres", PGDATABASE=name)
        else:
            base["MCP_DEMO_DB"] = str(workdir / "project.sqlite3")
        created = Project(env=base, workdir=workdir)
        created.manage("migrate", "--verbosity", "0")
        if demo_data is not None:
            created.manage("load_demo_data", *demo_data)
        yield created


@dataclass
class Server:
    """One server process serving a :class:`Project` on loopback: uvicorn (ASGI) or gunicorn (WSGI)."""

    project: Project
    name: str = "server"
    kind: str = "uvicorn"
    port: int = field(default_factory=free_port)
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """The MCP endpoint."""
        return f"{self.base}/mcp"

    @property
    def log(self) -> Path:
        return self.project.workdir / f"{self.name}.log"

    def command(self, *extra: str) -> list[str]:
        if self.kind == "gunicorn":
            return [
                *(sys.executable, "-m", "gunicorn", "testproject.wsgi:application"),
                *("--bind", f"127.0.0.1:{self.port}", "--workers", "1", "--threads", "2", "--log-level", "warning"),
                *extra,
            ]
        return [
            *(sys.executable, "-m", "uvicorn", "testproject.asgi:application"),
            *("--host", "127.0.0.1", "--port", str(self.port), "--log-level", "warning", *extra),
        ]

    def start(self, *extra: str, timeout: float = 60) -> Server:
        """Start the process and wait until it accepts connections."""
        env = {**self.project.env, "MCP_RESOURCE_URI": self.url, **self.env}
        with self.log.open("ab") as log_file:
            self.process = subprocess.Popen(
                self.command(*extra), cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.process.returncode}:\n{self.logged()}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return self
            time.sleep(0.05)
        raise RuntimeError(f"{self.name} did not start:\n{self.logged()}")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=15)

    def logged(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def token(self, user: str, scope: str = "documents:read") -> str:
        """An access token of ``user`` bound to this server's endpoint."""
        return self.project.token(user, self.url, scope)
