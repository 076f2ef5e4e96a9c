"""WSGI entry point: ``gunicorn teams_site.wsgi``."""

from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "teams_site.settings")

application = get_wsgi_application()
