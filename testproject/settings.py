"""Settings for the demo project and the test suite.

``MCP_TEST_DB=postgres`` switches to PostgreSQL on 127.0.0.1:5432 (database ``test``, trust auth), as CI does.
"""

from __future__ import annotations

import os
from pathlib import Path

from mcp_resources.auth.server_settings import authorization_server_settings

BASE_DIR = Path(__file__).resolve().parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "demo-only-secret-key-not-for-production")
DEBUG = os.environ.get("DJANGO_DEBUG", "") == "1"
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "[::1]", "testserver"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "oauth2_provider",
    "rest_framework",
    "mcp_resources",
    "testproject.library",
    "testproject.conformance",
    "testproject.agreement",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "testproject.urls"
ASGI_APPLICATION = "testproject.asgi.application"
WSGI_APPLICATION = "testproject.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# ``MCP_TEST_CONN_MAX_AGE=none``: persistent connections, as in production (where the app's fixed queries run as
# prepared statements); a number: kept that many seconds; Django's default, 0, closes them after each request.
CONN_MAX_AGE = (
    None
    if os.environ.get("MCP_TEST_CONN_MAX_AGE", "0") == "none"
    else int(os.environ.get("MCP_TEST_CONN_MAX_AGE", "0"))
)

if os.environ.get("MCP_TEST_DB") == "postgres":
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": os.environ.get("PGDATABASE", "test"),
            "USER": os.environ.get("PGUSER", "postgres"),
            "HOST": os.environ.get("PGHOST", "127.0.0.1"),
            "PORT": os.environ.get("PGPORT", "5432"),
            "CONN_MAX_AGE": CONN_MAX_AGE,
            # ``MCP_TEST_PG_BINDING=server``: server-side parameter binding, statements prepared from their fifth run
            # (psycopg's default; Django turns preparing off unless told). ``MCP_TEST_DB_POOL=1``: Django's pool
            # (psycopg_pool), as under gunicorn's gevent worker (docs/deployment.md); it needs ``CONN_MAX_AGE`` 0.
            "OPTIONS": {
                **(
                    {"server_side_binding": True, "prepare_threshold": 5}
                    if os.environ.get("MCP_TEST_PG_BINDING") == "server"
                    else {}
                ),
                **({"pool": True} if os.environ.get("MCP_TEST_DB_POOL") == "1" else {}),
            },
        }
    }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.environ.get("MCP_DEMO_DB", str(BASE_DIR.parent / "demo.sqlite3")),
            "CONN_MAX_AGE": CONN_MAX_AGE,
        }
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"
LANGUAGE_CODE = "en-us"
STATIC_URL = "static/"

CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# Change notifications travel on a log: ``MCP_REDIS_URL`` (e.g. redis://127.0.0.1:6379/0) puts it in Redis (a
# stream), so that they reach streams served by other processes, and shares the sessions of 2025-11-25 clients
# through the same Redis.
if os.environ.get("MCP_REDIS_URL"):
    CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": os.environ["MCP_REDIS_URL"]}
    }

# The demo is its own OAuth 2.1 authorization server (docs/oauth.md), set up as the package ships it: authorization
# code with PKCE (S256 only), RFC 8414 metadata at /.well-known/oauth-authorization-server, the RFC 8707 resource
# stored on each token, open dynamic client registration (RFC 7591) and client ID metadata documents.
LOGIN_URL = "/accounts/login/"
OAUTH2_PROVIDER = authorization_server_settings(
    {
        "documents:read": "Read your documents and notes",
        "documents": "All of your documents (implies documents:read)",
    },
    default_scopes=["documents:read"],
)

MCP_RESOURCES: dict[str, object] = {
    "SERVER_INFO": {"name": "django-mcp-resources demo", "title": "Demo library"},
    "RESOURCE_URI": os.environ.get("MCP_RESOURCE_URI", "http://127.0.0.1:8000/mcp"),
    "INSTRUCTIONS": "Documents of the signed-in user, as MCP resources.",
    "SCOPE_HIERARCHY": {"documents": ["documents:read"]},
    "DELIVERY_URL": os.environ.get("MCP_REDIS_URL") or None,
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"mcp_resources": {"handlers": ["console"], "level": os.environ.get("MCP_LOG_LEVEL", "WARNING")}},
}
