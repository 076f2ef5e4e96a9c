"""What a deployment needs beyond one development process: what several workers must share (W010-W012), an ASGI
application that serves streams without a thread each (W014) and an open client registration without a throttle
(W032), ``--deploy`` only; database connections under gevent (W013)."""

from __future__ import annotations

import sys

from django.conf import settings
from django.core import checks
from django.utils.module_loading import import_string

# Deployment: what must be shared by several workers and machines (docs/deployment.md) ---------------------
# Registered with deploy=True: ``manage.py check --deploy`` runs them, development servers never warn.

PER_PROCESS_CACHES = ("django.core.cache.backends.locmem.LocMemCache", "django.core.cache.backends.dummy.DummyCache")


def _is_backend(path: object, candidates: tuple[str, ...]) -> bool:
    """Whether the dotted ``path`` names one of ``candidates`` or a subclass of one (an unimportable path: no)."""
    if not isinstance(path, str):
        return False
    if path in candidates:
        return True
    try:
        backend = import_string(path)
    except ImportError:
        return False
    bases = []
    for candidate in candidates:
        try:
            bases.append(import_string(candidate))
        except ImportError:
            continue
    return isinstance(backend, type) and any(issubclass(backend, base) for base in bases)


def _deploy_warning(message: str, hint: str, obj: str, id: str) -> checks.CheckMessage:
    return checks.Warning(message, hint=hint, obj=obj, id=f"mcp_resources.{id}")


def check_deployment() -> list[checks.CheckMessage]:
    """Cursor keys, the 2025-11-25 session cache, the log of change notifications and the ASGI application, as
    several processes and many streams need them."""
    from mcp_resources.conf import mcp_settings

    messages: list[checks.CheckMessage] = []
    if not mcp_settings.cursor_keys:
        messages.append(
            _deploy_warning(
                "MCP_RESOURCES['CURSOR_KEYS'] is not set: each process seals pagination cursors with a random key of "
                "its own, so with several workers or machines page 2 fails at random (-32602 Invalid cursor), and "
                "every restart ends the traversals in progress.",
                "Set CURSOR_KEYS to a secret every process shares: `python manage.py mcp_cursor_key` prints a fresh "
                "one (docs/deployment.md).",
                "MCP_RESOURCES",
                "W010",
            )
        )
    alias = mcp_settings.session_cache
    cache = (getattr(settings, "CACHES", None) or {}).get(alias)
    if isinstance(cache, dict) and _is_backend(cache.get("BACKEND"), PER_PROCESS_CACHES):
        messages.append(
            _deploy_warning(
                f"MCP_RESOURCES['SESSION_CACHE'] is {alias!r}, a {str(cache['BACKEND']).rsplit('.', 1)[-1]}: the "
                "sessions of 2025-11-25 clients live in one process only, so with several workers or machines a "
                "session's next request fails at random (404 Session not found): a client lands on another worker "
                "than the one that opened its session, and must initialize again (its subscriptions lost)"
                + (
                    ", and the dummy cache keeps none at all."
                    if "Dummy" in str(cache["BACKEND"])
                    else "; and each process holds only MAX_ENTRIES/6 authenticated sessions (50 by default), "
                    "refusing initialize (429) past it."
                ),
                "Point SESSION_CACHE at a cache every process shares (Redis, Memcached or the database cache).",
                "MCP_RESOURCES",
                "W011",
            )
        )
    messages.extend(check_registration_throttle())
    if mcp_settings.subscriptions and not mcp_settings.delivery_url:
        messages.append(
            _deploy_warning(
                "Subscriptions use the in-memory log of one process (MCP_RESOURCES['DELIVERY_URL'] is not set): a "
                "change saved in one process (another worker, another machine, a management command, a task "
                "queue) notifies none of the streams the other processes hold, and a client cannot resume on "
                "another worker.",
                "Set MCP_RESOURCES['DELIVERY_URL'] to a Redis URL every process shares (redis://host:6379/0), or "
                "set MCP_RESOURCES['SUBSCRIPTIONS'] = False.",
                "MCP_RESOURCES",
                "W012",
            )
        )
    if mcp_settings.subscriptions and _plain_asgi_handler():
        messages.append(
            _deploy_warning(
                f"ASGI_APPLICATION ({settings.ASGI_APPLICATION}) is Django's own ASGI handler: it serves each open "
                "stream (subscriptions/listen, a session's GET) with a thread of its own for the stream's whole "
                "life, so a few hundred listeners exhaust the thread pool.",
                "Route the MCP path to mcp_resources.MCPEndpoint, which serves streams on the event loop without a "
                "thread (docs/deployment.md, ASGI).",
                "ASGI_APPLICATION",
                "W014",
            )
        )
    return messages


