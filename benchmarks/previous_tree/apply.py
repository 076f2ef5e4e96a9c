"""The switches applied once the previous tree's app registry is ready (by its ``wsgi`` and ``asgi`` modules)."""

from __future__ import annotations

from typing import Any

from previous_tree import announce, switched_off


def apply_switches() -> set[str]:
    off = switched_off()
    for name in sorted(off & {"token-lookup", "prepared-statements"}):
        announce(name)  # applied by the settings
    if "token-lookup" in off:
        from mcp_resources import tokenlookup

        if tokenlookup.fast_path_available():
            raise RuntimeError("token-lookup: the fast path is still available")
    if "precompiled-listing" in off:
        scope_in_get_queryset()
        announce("precompiled-listing")
    return off


def scope_in_get_queryset() -> None:
    """Give the registered ``documents`` template a subclass whose ``get_queryset()`` returns the same scope: the
    listing then builds its query through the ORM on every page instead of the precompiled one."""
    from mcp_resources.server import default_server

    template = next(t for t in default_server.registry.templates if t.name == "documents")
    declared = type(template)

    class ScopedInGetQueryset(declared):  # type: ignore[misc, valid-type]
        def get_queryset(self, request: Any) -> Any:
            return super().get_queryset(request)  # owner_field's scope, computed by the base class

    template.__class__ = ScopedInGetQueryset
    if template.owned_listing() is not None:
        raise RuntimeError("precompiled-listing: the template still lists through OwnedListing")
