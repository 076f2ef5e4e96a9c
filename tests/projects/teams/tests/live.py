"""The teams project served live for its end-to-end tests: its own database (a SQLite file, or a PostgreSQL
database when ``MCP_TEST_DB=postgres``), ``manage.py`` in subprocesses, uvicorn or gunicorn on a free loopback port,
and a scripted user in a browser for the OAuth flows.

Everything runs on this interpreter: the virtualenv where django-mcp-resources was installed from its wheel.
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
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx2
import pytest

ROOT = Path(__file__).resolve().parent.parent
REDIRECT_URI = "http://127.0.0.1:9/callback"  # never contacted: the scripted user reads the redirect itself
SCOPES = "projects:read attachments:read"
_INHERITED_OUT = ("DJANGO_SETTINGS_MODULE", "PGDATABASE", "TEAMS_DB", "TEAMS_REDIS_URL", "TEAMS_REQUEST_LOG")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def on_postgres() -> bool:
    return os.environ.get("MCP_TEST_DB") == "postgres"


# PostgreSQL and Redis ----------------------------------------------------------------------------------------


@contextlib.contextmanager
def postgres_database() -> Iterator[str]:
    import psycopg
    from psycopg import sql

    name = f"teams_live_{os.getpid()}_{secrets.token_hex(3)}"
    admin = "host=127.0.0.1 port=5432 dbname=postgres user=postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield name
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@contextlib.contextmanager
def redis_database() -> Iterator[str]:
    """A Redis database of this test session's own, empty before and after; claimed in database 15 with the same
    keys as the repository's suite uses, so both suites can run at once. Skips without Redis (fails under CI)."""
    import redis

    def client(db: int) -> Any:
        return redis.Redis(host="127.0.0.1", port=6379, db=db, socket_connect_timeout=3, socket_timeout=10)

    claims = client(15)
    try:
        claims.ping()
    except redis.RedisError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI requires Redis on 127.0.0.1:6379: {exc}")
        pytest.skip(f"Redis is not reachable on 127.0.0.1:6379 ({exc})")
    holder = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
    for db in range(1, 15):
        key = f"mcp-tests:redis-db:{db}"
        if claims.set(key, holder, nx=True, ex=1800):
            break
    else:
        raise RuntimeError("every Redis database from 1 to 14 is held by another test session")
    own = client(db)
    own.flushdb()
    try:
        yield f"redis://127.0.0.1:6379/{db}"
    finally:
        own.flushdb()
        own.close()
        if claims.get(key) == holder.encode():
            claims.delete(key)
        claims.close()


# The project -------------------------------------------------------------------------------------------------


@dataclass
class Project:
    """The teams project with a database of its own, migrated and seeded (``seed``: what ``seed_teams`` made)."""

    env: dict[str, str]
    workdir: Path
    seed: dict[str, Any] = field(default_factory=dict)

    def manage(self, *args: str, env: dict[str, str] | None = None) -> str:
        completed = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if completed.returncode != 0:
            raise RuntimeError(f"manage.py {args[0]} failed:\n{completed.stdout}\n{completed.stderr}")
        return completed.stdout

    def shell(self, code: str) -> str:
        lines = self.manage("shell", "--no-imports", "-c", code).strip().splitlines()
        return lines[-1] if lines else ""

    def token(self, user: str, resource: str, scope: str = SCOPES) -> str:
        return self.manage("mcp_token", "--user", user, "--scope", scope, "--resource", resource).strip()

    def stored_token(self, token: str) -> dict[str, Any]:
        import hashlib

        checksum = hashlib.sha256(token.encode()).hexdigest()
        code = (
            "import json; from oauth2_provider.models import get_access_token_model; "
            f"print(json.dumps(list(get_access_token_model().objects.filter(token_checksum={checksum!r})"
            ".values('scope', 'resource', 'user__username')), default=str))"
        )
        (row,) = json.loads(self.shell(code))
        resource = row["resource"]
        return {
            "scope": row["scope"],
            "resource": json.loads(resource) if isinstance(resource, str) else resource,
            "user": row["user__username"],
        }


@contextlib.contextmanager
def project(workdir: Path, *, tickets: int = 3, redis_url: str | None = None) -> Iterator[Project]:
    env = {key: value for key, value in os.environ.items() if key not in _INHERITED_OUT}
    env.update(
        DJANGO_SETTINGS_MODULE="teams_site.settings",
        PYTHONPATH=str(ROOT),
        TEAMS_FAST_PASSWORDS="1",
        PYTHONUNBUFFERED="1",
    )
    if redis_url:
        env["TEAMS_REDIS_URL"] = redis_url
    with contextlib.ExitStack() as stack:
        if on_postgres():
            env["PGDATABASE"] = stack.enter_context(postgres_database())
        else:
            env["TEAMS_DB"] = str(workdir / "teams.sqlite3")
        made = Project(env=env, workdir=workdir)
        made.manage("migrate", "--verbosity", "0")
        made.seed = json.loads(made.manage("seed_teams", "--tickets", str(tickets)).strip().splitlines()[-1])
        yield made


