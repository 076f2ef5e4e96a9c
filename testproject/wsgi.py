"""WSGI entry point: ``gunicorn testproject.wsgi``.

Every path, the MCP endpoint included, goes through Django's own WSGI handler and the middleware stack. Under
gunicorn's gevent worker (``--worker-class gevent``) the endpoint serves subscription streams too; under other
workers it serves none (``testproject.asgi`` does).
"""

from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "testproject.settings")

application = get_wsgi_application()
