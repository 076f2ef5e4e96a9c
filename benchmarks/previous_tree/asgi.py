"""The previous tree's ASGI application: ``MCPApplication`` (its pool of ``ASGI_THREADS`` threads) in front of
Django's ASGI handler, as its ``testproject.asgi``; with ``front`` switched off, Django's handler alone; with
``asgi-threads`` switched off, ``MCPApplication`` running the view in the event loop's default executor."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "previous_tree.settings")

django_application = get_asgi_application()

from asgiref.sync import sync_to_async  # noqa: E402
from previous_tree import announce  # noqa: E402
from previous_tree.apply import apply_switches  # noqa: E402

_off = apply_switches()
if "front" in _off:
    application: Any = django_application
    announce("front")
else:
    from mcp_resources import asgi as previous_asgi

    if "asgi-threads" in _off:

        def in_default_executor(func: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
            return sync_to_async(func, thread_sensitive=False)  # no executor: the loop's default one

        previous_asgi._in_request_thread = in_default_executor
        announce("asgi-threads")
    application = previous_asgi.MCPApplication(django_application, path="/mcp")
