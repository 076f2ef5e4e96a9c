"""The previous tree's WSGI application: ``MCPWSGIApplication`` in front of Django's handler, as its
``testproject.wsgi``; with ``front`` switched off, Django's handler alone (the middleware stack included)."""

from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "previous_tree.settings")

django_application = get_wsgi_application()

from previous_tree import announce  # noqa: E402
from previous_tree.apply import apply_switches  # noqa: E402

_off = apply_switches()
if "front" in _off:
    application = django_application
    announce("front")
else:
    from mcp_resources.wsgi import MCPWSGIApplication

    application = MCPWSGIApplication(django_application, path="/mcp")