# Servers -------------------------------------------------------------------------------------------------------


@dataclass
class Server:
    """``kind`` uvicorn (``app``, default ``teams_site.asgi:application``) or gunicorn (``teams_site.wsgi``;
    ``gevent``: its gevent worker, with Django's pool on PostgreSQL) on loopback, its ``TEAMS_RESOURCE_URI`` its
    own endpoint, its requests recorded in ``requests_log``."""

    project: Project
    name: str = "server"
    kind: str = "uvicorn"
    app: str | None = None
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    @property
    def log(self) -> Path:
        return self.project.workdir / f"{self.name}.log"

    @property
    def requests_log(self) -> Path:
        return self.project.workdir / f"{self.name}.requests.jsonl"

    def recorded(self) -> list[dict[str, Any]]:
        """What the project's request recorder saw, in order."""
        if not self.requests_log.exists():
            return []
        return [json.loads(line) for line in self.requests_log.read_text().splitlines() if line]

    def start(self) -> Server:
        extra_env = {}
        if self.kind == "gunicorn":
            command = [sys.executable, "-m", "gunicorn", self.app or "teams_site.wsgi:application"]
            command += ["--bind", f"127.0.0.1:{self.port}", "--workers", "1", "--threads", "2"]
        elif self.kind == "gevent":
            command = [sys.executable, "-m", "gunicorn", self.app or "teams_site.wsgi:application"]
            command += ["--bind", f"127.0.0.1:{self.port}", "--workers", "1", "--worker-class", "gevent"]
            extra_env["TEAMS_DB_POOL"] = "1"
        else:
            command = [sys.executable, "-m", "uvicorn", self.app or "teams_site.asgi:application"]
            command += ["--host", "127.0.0.1", "--port", str(self.port)]
        command += ["--log-level", "warning"]
        env = {**self.project.env, "TEAMS_RESOURCE_URI": self.url, "TEAMS_REQUEST_LOG": str(self.requests_log)}
        env.update(extra_env)
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited:\n{self.log.read_text(errors='replace')}")
            try:
                httpx2.get(self.base + "/.well-known/oauth-authorization-server", timeout=5)
            except httpx2.HTTPError:
                time.sleep(0.1)
                continue
            self.requests_log.unlink(missing_ok=True)  # the readiness probes are not part of any test
            return self
        self.stop()
        raise RuntimeError(f"{self.name} did not start:\n{self.log.read_text(errors='replace')}")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=15)

    def token(self, user: str, scope: str = SCOPES) -> str:
        return self.project.token(user, self.url, scope)

    def assert_log_clean(self) -> None:
        output = self.log.read_text(errors="replace") if self.log.exists() else ""
        for marker in ("Traceback", "Internal Server Error"):
            assert marker not in output, f"{self.name} logged {marker!r}:\n{output[-5000:]}"


@contextlib.contextmanager
def serving(project_: Project, **options: Any) -> Iterator[Server]:
    server = Server(project_, **options).start()
    try:
        yield server
    finally:
        server.stop()


# A scripted user in a browser ------------------------------------------------------------------------------------


class _FormFields(HTMLParser):
    def __init__(self, form_id: str) -> None:
        super().__init__()
        self.form_id, self.inside, self.found = form_id, False, False
        self.fields: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if tag == "form" and values.get("id") == self.form_id:
            self.inside = self.found = True
        elif tag == "input" and self.inside and values.get("name"):
            self.fields[values["name"]] = values.get("value", "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False


def form_fields(html: str, form_id: str) -> dict[str, str]:
    parser = _FormFields(form_id)
    parser.feed(html)
    assert parser.found, f"no form {form_id!r} in:\n{html[:2000]}"
    return parser.fields


@dataclass
class ScriptedUser:
    """Signs in on the teams login page and approves the consent page, as a person in a browser would."""

    username: str
    consent_pages: list[str] = field(default_factory=list)

    def authorize(self, url: str) -> dict[str, str]:
        """Follow the authorization request ``url``; the query parameters of the final redirect."""
        with httpx2.Client(timeout=30) as browser:
            response = browser.get(url)
            assert response.status_code == 302, response.text
            login_url = urljoin(url, response.headers["location"])
            assert urlsplit(login_url).path == "/accounts/login/"
            fields = form_fields(browser.get(login_url).text, "login-form")
            response = browser.post(login_url, data={**fields, "username": self.username, "password": self.username})
            assert response.status_code == 302, response.text
            consent_url = urljoin(login_url, response.headers["location"])
            page = browser.get(consent_url)
            assert page.status_code == 200, page.text
            self.consent_pages.append(page.text)
            fields = form_fields(page.text, "authorizationForm")
            response = browser.post(consent_url, data={**fields, "allow": "Authorize"})
            assert response.status_code == 302, response.text
        location = response.headers["location"]
        assert location.startswith(REDIRECT_URI + "?"), location
        return {key: values[0] for key, values in parse_qs(urlsplit(location).query).items()}
