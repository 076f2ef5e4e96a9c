"""Sphinx configuration of the documentation site (`make docs`).

The pages stay Markdown (MyST), readable on the repository too; the API reference (reference/) is generated from the
docstrings. The build runs with warnings as errors, nitpicky: a cross-reference or an anchor that does not resolve,
or a public name left out of the reference, fails it. Nothing here reaches the network (no intersphinx).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "testproject")]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "testproject.settings")

import django  # noqa: E402
from django.apps import apps  # noqa: E402

if not apps.ready:  # built in the test process too (tests/test_docs_site.py): set up once, logging untouched
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

autodoc_member_order = "bysource"
autodoc_typehints = "signature"

html_theme = "furo"
html_baseurl = "https://django-mcp-resources.readthedocs.io/en/latest/"
html_title = f"django-mcp-resources {release}"
html_static_path: list[str] = []


def _site_links(app: Any, docname: str, source: list[str]) -> None:
    """Pages link to the repository's CHANGELOG.md (``../CHANGELOG.md``); on the site it is the page changelog."""
    source[0] = source[0].replace("](../CHANGELOG.md)", "](changelog.md)")


def _internal_reference(app: Any, env: Any, node: Any, contnode: Any) -> Any:
    """A reference to an internal module of the package, or to a name in one, is plain text, not a warning.

    Public signatures and docstrings mention internal types (``mcp_resources.caching.CacheHint``) and modules; the
    reference documents only the public import paths, so these have no page. A reference into a documented module
    that does not resolve still fails the build.
    """
    target = node.get("reftarget", "")
    if node.get("refdomain") != "py" or not target.startswith("mcp_resources."):
        return None
    module = target
    while module and module not in sys.modules:
        module = module.rpartition(".")[0]
    return None if module in env.get_domain("py").modules else contnode


def setup(app: Any) -> None:
    app.connect("source-read", _site_links)
    app.connect("missing-reference", _internal_reference)
