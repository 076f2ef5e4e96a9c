"""Live servers for end-to-end tests: a project in a server subprocess on a free loopback port, with its own
fresh database (a temporary SQLite file, or a dedicated PostgreSQL database when ``MCP_TEST_DB=postgres``) and,
where asked, its own Redis database.

Used through the fixtures of ``tests/conftest.py`` (``demo_project``, ``demo_server``); a module that needs another
setup builds a :class:`Project` with :func:`project` and starts :class:`Server` processes on it::

    with live.redis_database() as redis_url, live.project(tmp_path, redis_url=redis_url) as project:
        server = live.Server(project, kind="uvicorn").start()   # or kind="gunicorn" (WSGI); workers=2 for two
        token = server.token("alice")                            # bound to server.url
        ...
        server.stop()

A database is migrated and loaded with the demo data once per test session and settings: every project starts
from a copy of it (a file copy on SQLite, ``CREATE DATABASE ... TEMPLATE`` on PostgreSQL), so it is as fresh as a
new one without paying for the migrations again.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import http.client
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
MANAGE = ROOT / "testproject" / "manage.py"
REDIS_HOST, REDIS_PORT = "127.0.0.1", 6379
POSTGRES_ADMIN = "host=127.0.0.1 port=5432 dbname=postgres user=postgres"
_INHERITED_OUT = ("MCP_TEST_DB", "PGDATABASE", "MCP_DEMO_DB", "DJANGO_SETTINGS_MODULE", "DJANGO_DEBUG", "MCP_REDIS_URL")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def on_postgres() -> bool:
    """Whether the suite runs on PostgreSQL (``MCP_TEST_DB=postgres``)."""
    return os.environ.get("MCP_TEST_DB") == "postgres"


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


# PostgreSQL ------------------------------------------------------------------------------------------------


def _postgres_admin() -> Any:
    import psycopg

    return psycopg.connect(POSTGRES_ADMIN, autocommit=True)


def _create_postgres_database(name: str, template: str | None = None) -> None:
    from psycopg import sql

    statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
    if template is not None:
        statement = sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(name), sql.Identifier(template))
    with _postgres_admin() as conn:
        conn.execute(statement)


def _drop_postgres_database(name: str) -> None:
    from psycopg import sql

    with _postgres_admin() as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _database_name(prefix: str) -> str:
    return f"{prefix}_{os.getpid()}_{secrets.token_hex(3)}"


@contextlib.contextmanager
def postgres_database(prefix: str, *, template: str | None = None) -> Iterator[str]:
    """A new PostgreSQL database on 127.0.0.1:5432 (empty, or a copy of ``template``), dropped afterwards; yields
    its name."""
    name = _database_name(prefix)
    _create_postgres_database(name, template)
    try:
        yield name
    finally:
        _drop_postgres_database(name)


# Redis -----------------------------------------------------------------------------------------------------


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


CLAIMS_DB = 15
"""The Redis database holding which database each running test session uses (``redis_database()``)."""
CLAIMABLE = range(1, CLAIMS_DB)
CLAIM_SECONDS = 1800


@contextlib.contextmanager
def redis_database(db: int | None = None) -> Iterator[str]:
    """A Redis database of the caller's own, empty before and after (stale groups or sessions would leak across
    runs); yields its URL. Skips without Redis (fails under ``CI``).

    Without ``db``, the first of databases 1-14 that no other test session holds: each is claimed in database 15
    (a key set only if absent, expiring after half an hour should its holder die), so test sessions running at once
    on one machine never share a channel layer or a session cache.
    """
    require_redis(CLAIMS_DB)
    with contextlib.ExitStack() as stack:
        if db is None:
            db = stack.enter_context(_claimed_database())
        url = require_redis(db)
        client = redis_client(db)
        stack.callback(client.close)
        client.flushdb()
        stack.callback(client.flushdb)
        yield url


@contextlib.contextmanager
def _claimed_database() -> Iterator[int]:
    claims = redis_client(CLAIMS_DB)
    holder = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
    try:
        for db in CLAIMABLE:
            key = f"mcp-tests:redis-db:{db}"
            if claims.set(key, holder, nx=True, ex=CLAIM_SECONDS):
                break
        else:
            raise RuntimeError(f"every Redis database in {CLAIMABLE} is held by another test session")
        try:
            yield db
        finally:
            if claims.get(key) == holder.encode():
                claims.delete(key)
    finally:
        claims.close()


# Projects --------------------------------------------------------------------------------------------------


def _base_env(settings: str) -> dict[str, str]:
    base = {key: value for key, value in os.environ.items() if key not in _INHERITED_OUT}
    base.update(
        DJANGO_SETTINGS_MODULE=settings,
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), base.get("PYTHONPATH")])),
    )
    return base


_templates: dict[tuple[Any, ...], str] = {}
"""Migrated databases with their demo data, one per settings module and ``demo_data``: a SQLite file's path or a
PostgreSQL database's name. Made on first use, removed when the test process exits."""