def check_registration_throttle() -> list[checks.CheckMessage]:
    """W032: this project's authorization server lets anyone register a client, with no throttle."""
    from mcp_resources.checks.authorization_server import _issues_the_tokens

    if not _issues_the_tokens():
        return []
    from mcp_resources.auth import server_urls

    if not server_urls.dynamic_registration_open() or server_urls.registration_rate() is not None:
        return []
    return [
        _deploy_warning(
            "This project's authorization server lets anyone register an OAuth client (RFC 7591, open) with no "
            "throttle: one address can register clients without end, filling the application table and the "
            "consent screens of your users with clients named as it likes.",
            "Mount authorization_server_urlpatterns() with a registration_rate (its default, '20/hour'), or close "
            "registration (docs/oauth.md, 'Who may register, and with what').",
            "OAUTH2_PROVIDER",
            "W032",
        )
    ]


def _plain_asgi_handler() -> bool:
    """Whether ``settings.ASGI_APPLICATION`` names an instance of Django's ``ASGIHandler`` (a plain
    ``get_asgi_application()``); an unset or unimportable one is not judged here."""
    from django.core.handlers.asgi import ASGIHandler

    path = getattr(settings, "ASGI_APPLICATION", None)
    if not isinstance(path, str):
        return False
    try:
        application = import_string(path)
    except ImportError:
        return False
    return isinstance(application, ASGIHandler)


# Database connections under gevent (docs/deployment.md, WSGI) ------------------------------------------------
# No server runs system checks, and a gunicorn gevent worker patches the process before it loads the project: the
# app logs this one when it starts in a patched process (mcp_resources.checks.log_startup_warnings).


def gevent_patched() -> bool:
    """Whether gevent has monkey-patched this process's threads (as in a gunicorn gevent worker).

    gevent is never imported here: a process that has not imported it is not patched.
    """
    monkey = sys.modules.get("gevent.monkey")
    return monkey is not None and bool(monkey.is_module_patched("threading"))


def check_database_connections() -> list[checks.CheckMessage]:
    """W013: in a process patched by gevent, a database keeps its connections open without Django's pool."""
    if not gevent_patched():
        return []
    messages: list[checks.CheckMessage] = []
    for alias, database in settings.DATABASES.items():
        max_age = database.get("CONN_MAX_AGE", 0)
        options = database.get("OPTIONS") or {}
        if max_age == 0 or (isinstance(options, dict) and options.get("pool")):
            continue
        messages.append(
            checks.Warning(
                f"DATABASES[{alias!r}] keeps its connections open (CONN_MAX_AGE {max_age!r}) in a process patched by "
                "gevent: every greenlet (each client connection of a gunicorn gevent worker) opens a database "
                "connection of its own, which stays open until the garbage collector frees it, so under load the "
                "database runs out of connections.",
                hint="Set CONN_MAX_AGE to 0 and, on PostgreSQL, use Django's connection pool "
                "(OPTIONS {'pool': True}); see docs/deployment.md, WSGI.",
                obj="DATABASES",
                id="mcp_resources.W013",
            )
        )
    return messages
