"""Sphinx configuration of the documentation site (`make docs`).

The pages stay Markdown (MyST), readable on the repository too; the API reference (reference/) is generated from the
docstrings. The build runs with warnings as errors, nitpicky: a cross-reference or an anchor that does not resolve,
or a public name left out of the reference, fails it. Nothing here reaches the network (no intersphinx).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "testproject")]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "testproject.settings")

import django  # noqa: E402

django.setup()

import mcp_resources  # noqa: E402

project = "django-mcp-resources"
author = "the django-mcp-resources authors"
copyright = "the django-mcp-resources authors"  # noqa: A001
release = mcp_resources.__version__
version = release

extensions = ["myst_parser", "sphinx.ext.autodoc"]
source_suffix = {".md": "markdown"}
root_doc = "index"
# docs/pypi.md is the package index's page (absolute links to this site's source): not a page of the site.
exclude_patterns = ["_build", "pypi.md"]

# GitHub's anchors, so that `page.md#a-heading` links work both on the repository and here (and are checked).
myst_heading_anchors = 4
myst_enable_extensions = ["deflist"]

nitpicky = True
# Types of other packages in signatures: no intersphinx (no network), so they are not links, and not warnings either.
nitpick_ignore_regex = [
    (r"py:.*", r"(?!mcp_resources\b).*"),
]
# Internal names that public signatures and docstrings mention: not in the reference (they may change), so not links.
nitpick_ignore = [
    *(
        ("py:class", f"mcp_resources.{name}")
        for name in (
            "auth.tokencache.CachedToken",
            "caching.CacheHint",
            "listing.completion.CompletionRequest",
            "protocol.cursors.CursorCodec",
            "protocol.jsonrpc.Message",
            "protocol.uris.URITemplate",
            "registries.T",
            "transport.sessions.Session",
            "transport.streams.StreamPlan",
        )
    ),
    *(
        ("py:mod", f"mcp_resources.{name}")
        for name in ("auth.loading", "auth.tokencache", "receivers", "transport.streams")
    ),
]

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"show-inheritance": False}

html_theme = "furo"
html_title = f"django-mcp-resources {release}"
html_static_path: list[str] = []


def _site_links(app: object, docname: str, source: list[str]) -> None:
    """Pages link to the repository's CHANGELOG.md (``../CHANGELOG.md``); on the site it is the page changelog."""
    source[0] = source[0].replace("](../CHANGELOG.md)", "](changelog.md)")


def setup(app: object) -> None:
    app.connect("source-read", _site_links)  # type: ignore[attr-defined]
