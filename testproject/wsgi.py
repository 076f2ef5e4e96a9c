"""WSGI entry point: ``gunicorn testproject.wsgi``.

Every path, the MCP endpoint included, goes through Django's own WSGI handler and the middleware stack. Under
WSGI the endpoint serves no subscription streams (they need the ASGI entry point, ``testproject.asgi``).
"""

from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "testproject.settings")

application = get_wsgi_application()
