"""Every Python and shell snippet of the documentation is compiled, checked or run, so that a renamed API, setting,
command or option breaks this suite instead of a reader's afternoon.

The pages: docs/**/*.md and README.md. For each fenced block:

- ``python``: compiled; every absolute import resolved (the module imports, each imported name exists) when its
  top-level package is importable here (``django``, ``mcp_resources``, ``mcp``, the demo's apps...; a reader's own
  ``notes`` or ``myproject`` is not); a block of only imports and assignments (settings, URL patterns) is executed,
  and what it defines checked: ``MCP_RESOURCES`` has only known keys, ``urlpatterns`` holds URL patterns.
- ``console`` (the ``$`` lines) and ``sh``/``bash``: ``bash -n``; ``make`` targets exist in the Makefile;
  ``manage.py``/``django-admin`` commands exist with the options named; ``pip install`` extras exist in
  pyproject.toml; a script run with ``python`` exists.
- ``json``: parsed; ``html+django``: compiled by Django's template engine; ``javascript``: ``node --check``
  (the examples of docs/guides/ also run, in tests/test_guides.py).

A block opts out only with a reason, in an HTML comment on the line before its fence (invisible on both the
repository and the site): ``<!-- snippet: compile-only: why -->`` (compiled and its imports resolved, not run) or
``<!-- snippet: skip: why -->`` (not even compiled).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.core.management import get_commands, load_command_class
from django.template import Template
from django.urls import URLPattern, URLResolver

from mcp_resources.conf import DEFAULTS
from tests.ts.ts_driver import NODE

ROOT = Path(__file__).resolve().parent.parent
PAGES = [*sorted(path for path in (ROOT / "docs").glob("**/*.md") if "_build" not in path.parts), ROOT / "README.md"]

FENCE = re.compile(
    r"^(?P<indent> *)(?P<fence>```+|~~~+)(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)(?P=fence)[ \t]*$",
    re.MULTILINE | re.DOTALL,
)
MARKER = re.compile(r"<!--\s*snippet:\s*(?P<kind>[\w-]+)\s*(?::\s*(?P<reason>.*?))?\s*-->\s*$")
PYTHON = {"python", "py"}
SHELL = {"console", "sh", "bash", "shell"}


@dataclass(frozen=True)
class Snippet:
    page: Path
    line: int
    language: str
    body: str
    opt_out: str | None  # "compile-only" or "skip"

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def snippets(text: str, page: Path) -> list[Snippet]:
    found = []
    for match in FENCE.finditer(text):
        info = match["info"].strip()
        language = info.split()[0] if info else ""
        line = text.count("\n", 0, match.start()) + 1
        indent = len(match["indent"])
        body = "\n".join(row[indent:] for row in match["body"].splitlines()) + "\n"
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
        marker = MARKER.match(before)
        opt_out = None
        if marker:
            assert marker["kind"] in ("compile-only", "skip"), f"{page}:{line}: unknown snippet marker {before!r}"
            assert marker["reason"], f"{page}:{line}: a snippet opts out only with a reason: {before!r}"
            opt_out = marker["kind"]
        found.append(Snippet(page, line, language, body, opt_out))
    return found


ALL = [snippet for page in PAGES for snippet in snippets(page.read_text(), page)]
PYTHON_SNIPPETS = [s for s in ALL if s.language in PYTHON and s.opt_out != "skip"]
SHELL_SNIPPETS = [s for s in ALL if s.language in SHELL and s.opt_out != "skip"]
JSON_SNIPPETS = [s for s in ALL if s.language == "json" and s.opt_out != "skip"]
TEMPLATE_SNIPPETS = [s for s in ALL if s.language in ("html+django", "django") and s.opt_out != "skip"]
JAVASCRIPT_SNIPPETS = [s for s in ALL if s.language in ("javascript", "js") and s.opt_out != "skip"]


def test_the_pages_have_snippets_of_each_kind() -> None:
    # The fence pattern finds them (a change of the pages' syntax would otherwise pass every test below vacuously).
    assert len(PYTHON_SNIPPETS) > 40
    assert len(SHELL_SNIPPETS) > 20
    assert JSON_SNIPPETS


def test_the_markers_are_read() -> None:
    text = "<!-- snippet: compile-only: needs the reader's project -->\n```python\nx = 1\n```\n"
    [snippet] = snippets(text, ROOT / "x.md")
    assert (snippet.opt_out, snippet.body) == ("compile-only", "x = 1\n")
    with pytest.raises(AssertionError, match="only with a reason"):
        snippets("<!-- snippet: skip -->\n```python\nx = 1\n```\n", ROOT / "x.md")


# Python -----------------------------------------------------------------------------------------------------


def _importable(top: str) -> bool:
    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        return False


def unresolved_imports(tree: ast.AST) -> list[str]:
    """The absolute imports of ``tree`` that do not resolve (skipping packages that are not installed here)."""
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _importable(alias.name.split(".")[0]):
                    try:
                        importlib.import_module(alias.name)
                    except ImportError as exc:
                        problems.append(f"import {alias.name}: {exc}")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if not _importable(node.module.split(".")[0]):
                continue
            try:
                module = importlib.import_module(node.module)
            except ImportError as exc:
                problems.append(f"from {node.module}: {exc}")
                continue
            for alias in node.names:
                if alias.name == "*" or hasattr(module, alias.name):
                    continue
                if _importable_submodule(f"{node.module}.{alias.name}"):
                    continue
                problems.append(f"from {node.module} import {alias.name}: no such name")
    return problems


def _importable_submodule(name: str) -> bool:
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


def _is_declarative(tree: ast.Module) -> bool:
    """Only absolute imports and assignments: a settings or URLconf snippet, run as it is."""
    return all(
        isinstance(node, ast.Import | ast.Assign | ast.AnnAssign)
        or (isinstance(node, ast.ImportFrom) and node.level == 0)
        for node in tree.body
    )


def _reader_imports(tree: ast.Module) -> bool:
    """Whether the snippet imports from the reader's own project (a package that is not installed here)."""
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and not _importable(node.module.split(".")[0]):
            return True
        if isinstance(node, ast.Import) and any(not _importable(a.name.split(".")[0]) for a in node.names):
            return True
    return False


