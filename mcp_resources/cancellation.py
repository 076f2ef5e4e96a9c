"""Per-request cancellation: a client that disconnects cancels the work done for it.

:class:`~mcp_resources.transport.asgi.MCPEndpoint` attaches a :class:`CancellationToken` to each MCP request it
serves (through the ASGI scope, which Django's handler keeps on the request) and cancels it when the ASGI server
reports ``http.disconnect`` while the view still runs. Code serving the request
asks :func:`is_cancelled` (a ``list()`` callback that runs long should poll it and return early), and code running a
database query wraps it in :func:`cancellable_queries`: on PostgreSQL a cancellation then stops the running
statement at once (psycopg's connection ``cancel``, which is safe from another thread) and the block raises
:exc:`RequestCancelled`.

Under WSGI (and for requests built by Django's test client or ``RequestFactory``) no token is attached: there is no
way to notice a disconnect while the view runs, :func:`is_cancelled` is always false and the deadline alone bounds
the work.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

from mcp_resources.exceptions import RequestCancelled

logger = logging.getLogger("mcp_resources.cancellation")

SCOPE_KEY = "mcp_resources.cancellation"
"""Where :class:`~mcp_resources.transport.asgi.MCPEndpoint` puts a request's token in its ASGI scope."""
_QUERY_CANCELED = "57014"  # SQLSTATE query_canceled: a cancel request or a statement timeout
CANCEL_TIMEOUT_SECONDS = 5.0  # the most one cancel request to PostgreSQL may take

Hook = Callable[[], None]


class CancellationToken:
    """The cancellation state of one request, shared between the event loop and the worker thread.

    :meth:`cancel` may be called from any thread; hooks registered with :meth:`on_cancel` are called under a lock
    that leaving :meth:`on_cancel` also takes, so a hook never runs after its block has ended.
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._hooks: list[Hook] = []

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the request is cancelled or ``timeout`` passes; return whether it is cancelled."""
        return self._event.wait(timeout)

    def cancel(self, *, run_hooks: bool = True) -> None:
        """Mark the request cancelled, then call the hooks registered now (it may block while they run).

        With ``run_hooks=False`` only the mark is set (on the event loop); call :meth:`run_hooks` in a thread.
        """
        self._event.set()
        if run_hooks:
            self.run_hooks()

    def run_hooks(self) -> bool:
        """Call the registered hooks (again); return whether any was registered.

        A PostgreSQL cancel request that arrives before the server has read the query is ignored by the server:
        calling the hooks of a block that is still running once more stops such a query too.
        """
        with self._lock:
            for hook in list(self._hooks):
                try:
                    hook()
                except Exception as exc:  # a failed cancel leaves the work to the deadline
                    logger.warning("a cancellation hook failed: %s", type(exc).__name__)
            return bool(self._hooks)

    @property
    def has_hooks(self) -> bool:
        """Whether a block registered with :meth:`on_cancel` is running (a hint: read without the lock, which a
        running hook holds, so that the event loop never waits for it)."""
        return bool(self._hooks)

    @contextlib.contextmanager
    def on_cancel(self, hook: Hook) -> Iterator[None]:
        """Call ``hook`` (from another thread) if the request is cancelled while the block runs.

        Raises :exc:`RequestCancelled` on entry when the request is already cancelled.
        """
        with self._lock:
            if self.cancelled:
                raise RequestCancelled()
            self._hooks.append(hook)
        try:
            yield
        finally:
            with self._lock:
                self._hooks.remove(hook)


def token_for(request: Any) -> CancellationToken | None:
    """The token of ``request``, or ``None`` when it was not served through ``MCPEndpoint``.

    It travels in the ASGI scope (Django's ASGI request keeps it) or, when ``MCPEndpoint`` runs Django's WSGI
    handler, in the environ (``request.META``): a WSGI server never puts a key with a dot there.
    """
    scope = getattr(request, "scope", None)
    token = scope.get(SCOPE_KEY) if isinstance(scope, dict) else None
    if token is None:
        meta = getattr(request, "META", None)
        token = meta.get(SCOPE_KEY) if isinstance(meta, dict) else None
    return token if isinstance(token, CancellationToken) else None


def is_cancelled(request: Any) -> bool:
    """Whether the client of ``request`` has disconnected, so that its work should stop.

    A ``list()`` callback that runs long (many backend calls, a slow API) polls this between steps and returns early
    (what it returns is discarded; raising :exc:`RequestCancelled` works too). Always ``False`` for a request not
    served through :class:`~mcp_resources.transport.asgi.MCPEndpoint` (WSGI, the test client, management commands).
    """
    token = token_for(request)
    return token is not None and token.cancelled


@contextlib.contextmanager
def cancellable_queries(request: Any, using: str = DEFAULT_DB_ALIAS) -> Iterator[None]:
    """Run the block's queries on ``using`` so that cancelling ``request`` stops them.

    On PostgreSQL a cancellation sends a cancel request for the connection's running statement; the block then
    raises :exc:`RequestCancelled` (instead of the database's ``OperationalError``), with the connection left
    usable: inside an ``atomic`` block the transaction is marked for rollback (wrap the queries in their own
    ``atomic()`` to keep the enclosing transaction). Entering the block after the cancellation raises
    :exc:`RequestCancelled` on every backend; other backends run the block to its end.
    """
    token = token_for(request)
    if token is None:
        yield
        return
    connection = connections[using]
    hook = _cancel_hook(connection)
    if hook is None:
        if token.cancelled:
            raise RequestCancelled()
        yield
        return
    try:
        with token.on_cancel(hook):
            yield
    except DatabaseError as exc:
        if not (token.cancelled and _query_canceled(exc)):
            raise
        if connection.in_atomic_block:
            connection.needs_rollback = True  # PostgreSQL aborted the transaction: only a rollback may follow
        elif not connection.get_autocommit():
            connection.rollback()
        raise RequestCancelled() from exc


def _cancel_hook(connection: Any) -> Hook | None:
    """A callable cancelling the running statement of ``connection`` from another thread, or ``None``."""
    if connection.vendor != "postgresql":
        return None
    connection.ensure_connection()
    raw = connection.connection  # the driver's connection, captured here: Django's handle is thread-local
    cancel_safe = getattr(raw, "cancel_safe", None)  # psycopg >= 3.2: bounded, and encrypted when the libpq can
    if cancel_safe is not None:
        return functools.partial(cancel_safe, timeout=CANCEL_TIMEOUT_SECONDS)
    cancel: Hook = raw.cancel  # psycopg 2
    return cancel


def _query_canceled(exc: BaseException) -> bool:
    cause = exc.__cause__
    return (getattr(cause, "sqlstate", None) or getattr(cause, "pgcode", None)) == _QUERY_CANCELED


def cancel(token: CancellationToken) -> None:
    """Cancel ``token`` now, from the event loop, and stop its running queries from a thread of their own.

    The mark is set at once (the view sees it at its next check). The hooks block on a round trip to the database,
    so they run in a short-lived thread, never on the loop and never in a pool whose threads may all be busy with
    the very requests being cancelled. They are called again while the block that registered them still runs:
    PostgreSQL ignores a cancel request that arrives before it has read the query, so a query sent just as the first
    one arrived would run on.
    """
    token.cancel(run_hooks=False)
    if token.has_hooks:
        threading.Thread(target=_run_hooks_until_done, args=(token,), name="mcp-cancel", daemon=True).start()


def _run_hooks_until_done(token: CancellationToken) -> None:
    delay = 0.05
    while token.run_hooks():
        time.sleep(delay)
        delay = min(delay * 2, 1.0)
