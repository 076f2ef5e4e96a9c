"""The documentation site (docs/conf.py, `make docs`): it builds without a warning, and its API reference covers every
public import path.

The site is built once here, in process, with Sphinx's ``dummy`` builder (it reads every page, runs autodoc and
resolves every cross-reference, nitpicky as `make docs` is, but writes no HTML).
"""

from __future__ import annotations

import importlib
import io
import re
from pathlib import Path
from typing import Any

import pytest

# myst-parser 5 on Sphinx 9 uses APIs that Sphinx 11 removes: not this project's warnings.
pytestmark = pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def public_modules() -> list[str]:
    """The modules of the package that declare ``__all__``: the package, and each subpackage that re-exports."""
    found = []
    for path in sorted((ROOT / "mcp_resources").rglob("*.py")):
        if re.search(r"^__all__\b", path.read_text(), flags=re.MULTILINE):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from sphinx.application import Sphinx

    out = tmp_path_factory.mktemp("docs")
    warnings = io.StringIO()
    app = Sphinx(
        str(DOCS), str(DOCS), str(out / "dummy"), str(out / "doctrees"), "dummy",
        status=None, warning=warnings, freshenv=True,
    )  # fmt: skip
    app.build()
    app.warnings_text = warnings.getvalue()
    return app


def test_the_site_builds_without_a_warning(site: Any) -> None:
    assert site.warnings_text == ""
    assert site.config.nitpicky


def test_make_test_builds_the_site_with_warnings_as_errors() -> None:
    makefile = (ROOT / "Makefile").read_text()
    [test] = re.findall(r"^test:(.*)$", makefile, flags=re.MULTILINE)
    assert "docs" in test.split()
    [build] = re.findall(r"^docs:.*\n\t(.*)$", makefile, flags=re.MULTILINE)
    assert {"-W", "-n", "--keep-going", "-E"} <= set(build.split())


def test_every_page_is_in_the_site() -> None:
    # Every page of docs/ is in a toctree (so `make docs` checks its links), but the package index's own page.
    pages = {path.relative_to(DOCS).with_suffix("").as_posix() for path in DOCS.glob("**/*.md")}
    listed = {"index"}
    for entries, page in _toctrees():
        listed |= {(Path(page).parent / entry).as_posix().removeprefix("./") for entry in entries}
    assert {page for page in pages if not page.startswith("_build/")} - listed == {"pypi"}


def _toctrees() -> list[tuple[list[str], str]]:
    found = []
    for path in DOCS.glob("**/*.md"):
        if "_build" in path.parts:
            continue
        for block in re.findall(r"```\{toctree\}\n(.*?)```", path.read_text(), flags=re.DOTALL):
            entries = [line.strip() for line in block.splitlines() if line.strip() and not line.startswith(":")]
            found.append((entries, path.relative_to(DOCS).as_posix()))
    return found


def test_public_modules_are_found() -> None:
    modules = public_modules()
    assert {"mcp_resources", "mcp_resources.auth", "mcp_resources.server", "mcp_resources.transport"} <= set(modules)


@pytest.mark.parametrize("module_name", public_modules())
def test_every_public_name_is_in_the_reference(site: Any, module_name: str) -> None:
    objects = site.env.get_domain("py").objects
    package = importlib.import_module("mcp_resources")
    module = importlib.import_module(module_name)
    missing = []
    for name in module.__all__:
        obj = getattr(module, name)
        candidates = {f"{module_name}.{name}"}
        if name in package.__all__ and getattr(package, name) is obj:
            candidates.add(f"mcp_resources.{name}")  # a re-export, documented where a project imports it from
        if getattr(obj, "__qualname__", None) and getattr(obj, "__module__", None):
            candidates.add(f"{obj.__module__}.{obj.__qualname__}")  # documented under its canonical name
        if not candidates & set(objects):
            missing.append(name)
    assert missing == [], f"{module_name}: not in the API reference (docs/reference/)"


def test_every_import_path_of_api_md_is_in_the_reference(site: Any) -> None:
    """docs/api.md lists the public import paths (a heading each); the reference documents each as a module."""
    paths = re.findall(r"^## `(mcp_resources[\w.]*)`$", (DOCS / "api.md").read_text(), flags=re.MULTILINE)
    assert "mcp_resources.test" in paths
    modules = site.env.get_domain("py").modules
    assert [path for path in paths if path not in modules] == []


def test_the_reference_documents_no_name_a_public_module_does_not_export(site: Any) -> None:
    """The reverse: a name written into the reference by hand (``py:data``) goes when the module drops it."""
    documented = site.env.get_domain("py").objects
    stale = []
    for module_name in public_modules():
        module = importlib.import_module(module_name)
        for name, entry in documented.items():
            child = name.removeprefix(f"{module_name}.")
            direct = name.startswith(f"{module_name}.") and "." not in child
            if direct and not entry.aliased and entry.objtype != "module" and child not in module.__all__:
                stale.append(name)
    assert stale == []