def _template(settings: str, demo_data: tuple[str, ...] | None) -> str:
    """The template database for ``settings`` and ``demo_data``: migrated (a copy of the migrated one when there is
    demo data), then loaded."""
    key = (on_postgres(), settings, demo_data)
    if key in _templates:
        return _templates[key]
    migrated = None if demo_data is None else _template(settings, None)
    env = _base_env(settings)
    if on_postgres():
        location = _database_name("mcp_live_template")
        _create_postgres_database(location, migrated)
        atexit.register(_drop_postgres_database, location)
        env.update(MCP_TEST_DB="postgres", PGDATABASE=location)
    else:
        directory = tempfile.mkdtemp(prefix="mcp-live-template-")
        atexit.register(shutil.rmtree, directory, True)
        location = str(Path(directory) / "template.sqlite3")
        if migrated is not None:
            shutil.copyfile(migrated, location)
        env["MCP_DEMO_DB"] = location
    if demo_data is None:
        manage(env, "migrate", "--verbosity", "0")
    else:
        manage(env, "load_demo_data", *demo_data)
    _templates[key] = location
    return location


@dataclass
class Project:
    """A project's environment: its settings module, its own database, and ``manage.py`` run against them."""

    env: dict[str, str]
    workdir: Path
    tokens: dict[tuple[str, str, str], str] = field(default_factory=dict)

    @property
    def database(self) -> dict[str, str]:
        """The project's database as a ``DATABASES`` entry's ``ENGINE`` and ``NAME`` (for the test process)."""
        if self.env.get("MCP_TEST_DB") == "postgres":
            return {"ENGINE": "django.db.backends.postgresql", "NAME": self.env["PGDATABASE"]}
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": self.env["MCP_DEMO_DB"]}

    def manage(self, *args: str, env: dict[str, str] | None = None) -> str:
        return manage({**self.env, **(env or {})}, *args)

    def shell(self, code: str) -> str:
        """Run ``code`` in ``manage.py shell`` (another process, as a worker would); its last line of output."""
        lines = self.manage("shell", "--no-imports", "-c", code).strip().splitlines()
        return lines[-1] if lines else ""

    def token(self, user: str, resource: str, scope: str = "documents:read") -> str:
        """An access token of ``user`` bound to ``resource`` (``manage.py mcp_token``), made once."""
        return self.make_tokens(resource, user, scope=scope)[user]

    def make_tokens(self, resource: str, *users: str, scope: str = "documents:read") -> dict[str, str]:
        """Access tokens of ``users`` bound to ``resource``, made once each by the ``mcp_token`` command (those
        not made yet in one ``manage.py shell``: every process start costs a second)."""
        missing = [user for user in dict.fromkeys(users) if (user, resource, scope) not in self.tokens]
        if missing:
            code = (
                "import io, json; from django.core.management import call_command\n"
                "def token(user):\n"
                "    out = io.StringIO()\n"
                f"    call_command('mcp_token', user=user, scope={scope!r}, resource=[{resource!r}], stdout=out)\n"
                "    return out.getvalue().strip()\n"
                f"print(json.dumps({{user: token(user) for user in {missing!r}}}))"
            )
            for user, token in json.loads(self.shell(code)).items():
                self.tokens[(user, resource, scope)] = token
        return {user: self.tokens[(user, resource, scope)] for user in users}

    def ids(self, model: str, user: str) -> list[int]:
        """The primary keys of ``user``'s rows of the demo's ``model`` (``Document`` or ``Note``), in order."""
        return self.ids_by_user(model, user)[user]

    def ids_by_user(self, model: str, *users: str) -> dict[str, list[int]]:
        """``ids(model, user)`` for each of ``users`` (``alice`` and ``bob`` by default), in one process."""
        users = users or ("alice", "bob")
        code = (
            f"from testproject.library.models import {model}; import json; "
            f"print(json.dumps({{user: list({model}.objects.filter(owner__username=user)"
            f".order_by('pk').values_list('pk', flat=True)) for user in {list(users)!r}}}))"
        )
        return {user: list(pks) for user, pks in json.loads(self.shell(code)).items()}

    def stored_token(self, token: str) -> dict[str, Any] | None:
        """The stored row of access token ``token`` (looked up by its checksum): ``scope``, ``resource`` (the list of
        RFC 8707 resources), ``token`` (the stored column) and ``user`` (the username); ``None`` when there is none."""
        checksum = hashlib.sha256(token.encode()).hexdigest()
        code = (
            "import json; from oauth2_provider.models import get_access_token_model; "
            f"rows = list(get_access_token_model().objects.filter(token_checksum={checksum!r})"
            ".values('scope', 'resource', 'token', 'user__username')); "
            "print(json.dumps(rows, default=str))"
        )
        rows = json.loads(self.shell(code))
        assert len(rows) <= 1, rows
        if not rows:
            return None
        row = rows[0]
        resource = row["resource"]
        return {
            "scope": row["scope"],
            "resource": json.loads(resource) if isinstance(resource, str) else resource,
            "token": row["token"],
            "user": row["user__username"],
        }


