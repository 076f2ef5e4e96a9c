"""The demo project's settings as a deployment with several workers runs them (``tests/live.py``'s
``workers_project``): the cursor keys come from the environment, and every response says which worker process
answered it and from which client port the request came.

- ``MCP_CURSOR_KEYS``: space-separated ``CURSOR_KEYS`` (unset: each worker's own random key, the default);
- ``X-Test-Worker``: the process id of the worker that answered;
- ``X-Test-Client-Port``: the client's TCP port, so a test can show that every request came on a new connection.

Both headers are added by :class:`WorkerHeadersMiddleware`, last in the stack (the endpoint's answers pass through
it under gunicorn and under uvicorn alike).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from testproject.settings import *  # noqa: F403
from testproject.settings import MCP_RESOURCES as DEMO_MCP_RESOURCES
from testproject.settings import MIDDLEWARE as DEMO_MIDDLEWARE

MIDDLEWARE = [*DEMO_MIDDLEWARE, "tests.settings_workers.WorkerHeadersMiddleware"]

MCP_RESOURCES = dict(DEMO_MCP_RESOURCES)
if os.environ.get("MCP_CURSOR_KEYS"):
    MCP_RESOURCES["CURSOR_KEYS"] = os.environ["MCP_CURSOR_KEYS"].split()

WORKER_HEADER = "X-Test-Worker"
CLIENT_PORT_HEADER = "X-Test-Client-Port"


class WorkerHeadersMiddleware:
    """Stamps each response with the answering process and the client's port (a test stand-in, not for production)."""

    def __init__(self, get_response: Callable[[Any], Any]) -> None:
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        response = self.get_response(request)
        response[WORKER_HEADER] = str(os.getpid())
        response[CLIENT_PORT_HEADER] = str(request.META.get("REMOTE_PORT", ""))
        return response
