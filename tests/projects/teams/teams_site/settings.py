"""Settings of the teams project: a Django project an outside team would write, using django-mcp-resources as
installed from its wheel.

Environment: ``TEAMS_DB`` (the SQLite file; default ``teams.sqlite3`` here), or ``MCP_TEST_DB=postgres`` with
``PGDATABASE``; ``TEAMS_REDIS_URL`` (channel layer and cache in Redis; default in memory); ``TEAMS_RESOURCE_URI``
(the MCP endpoint's public URL); ``TEAMS_REQUEST_LOG`` (where the request recorder writes).
"""

from __future__ import annotations

import os
from pathlib import Path

from mcp_resources.auth.server_settings import authorization_server_settings

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("TEAMS_SECRET_KEY", "teams-test-only-secret-key")
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "oauth2_provider",
    "mcp_resources",
    "teams",
]

# The ordinary stack, with a recorder of every request in front of it (a stand-in for Sentry or OpenTelemetry).
MIDDLEWARE = [
    "teams_site.middleware.RequestRecorder",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "teams_site.urls"
WSGI_APPLICATION = "teams_site.wsgi.application"
ASGI_APPLICATION = "teams_site.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
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

if os.environ.get("MCP_TEST_DB") == "postgres":
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": os.environ.get("PGDATABASE", "teams"),
            "USER": os.environ.get("PGUSER", "postgres"),
            "HOST": os.environ.get("PGHOST", "127.0.0.1"),
            "PORT": os.environ.get("PGPORT", "5432"),
            # Under gunicorn's gevent worker, Django's pool (django-mcp-resources' docs/deployment.md).
            **({"OPTIONS": {"pool": True}, "CONN_MAX_AGE": 0} if os.environ.get("TEAMS_DB_POOL") == "1" else {}),
        }
    }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.environ.get("TEAMS_DB", str(BASE_DIR / "teams.sqlite3")),
        }
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"
STATIC_URL = "static/"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
if os.environ.get("TEAMS_FAST_PASSWORDS"):
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
if os.environ.get("TEAMS_REDIS_URL"):
    CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": os.environ["TEAMS_REDIS_URL"]}
    }

# The team's own authorization server, as django-mcp-resources ships it (docs/oauth.md, "Your own authorization
# server"): sign-in at LOGIN_URL, then the consent page; scopes with the sentences the consent page shows.
LOGIN_URL = "/accounts/login/"
OAUTH2_PROVIDER = authorization_server_settings(
    {
        "projects:read": "See your organisations, your projects and their tickets",
        "attachments:read": "Download the attachments of your projects' tickets",
    }
)

MCP_RESOURCES = {
    "RESOURCE_URI": os.environ.get("TEAMS_RESOURCE_URI", "http://127.0.0.1:8000/mcp"),
    "SERVER_INFO": {"name": "teams", "title": "Teams"},
    "PAGE_SIZE": 20,
    # Change notifications on the Redis log, shared by the workers (docs/subscriptions.md); without it, each
    # process's own memory.
    "DELIVERY_URL": os.environ.get("TEAMS_REDIS_URL") or None,
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"mcp_resources": {"handlers": ["console"], "level": "WARNING"}},
}
