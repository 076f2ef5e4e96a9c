"""Drive the TypeScript MCP SDK (``client.mjs`` on Node 22) from a pytest test.

Used by the repository's suite (``tests/test_typescript_sdk.py``, against the demo) and by the teams project's
(``tests/projects/teams/tests/test_typescript_sdk.py``), which puts this directory on its ``sys.path``: it imports
nothing but the standard library and pytest. ``make ts-install`` installs Node 22 (the npm package ``node@22``) and
the latest ``@modelcontextprotocol/sdk`` 1.x into ``node_modules/`` here; without them the tests are skipped, and
under ``CI`` they fail.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
NODE = HERE / "node_modules" / "node" / "bin" / "node"
SDK = HERE / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json"
SCRIPT = HERE / "client.mjs"
TIMEOUT = 60.0


def sdk_version() -> str:
    return str(json.loads(SDK.read_text())["version"])


def require_node() -> Path:
    """The Node 22 binary; skips the test when it or the SDK is not installed (fails under ``CI``)."""
    missing = [str(path) for path in (NODE, SDK) if not path.exists()]
    if missing:
        reason = f"the TypeScript SDK is not installed (run `make ts-install`): missing {', '.join(missing)}"
        if os.environ.get("CI"):
            pytest.fail(f"CI requires {reason}")
        pytest.skip(reason)
    return NODE


class TSError(Exception):
    """An error the TypeScript client raised: ``name`` (its class), ``message``, ``code``, ``data``."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('name')}: {error.get('message')} (code {error.get('code')})")
        self.name = str(error.get("name"))
        self.message = str(error.get("message"))
        self.code = error.get("code")
        self.data = error.get("data")


class TSClient:
    """One ``client.mjs`` process: ``call(op, **args)`` runs an op and returns its result (raises :class:`TSError`).

    ``authorize`` answers the SDK's redirect to the authorization endpoint: called with the URL, it returns the
    authorization code (a scripted browser). Notifications are collected; :meth:`notification` waits for one.
    """

    def __init__(self, authorize: Callable[[str], str] | None = None, env: dict[str, str] | None = None) -> None:
        self.authorize = authorize
        self.process = subprocess.Popen(
            [str(require_node()), str(SCRIPT)],
            cwd=HERE,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr: list[str] = []
        self.notifications: list[dict[str, Any]] = []
        self.authorizations: list[str] = []
        self._next_id = 0
        threading.Thread(target=self._pump, args=(self.process.stdout, self._lines.put), daemon=True).start()
        threading.Thread(target=self._pump, args=(self.process.stderr, self._stderr.append), daemon=True).start()

    @staticmethod
    def _pump(stream: Any, sink: Callable[[Any], None]) -> None:
        for line in stream:
            sink(line)
        sink(None)

    def _send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()

    def _next(self, timeout: float) -> dict[str, Any]:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"the TypeScript client said nothing for {timeout}s; stderr:\n{self.stderr}") from None
        if line is None:
            raise AssertionError(f"the TypeScript client exited ({self.process.poll()}); stderr:\n{self.stderr}")
        message: dict[str, Any] = json.loads(line)
        return message

    def _handle_event(self, message: dict[str, Any]) -> None:
        if message["event"] == "notification":
            self.notifications.append(message)
        elif message["event"] == "authorize":
            self.authorizations.append(message["url"])
            assert self.authorize is not None, f"unexpected authorization request {message['url']}"
            self._send({"op": "authorization_code", "code": self.authorize(message["url"])})

    def call(self, op: str, timeout: float = TIMEOUT, **args: Any) -> Any:
        self._next_id += 1
        request_id = self._next_id
        self._send({"id": request_id, "op": op, **args})
        while True:
            message = self._next(timeout)
            if "event" in message:
                self._handle_event(message)
                continue
            assert message["id"] == request_id, message
            if "error" in message:
                raise TSError(message["error"])
            return message["result"]

    def notification(self, method: str, timeout: float = TIMEOUT) -> dict[str, Any]:
        """The first collected notification of ``method`` not yet returned, waiting up to ``timeout`` for it."""
        while True:
            for index, message in enumerate(self.notifications):
                if message["method"] == method:
                    return self.notifications.pop(index)
            message = self._next(timeout)
            if "event" in message:
                self._handle_event(message)
            else:
                raise AssertionError(f"an answer nobody waited for: {message}")

    @property
    def stderr(self) -> str:
        return "".join(line for line in self._stderr if line)

    def close(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(AssertionError, TSError):
                self.call("close", timeout=15)
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=15)

    def __enter__(self) -> TSClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
