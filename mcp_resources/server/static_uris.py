"""The URIs of the enabled ``StaticResource`` rows, read once and kept until the delivery log says they may have
changed: an open stream's access decision then knows without a query that a template's URI is no admin resource.

Only the decisions of open streams use it (:class:`~mcp_resources.transport.views.StreamAccess`), in a process whose
log reader sees every event: a row saved or deleted publishes ``list_changed`` (then ``updated`` for its URI) after
its commit, and the reader forgets the URIs as it reads a ``list_changed``, before any later update is decided. It
forgets them too when it starts or reads again after an outage (it may have missed a change). Every other path
(``resources/read``, a listen's acknowledgement, ``resources/subscribe``) queries the table, as before.
"""

from __future__ import annotations

import threading

from mcp_resources.models import StaticResource

MAX_KEPT = 10_000
"""More enabled rows than this are not kept: each decision queries the table for its URI, as any request does."""


class StaticURIs:
    """The enabled rows' URIs (:meth:`get`), kept until :meth:`forget`; thread-safe."""

    def __init__(self) -> None:
        self._uris: frozenset[str] | None = None
        self._kept = False
        self._generation = 0
        self._lock = threading.Lock()

    def get(self) -> frozenset[str] | None:
        """The URIs, read now unless kept since the last :meth:`forget`; ``None`` over :data:`MAX_KEPT` rows."""
        if self._kept:
            return self._uris
        generation = self._generation
        rows = StaticResource.objects.filter(enabled=True).values_list("uri", flat=True)[: MAX_KEPT + 1]
        uris = frozenset(rows)
        found = None if len(uris) > MAX_KEPT else uris
        with self._lock:
            if generation == self._generation:  # not forgotten while they were read: a change may have been missed
                self._uris, self._kept = found, True
        return found

    def forget(self) -> None:
        """The rows may have changed: the next :meth:`get` reads them again."""
        with self._lock:
            self._generation += 1
            self._uris, self._kept = None, False


def may_be_static(uri: str, known: frozenset[str] | None) -> bool:
    """Whether ``uri`` may be an enabled row's: in ``known``, or anything when they are not known (``None``)."""
    return known is None or uri in known


static_uris = StaticURIs()
"""The process's one index, forgotten by the log's reader (:mod:`mcp_resources.transport.fanout`)."""