@contextlib.contextmanager
def project(
    workdir: Path,
    *,
    settings: str = "testproject.settings",
    redis_url: str | None = None,
    demo_data: tuple[str, ...] | None = (),
    **env: str,
) -> Iterator[Project]:
    """A migrated project with a database of its own; ``demo_data`` are the arguments of ``load_demo_data``
    (``None``: no demo data); ``redis_url`` its Redis (channel layer and cache); ``env`` more environment."""
    base = _base_env(settings)
    base.update(env)
    if redis_url:
        base["MCP_REDIS_URL"] = redis_url
    template = _template(settings, demo_data)
    with contextlib.ExitStack() as stack:
        if on_postgres():
            name = stack.enter_context(postgres_database("mcp_live", template=template))
            base.update(MCP_TEST_DB="postgres", PGDATABASE=name)
        else:
            path = workdir / "project.sqlite3"
            shutil.copyfile(template, path)
            base["MCP_DEMO_DB"] = str(path)
        yield Project(env=base, workdir=workdir)


# Servers ---------------------------------------------------------------------------------------------------


@dataclass
class Server:
    """One server process serving a :class:`Project` on loopback: uvicorn (``testproject.asgi``) or gunicorn
    (``testproject.wsgi``; ``kind`` ``"gunicorn"``: gthread workers, ``"gevent"``: gevent workers, with Django's
    pool on PostgreSQL, as docs/deployment.md advises), with ``MCP_RESOURCE_URI`` set to its own endpoint and
    ``env`` added to the project's environment. Its output goes to ``<workdir>/<name>.log``."""

    project: Project
    name: str = "server"
    kind: str = "uvicorn"
    workers: int = 1
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
                *("--bind", f"127.0.0.1:{self.port}", "--workers", str(self.workers), "--threads", "2"),
                *("--log-level", "warning"),
                *extra,
            ]
        if self.kind == "gevent":
            return [
                *(sys.executable, "-m", "gunicorn", "testproject.wsgi:application", "--worker-class", "gevent"),
                *("--bind", f"127.0.0.1:{self.port}", "--workers", str(self.workers)),
                *("--log-level", "warning"),
                *extra,
            ]
        if self.kind != "uvicorn":
            raise ValueError(f"unknown server kind {self.kind!r}")
        return [
            *(sys.executable, "-m", "uvicorn", "testproject.asgi:application"),
            *("--host", "127.0.0.1", "--port", str(self.port), "--log-level", "warning"),
            *(("--workers", str(self.workers)) if self.workers > 1 else ()),
            *extra,
        ]

    def start(self, *extra: str, timeout: float = 60) -> Server:
        """Start the process (``extra``: more command-line options) and wait until it serves HTTP."""
        env = {**self.project.env, "MCP_RESOURCE_URI": self.url, **self.env}
        if self.kind == "gevent" and env.get("MCP_TEST_DB") == "postgres":
            env.update(MCP_TEST_DB_POOL="1", MCP_TEST_CONN_MAX_AGE="0")
        with self.log.open("ab") as log_file:
            self.process = subprocess.Popen(
                self.command(*extra), cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.process.returncode}:\n{self.logged()}")
            if self._answers():
                return self
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{self.name} did not start:\n{self.logged()}")

    def _answers(self) -> bool:
        """Whether a request gets an HTTP response (gunicorn listens before its worker has loaded the project)."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
                sock.sendall(b"GET /.well-known/oauth-protected-resource/mcp HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
                return sock.recv(12).startswith(b"HTTP/")
        except OSError:
            return False

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

    def assert_log_clean(self) -> None:
        """Fail when the server logged an unexpected exception."""
        output = self.logged()
        for marker in ("Traceback", "Internal Server Error"):
            assert marker not in output, f"{self.name} logged {marker!r}:\n{output[-5000:]}"

    def token(self, user: str, scope: str = "documents:read") -> str:
        """An access token of ``user`` bound to this server's endpoint."""
        return self.project.token(user, self.url, scope)

    def tokens(self, *users: str, scope: str = "documents:read") -> dict[str, str]:
        """Access tokens of ``users`` bound to this server's endpoint (made in one process)."""
        return self.project.make_tokens(self.url, *users, scope=scope)


