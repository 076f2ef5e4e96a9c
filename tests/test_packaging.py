"""Packaging: the wheel and the sdist as ``python -m build`` makes them, their metadata and the package index's page.

The build runs offline (``--no-isolation``, with the dev extra's setuptools) on a copy of the source tree; CI also
builds in an isolated environment and runs ``twine check`` (``make dist``, a stage of ``.ci/run``).
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from email import message_from_string
from email.message import Message
from pathlib import Path
from types import ModuleType

import django
import pytest

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
HOME = "https://github.com/django-mcp-resources/django-mcp-resources"
SITE = "https://django-mcp-resources.readthedocs.io/en/latest/"  # docs/ built as a site (docs/conf.py)
COPIED = ("mcp_resources", "tests", "docs", "LICENSE", "README.md", "CHANGELOG.md", "MANIFEST.in", "pyproject.toml")


def _load_checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_dist", ROOT / "scripts" / "check_dist.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check_dist = _load_checker()


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``python -m build`` of a copy of the source tree (the sdist, then the wheel built from the sdist)."""
    source = tmp_path_factory.mktemp("source")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "*.sqlite3")
    for name in COPIED:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=ignore)
        elif path.exists():
            shutil.copy2(path, source / name)
    out = tmp_path_factory.mktemp("dist")
    completed = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    return out


def wheel_contents(dist: Path) -> tuple[set[str], Message]:
    [wheel] = dist.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        [metadata] = [name for name in names if name.endswith(".dist-info/METADATA")]
        return names, message_from_string(archive.read(metadata).decode())


def test_the_wheel_and_the_sdist_are_complete(dist: Path) -> None:
    assert check_dist.check(dist) == []
    names, _ = wheel_contents(dist)
    for name in (
        "mcp_resources/py.typed",
        "mcp_resources/migrations/0001_static_resource.py",
        "mcp_resources/templates/mcp_resources/admin/registered_templates.html",
    ):
        assert name in names


def test_twine_check_passes(dist: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *map(str, sorted(dist.iterdir()))],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr


@pytest.mark.parametrize(
    "missing",
    [
        "mcp_resources/py.typed",
        "mcp_resources/templates/mcp_resources/admin/registered_templates.html",
        "mcp_resources/migrations/0001_static_resource.py",
        "mcp_resources/management/commands/mcp_cursor_key.py",
    ],
)
def test_the_check_fails_for_a_wheel_missing_a_file(dist: Path, missing: str) -> None:
    names, metadata = wheel_contents(dist)
    assert check_dist.wheel_problems(names, metadata) == []
    problems = check_dist.wheel_problems(names - {missing}, metadata)
    assert f"the wheel misses {missing}" in problems


def test_the_check_fails_for_a_wheel_without_templates_or_migrations(dist: Path) -> None:
    names, metadata = wheel_contents(dist)
    kept = {name for name in names if "/templates/" not in name and "/migrations/0" not in name}
    problems = check_dist.wheel_problems(kept, metadata)
    assert "the wheel holds no templates" in problems
    assert "the wheel holds no migrations" in problems


def test_the_sdist_ships_no_tests(dist: Path) -> None:
    # The tests need the demo project, live servers, PostgreSQL and Redis: they run from a checkout (MANIFEST.in).
    [sdist] = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = set(archive.getnames())
    assert not [name for name in names if "/tests/" in name]
    assert check_dist.sdist_problems(names | {"pkg/tests/test_x.py"}) == [
        "the sdist ships tests that cannot run from it: ['tests/test_x.py']..."
    ]


def test_the_metadata(dist: Path) -> None:
    _, metadata = wheel_contents(dist)
    assert metadata["License-Expression"] == "BSD-3-Clause"
    urls = dict(entry.split(", ", 1) for entry in metadata.get_all("Project-URL"))
    assert urls["Homepage"] == HOME
    assert set(urls) == {"Homepage", "Documentation", "Repository", "Issues", "Changelog"}
    assert urls.pop("Documentation") == SITE
    assert all(url.startswith(HOME) for url in urls.values())
    # The package index shows docs/pypi.md, not the repository's README.
    assert metadata.get_payload().strip() == (ROOT / "docs" / "pypi.md").read_text().strip()


def test_classifiers_name_the_versions_this_suite_runs_on() -> None:
    classifiers = PYPROJECT["project"]["classifiers"]
    python = f"Programming Language :: Python :: {sys.version_info.major}.{sys.version_info.minor}"
    assert python in classifiers
    assert f"Framework :: Django :: {django.VERSION[0]}.{django.VERSION[1]}" in classifiers
    assert any(classifier.startswith("Development Status :: ") for classifier in classifiers)
    assert "Typing :: Typed" in classifiers
    assert "Framework :: Django" in classifiers
    # No license classifier next to the SPDX expression (PEP 639 forbids both).
    assert not [classifier for classifier in classifiers if classifier.startswith("License ::")]


def test_the_license_file() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("BSD 3-Clause License\n")
    assert re.search(r"^Copyright \(c\) \d{4}, the django-mcp-resources authors$", text, re.MULTILINE)
    assert "Neither the name of the copyright holder nor the names of its" in text
    assert PYPROJECT["project"]["license"] == "BSD-3-Clause"
    assert PYPROJECT["project"]["license-files"] == ["LICENSE"]


def test_the_package_index_page_links_absolutely_and_has_no_repository_instructions() -> None:
    page = (ROOT / "docs" / "pypi.md").read_text()
    assert check_dist.description_problems(page) == []
    # The check does catch what the repository's README does (relative links, `make demo`).
    readme_problems = check_dist.description_problems((ROOT / "README.md").read_text())
    assert any("links to 'docs/" in problem for problem in readme_problems)
    assert any("'make demo'" in problem for problem in readme_problems)


