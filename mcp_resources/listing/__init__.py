"""``resources/list``: the traversal across sources, keyset pages, the prefix filter and the page pipeline.

Knows the declarations (templates, registry, static resources) and the wire (cursors); knows nothing of the
server, HTTP or subscriptions.
"""
