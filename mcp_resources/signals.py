"""Signals the app sends. Connect receivers as for any Django signal.

- :data:`resource_registered`: a static resource was registered from code (``register_resource``), possibly
  replacing one at the same URI; arguments ``registry``, ``resource`` and ``previous`` (the replaced
  :class:`~mcp_resources.RegisteredResource`, or ``None``).
- :data:`resource_unregistered`: a code-registered static resource was removed; arguments ``registry`` and
  ``resource``.
- :data:`client_revoked`: a person took back what they granted an OAuth client (the connected-apps page, or
  :func:`mcp_resources.auth.connections.revoke_connection`), after its tokens were revoked; arguments ``user`` and
  ``client_id``. The app's receiver ends that person's 2025-11-25 sessions through that client, and their GET
  streams.

The app's own receivers (:mod:`mcp_resources.receivers`) start and stop live subscriptions and tell listeners that
the list changed: the registry itself knows nothing of subscriptions.
"""

from __future__ import annotations

from django.dispatch import Signal

#: Sent when a static resource is registered from code; ``registry``, ``resource``, ``previous`` (or ``None``).
resource_registered = Signal()
#: Sent when a code-registered static resource is removed; ``registry`` and ``resource``.
resource_unregistered = Signal()
client_revoked = Signal()