# Several workers ------------------------------------------------------------------------------------------

INVENTORY = ("--alice", "2000", "--bob", "20", "--notes", "10")
"""``load_demo_data`` arguments of an inventory of 2,000+ records: alice's 2,000 documents and 10 notes, and the
static resources (about 41 pages of 50)."""

WORKERS_SETTINGS = "tests.settings_workers"


@contextlib.contextmanager
def workers_project(workdir: Path, *, demo_data: tuple[str, ...] = INVENTORY, **env: str) -> Iterator[Project]:
    """The demo project with ``demo_data`` as a deployment of several workers runs it: a Redis database of its own
    for the 2025-11-25 sessions (the cache) and the notifications (the channel layer), and the settings
    ``tests.settings_workers`` (``CURSOR_KEYS`` from ``MCP_CURSOR_KEYS``; every response names its worker process
    in ``X-Test-Worker`` and the client's port in ``X-Test-Client-Port``). Serve it with
    ``Server(project, kind=..., workers=2)`` and :func:`wait_for_workers`."""
    with (
        redis_database() as redis_url,
        project(workdir, settings=WORKERS_SETTINGS, redis_url=redis_url, demo_data=demo_data, **env) as workers,
    ):
        yield workers


def answering_worker(server: Server) -> tuple[str, str]:
    """``(worker pid, client port)`` of one request on a new connection (a ``workers_project`` server)."""
    from tests.settings_workers import CLIENT_PORT_HEADER, WORKER_HEADER

    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        connection.request("GET", "/.well-known/oauth-protected-resource/mcp", headers={"Connection": "close"})
        response = connection.getresponse()
        response.read()
        return response.getheader(WORKER_HEADER, ""), response.getheader(CLIENT_PORT_HEADER, "")
    finally:
        connection.close()


def wait_for_workers(server: Server, timeout: float = 120) -> set[str]:
    """Wait until each of ``server.workers`` processes has answered a request on a new connection (a worker that is
    still loading the project would leave every page to the others); the pids that answered."""
    seen: set[str] = set()
    deadline = time.monotonic() + timeout
    while len(seen) < server.workers:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only workers {seen} of {server.name} answered:\n{server.logged()[-3000:]}")
        seen.add(answering_worker(server)[0])
    return seen