@pytest.mark.parametrize("snippet", PYTHON_SNIPPETS, ids=str)
def test_python_snippet(snippet: Snippet, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    tree = compile(snippet.body, str(snippet), "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    compile(tree, str(snippet), "exec", dont_inherit=True)
    assert unresolved_imports(tree) == [], snippet
    if snippet.opt_out == "compile-only" or not _is_declarative(tree) or _reader_imports(tree):
        return
    # A settings.py excerpt: what a settings module has above it (os, BASE_DIR), and the environment it reads.
    for variable in re.findall(r"""os\.environ\[["'](\w+)["']\]""", snippet.body):
        monkeypatch.setenv(variable, "value")
    namespace: dict[str, Any] = {"__name__": "docs_snippet", "os": os, "BASE_DIR": tmp_path}
    exec(compile(tree, str(snippet), "exec", dont_inherit=True), namespace)  # the docs' own code
    check_definitions(namespace, snippet)


def check_definitions(namespace: dict[str, Any], where: object) -> None:
    """What a settings or URLconf snippet defines is what Django and the app accept."""
    unknown = set(namespace.get("MCP_RESOURCES", {})) - set(DEFAULTS)
    assert not unknown, f"{where}: MCP_RESOURCES keys that are not settings: {sorted(unknown)}"
    for pattern in namespace.get("urlpatterns", []):
        assert isinstance(pattern, URLPattern | URLResolver), f"{where}: {pattern!r} is not a URL pattern"
    for name in ("OAUTH2_PROVIDER", "CHANNEL_LAYERS", "CACHES", "DATABASES"):
        assert isinstance(namespace.get(name, {}), dict), f"{where}: {name} is not a dict"


def test_a_renamed_api_fails() -> None:
    tree = ast.parse("from mcp_resources import ResourceTemplate, NoSuchThing\nfrom mcp_resources.nope import x\n")
    assert unresolved_imports(tree) == [
        "from mcp_resources import NoSuchThing: no such name",
        "from mcp_resources.nope: No module named 'mcp_resources.nope'",
    ]
    # A reader's own modules are not checked.
    assert unresolved_imports(ast.parse("from notes.models import Note\nimport myproject.settings\n")) == []
    with pytest.raises(AssertionError, match="not settings"):
        check_definitions({"MCP_RESOURCES": {"RESOURCE_URL": "x"}}, "here")


# JSON -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("snippet", JSON_SNIPPETS, ids=str)
def test_json_snippet(snippet: Snippet) -> None:
    json.loads(snippet.body)


# Django templates and JavaScript ---------------------------------------------------------------------------


@pytest.mark.parametrize("snippet", TEMPLATE_SNIPPETS, ids=str)
def test_template_snippet(snippet: Snippet) -> None:
    Template(snippet.body)  # compiled by Django's engine: tags and filters exist, blocks close


@pytest.mark.parametrize("snippet", JAVASCRIPT_SNIPPETS, ids=str)
def test_javascript_snippet(snippet: Snippet, tmp_path: Path) -> None:
    node = NODE if NODE.exists() else shutil.which("node")
    if node is None:
        pytest.skip("no Node.js here (make ts-install)")
    script = tmp_path / "snippet.mjs"
    script.write_text(snippet.body)
    checked = subprocess.run([str(node), "--check", str(script)], capture_output=True, text=True, check=False)
    assert checked.returncode == 0, f"{snippet}: {checked.stderr}"


# Shell ------------------------------------------------------------------------------------------------------


def shell_script(snippet: Snippet) -> str:
    """The commands of a snippet: its ``$`` lines (and their continuations) in a console block, else all of it."""
    if snippet.language != "console":
        return snippet.body
    commands: list[str] = []
    continued = False
    for row in snippet.body.splitlines():
        if continued:
            commands.append(row)
        elif row.lstrip().startswith("$ "):
            commands.append(row.lstrip()[2:])
        else:
            continue
        continued = row.endswith("\\")
    return "\n".join(commands) + "\n"


def commands(script: str) -> list[list[str]]:
    """Each simple command of ``script`` as words (comments dropped; ``&&``, ``||``, ``;`` and ``|`` split)."""
    found: list[list[str]] = []
    for line in script.replace("\\\n", " ").splitlines():
        found.append([])
        for word in shlex.split(line, comments=True):
            if word in ("&&", "||", ";", "|"):
                found.append([])
            else:
                found[-1].append(word)
    return [words for words in found if words]


def make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([A-Za-z][\w.-]*)\s*:(?!=)", text, flags=re.MULTILINE))


def pip_extras() -> set[str]:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return set(pyproject["project"]["optional-dependencies"])


def command_problems(words: list[str]) -> list[str]:
    """What is wrong with one command a page tells readers to run."""
    program, args = words[0], words[1:]
    if program == "make":
        targets = make_targets()
        problems = [f"make: no target {arg!r}" for arg in args if "=" not in arg and not arg.startswith("-")]
        problems = [problem for problem in problems if problem.split("'")[1] not in targets]
        for arg in args:
            if arg.startswith("ARGS="):  # make manage ARGS="mcp_list --user alice"
                problems += manage_problems(shlex.split(arg.removeprefix("ARGS=")))
        return problems
    if program == "django-admin":
        return manage_problems(args)
    if program.endswith("python") or program.startswith("python"):
        if args[:1] == ["-m"] or not args:
            return []
        if args[0].endswith("manage.py"):
            return manage_problems(args[1:])
        return [] if (ROOT / args[0]).exists() else [f"no script {args[0]}"]
    if program == "pip" and args[:1] == ["install"]:
        problems = []
        for requirement in args[1:]:
            match = re.fullmatch(r"django-mcp-resources(?:\[([\w,-]+)\])?", requirement)
            if match and match[1]:
                problems += [f"no extra {extra!r}" for extra in match[1].split(",") if extra not in pip_extras()]
        return problems
    return []


def manage_problems(args: list[str]) -> list[str]:
    """A management command and the options it is given exist (``manage.py NAME --option``)."""
    if not args:
        return []
    name = args[0]
    available = get_commands()
    if name not in available:
        return [f"no management command {name!r}"]
    parser = load_command_class(available[name], name).create_parser("manage.py", name)
    known = {option for action in parser._actions for option in action.option_strings}
    given = {re.sub(r"^\[|[=\]].*$", "", arg) for arg in args[1:] if arg.lstrip("[").startswith("--")}
    return [f"manage.py {name}: no option {option}" for option in sorted(given - known)]


@pytest.mark.parametrize("snippet", SHELL_SNIPPETS, ids=str)
def test_shell_snippet(snippet: Snippet) -> None:
    script = shell_script(snippet)
    assert script.strip(), f"{snippet}: a console block without a '$ ' command"
    checked = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True, check=False)
    assert checked.returncode == 0, f"{snippet}: {checked.stderr}"
    if snippet.opt_out == "compile-only":
        return
    problems = [problem for words in commands(script) for problem in command_problems(words)]
    assert problems == [], snippet


def test_a_missing_command_or_option_fails() -> None:
    assert command_problems(["make", "docs", "nosuchtarget", "USER=bob"]) == ["make: no target 'nosuchtarget'"]
    assert command_problems(["python", "manage.py", "mcp_list", "--user", "x", "--prefx", "y"]) == [
        "manage.py mcp_list: no option --prefx"
    ]
    assert command_problems(["python", "manage.py", "mcp_lsit"]) == ["no management command 'mcp_lsit'"]
    assert command_problems(["make", "manage", "ARGS=mcp_read x --user alice --jsn"]) == [
        "manage.py mcp_read: no option --jsn"
    ]
    assert command_problems(["pip", "install", "django-mcp-resources[nope]"]) == ["no extra 'nope'"]
    assert command_problems(["python", "benchmarks/nope.py"]) == ["no script benchmarks/nope.py"]