def _code_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, re.DOTALL)


def test_the_package_index_page_shows_the_readme_example_unchanged() -> None:
    # The example of "In 30 seconds" is written twice; both copies must stay the same.
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## In 30 seconds", 1)[1].split("\n## ", 1)[0]
    page = (ROOT / "docs" / "pypi.md").read_text()
    for block in _code_blocks(section):
        assert block in _code_blocks(page)


# The wheel with only its required dependencies ----------------------------------------------------------------

MINIMAL_SETTINGS = """
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent
SECRET_KEY = "minimal-install-test"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1"]
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "oauth2_provider",
    "mcp_resources",
    "notes",
]
ROOT_URLCONF = "urls"
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": BASE_DIR / "db.sqlite3"}}
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
MCP_RESOURCES = {"RESOURCE_URI": "http://127.0.0.1:{port}/mcp"}
"""

MINIMAL_FILES = {
    "urls.py": 'from django.urls import include, path\n\nurlpatterns = [path("mcp", include("mcp_resources.urls"))]\n',
    "notes/__init__.py": "",
    "notes/models.py": """
from django.conf import settings
from django.db import models


class Note(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    title = models.CharField(max_length=200)
    body = models.TextField()
""",
    "notes/mcp_resources.py": """
from mcp_resources import ModelResourceTemplate, register

from .models import Note


@register
class NoteResource(ModelResourceTemplate):
    model = Note
    name = "notes"
    uri_template = "notes://notes/{id}"
    mime_type = "text/plain"
    access = "protected"
    required_scopes = ("notes:read",)
    ordering = ("id",)
    name_field = "title"
    owner_field = "owner"

    def get_contents(self, request, obj):
        return obj.body
""",
}


def _run(python: Path, *args: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    completed = subprocess.run(
        [str(python), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert completed.returncode == 0, f"{args}: {completed.stdout[-3000:]}{completed.stderr[-3000:]}"
    return completed.stdout


@pytest.fixture(scope="module")
def minimal_python(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv holding the wheel and its required dependencies only (from the package index)."""
    venv = tmp_path_factory.mktemp("minimal") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    [wheel] = dist.glob("*.whl")
    _run(python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(wheel), cwd=venv)
    return python


def _post(url: str, token: str, method: str, params: dict[str, object], name: str | None = None) -> dict:
    import json
    import urllib.request

    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": method,
    }
    if name is not None:
        headers["Mcp-Name"] = name
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())["result"]


def test_the_wheel_without_extras_serves_list_read_and_templates(minimal_python: Path, tmp_path: Path) -> None:
    """Only the required dependencies (no extra: no REST framework, no Redis server, no OpenTelemetry): a project of
    its own migrates, checks, mints a token and serves resources/list, resources/templates/list and resources/read
    from a real server."""
    import socket
    import time
    import urllib.error
    import urllib.request

    installed = _run(minimal_python, "-m", "pip", "list", "--format=freeze", cwd=tmp_path).lower()
    for extra in ("djangorestframework", "channels-redis", "opentelemetry"):
        assert extra not in installed
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (tmp_path / "settings.py").write_text(MINIMAL_SETTINGS.replace("{port}", str(port)))
    for name, text in MINIMAL_FILES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    env = {"PATH": str(minimal_python.parent), "DJANGO_SETTINGS_MODULE": "settings", "PYTHONPATH": str(tmp_path)}
    manage = ("-m", "django")
    _run(minimal_python, *manage, "makemigrations", "notes", "--verbosity", "0", cwd=tmp_path, env=env)
    _run(minimal_python, *manage, "migrate", "--verbosity", "0", cwd=tmp_path, env=env)
    _run(
        minimal_python,
        *manage,
        "shell",
        "-c",
        "from django.contrib.auth.models import User; from notes.models import Note; "
        "alice = User.objects.create_user('alice'); bob = User.objects.create_user('bob'); "
        "[Note.objects.create(owner=alice, title=f'Note {i}', body=f'Body {i}') for i in range(3)]; "
        "Note.objects.create(owner=bob, title='Secret', body='Not for alice')",
        cwd=tmp_path,
        env=env,
    )
    assert "(mcp_resources.E" not in _run(minimal_python, *manage, "check", cwd=tmp_path, env=env)
    token = _run(
        minimal_python, *manage, "mcp_token", "--user", "alice", "--scope", "notes:read", cwd=tmp_path, env=env
    ).strip()
    server = subprocess.Popen(
        [str(minimal_python), *manage, "runserver", f"127.0.0.1:{port}", "--noreload", "--skip-checks"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        for _ in range(600):  # until the server listens (bounded: it exits or answers long before)
            assert server.poll() is None, server.communicate()[1][-3000:]
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                time.sleep(0.1)
        listed = _post(url, token, "resources/list", {})
        assert [r["name"] for r in listed["resources"]] == ["Note 0", "Note 1", "Note 2"]
        templates = _post(url, token, "resources/templates/list", {})
        assert [t["uriTemplate"] for t in templates["resourceTemplates"]] == ["notes://notes/{id}"]
        first = listed["resources"][0]["uri"]
        read = _post(url, token, "resources/read", {"uri": first}, name=first)
        assert read["contents"][0]["text"] == "Body 0"
        with pytest.raises(urllib.error.HTTPError) as refused:  # bob's note: not found, as a missing one
            _post(url, token, "resources/read", {"uri": "notes://notes/4"}, name="notes://notes/4")
        assert refused.value.code == 400
        assert b"Resource not found" in refused.value.read()
    finally:
        server.terminate()
        server.wait(timeout=30)
