"""Check built distributions: ``python scripts/check_dist.py DIST_DIR`` (``make dist`` runs it after ``twine check``).

The wheel must hold every module, template and migration of the source tree, ``py.typed`` and the LICENSE; its
metadata must carry the license expression, the classifiers and project URLs, and a Markdown description whose links
are all absolute (the package index resolves no relative link) with no repository-only instructions. The sdist must
ship no tests (they need the repository: see MANIFEST.in). Exits 1 listing every problem.
"""

from __future__ import annotations

import re
import sys
import tarfile
import zipfile
from email import message_from_string
from email.message import Message
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "mcp_resources"
REQUIRED_CLASSIFIERS = ("Framework :: Django", "Typing :: Typed", "Programming Language :: Python :: 3 :: Only")
REQUIRED_URLS = ("Homepage", "Documentation", "Repository", "Issues", "Changelog")
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)[^)]*\)|<(https?://[^>]+)>|^\[[^\]]+\]:\s*(\S+)", re.MULTILINE)
REPOSITORY_ONLY = re.compile(r"make (demo|test|token|manage)\b|\.venv/|testproject/")


def package_files(root: Path = ROOT) -> set[str]:
    """What the wheel must contain of the source tree: modules, templates, migrations and ``py.typed``."""
    found: set[str] = set()
    for path in (root / PACKAGE).rglob("*"):
        if not path.is_file() or "__pycache__" in path.parts or path.suffix in (".pyc", ".pyo"):
            continue
        found.add(path.relative_to(root).as_posix())
    return found


def description_problems(description: str) -> list[str]:
    """Relative links and repository-only instructions in the package index's long description."""
    problems = []
    for match in MARKDOWN_LINK.finditer(description):
        target = next(group for group in match.groups() if group)
        if not target.startswith(("https://", "http://", "mailto:")):
            problems.append(f"the long description links to {target!r}, which the package index cannot resolve")
    for match in REPOSITORY_ONLY.finditer(description):
        problems.append(f"the long description tells a reader of the package index to run {match.group(0)!r}")
    return problems


def metadata_problems(metadata: Message) -> list[str]:
    problems = []
    if metadata.get("License-Expression") != "BSD-3-Clause":
        problems.append(f"License-Expression is {metadata.get('License-Expression')!r}, not 'BSD-3-Clause'")
    classifiers = metadata.get_all("Classifier") or []
    for classifier in REQUIRED_CLASSIFIERS:
        if classifier not in classifiers:
            problems.append(f"classifier {classifier!r} is missing")
    for prefix in ("Development Status :: ", "Framework :: Django :: ", "Programming Language :: Python :: 3."):
        if not any(classifier.startswith(prefix) for classifier in classifiers):
            problems.append(f"no classifier {prefix}...")
    urls = {entry.split(",", 1)[0] for entry in metadata.get_all("Project-URL") or []}
    for name in REQUIRED_URLS:
        if name not in urls:
            problems.append(f"project URL {name!r} is missing")
    if metadata.get("Description-Content-Type") != "text/markdown":
        problems.append("the long description is not declared text/markdown")
    description = metadata.get_payload()
    if not isinstance(description, str) or not description.strip():
        problems.append("the long description is empty")
    else:
        problems.extend(description_problems(description))
    return problems


def wheel_problems(names: set[str], metadata: Message, root: Path = ROOT) -> list[str]:
    """Everything wrong with a wheel holding ``names`` and ``metadata``, against the source tree at ``root``."""
    problems = [f"the wheel misses {name}" for name in sorted(package_files(root) - names)]
    if f"{PACKAGE}/py.typed" not in names:
        problems.append(f"the wheel misses {PACKAGE}/py.typed")
    if not any(name.startswith(f"{PACKAGE}/templates/") for name in names):
        problems.append("the wheel holds no templates")
    if not any(re.fullmatch(rf"{PACKAGE}/migrations/\d{{4}}_\w+\.py", name) for name in names):
        problems.append("the wheel holds no migrations")
    if not any(re.fullmatch(r"[^/]+\.dist-info/licenses/LICENSE", name) for name in names):
        problems.append("the wheel misses its LICENSE")
    return [*dict.fromkeys(problems), *metadata_problems(metadata)]


def sdist_problems(names: set[str]) -> list[str]:
    problems = []
    tops = {name.split("/", 1)[1] for name in names if "/" in name}
    for required in ("LICENSE", "pyproject.toml", "PKG-INFO", f"{PACKAGE}/py.typed", f"{PACKAGE}/__init__.py"):
        if required not in tops:
            problems.append(f"the sdist misses {required}")
    shipped_tests = sorted(name for name in tops if name.startswith("tests/"))
    if shipped_tests:
        problems.append(f"the sdist ships tests that cannot run from it: {shipped_tests[:3]}...")
    return problems


def check(dist: Path, root: Path = ROOT) -> list[str]:
    wheels, sdists = sorted(dist.glob("*.whl")), sorted(dist.glob("*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        return [f"expected one wheel and one sdist in {dist}, found {[p.name for p in wheels + sdists]}"]
    with zipfile.ZipFile(wheels[0]) as wheel:
        names = set(wheel.namelist())
        [metadata_name] = [name for name in names if re.fullmatch(r"[^/]+\.dist-info/METADATA", name)]
        metadata = message_from_string(wheel.read(metadata_name).decode())
    with tarfile.open(sdists[0]) as sdist:
        sdist_names = set(sdist.getnames())
    return wheel_problems(names, metadata, root) + sdist_problems(sdist_names)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: check_dist.py DIST_DIR", file=sys.stderr)
        return 2
    problems = check(Path(argv[1]))
    for problem in problems:
        print(f"check_dist: {problem}", file=sys.stderr)
    if not problems:
        print(f"check_dist: {argv[1]}: the wheel and the sdist are complete")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
