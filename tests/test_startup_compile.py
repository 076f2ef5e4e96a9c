"""Templates compile at startup (issue 15): when the default registry freezes (the app registry is ready), a template
whose ``uri_template`` does not compile stops the process with the message of the system check
``mcp_resources.E001``, under ``django.setup()``, uvicorn and gunicorn alike (servers run no system checks, and a
broken template used to be advertised by ``resources/templates/list``). Each start is a real process of a project
whose app registers such a template.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from mcp_resources.checks import check_templates
from mcp_resources.registries import ResourceRegistry
from mcp_resources.resources import ModelResourceTemplate, ResourceTemplate
from tests.live import ROOT


def checked(*templates: Any) -> list[checks.CheckMessage]:
    registry = ResourceRegistry("startup")
    for template in templates:
        registry.register(template)
    return check_templates(registry)


BAD_APP = """
from mcp_resources import ResourceTemplate, register


@register
class Unbalanced(ResourceTemplate):
    name = "unbalanced"
    uri_template = "broken://items/{id"

    def read(self, request, uri, variables):
        return "never"
"""


@pytest.fixture(scope="module")
def bad_project(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a project whose app registers a template that does not compile."""
    root = tmp_path_factory.mktemp("badstart")
    (root / "badstart").mkdir()
    (root / "badstart" / "__init__.py").write_text("")
    (root / "badstart" / "mcp_resources.py").write_text(BAD_APP)
    (root / "badstart_settings.py").write_text(
        "from testproject.settings import *  # noqa: F403\n\nINSTALLED_APPS = [*INSTALLED_APPS, 'badstart']  # noqa\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "PYTHONPATH")}
    env.update(PYTHONPATH=os.pathsep.join([str(root), str(ROOT)]), DJANGO_SETTINGS_MODULE="badstart_settings")
    return env


def expected_message() -> str:
    """What ``manage.py check`` would say of the template, from the check itself."""
    namespace: dict[str, Any] = {}
    exec(BAD_APP.replace("@register\n", ""), namespace)  # the class, without registering it anywhere
    (message,) = checked(namespace["Unbalanced"])
    assert message.id == "mcp_resources.E001"
    return f"({message.id}) {message.msg}"


def run(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # The timeout only keeps a broken test from hanging the suite; a failing start ends at once.
    return subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)


STARTS = {
    "django.setup": [sys.executable, "-c", "import django; django.setup()"],
    "uvicorn": [sys.executable, "-m", "uvicorn", "testproject.asgi:application", "--port", "0"],
    "gunicorn": [sys.executable, "-m", "gunicorn", "testproject.wsgi:application", "--bind", "127.0.0.1:0"],
}


@pytest.mark.parametrize("start", list(STARTS))
def test_a_template_that_does_not_compile_stops_the_process_from_starting(
    bad_project: dict[str, str], start: str
) -> None:
    finished = run(STARTS[start], bad_project)
    assert finished.returncode != 0
    output = finished.stdout + finished.stderr
    assert f"django.core.exceptions.ImproperlyConfigured: {expected_message()}" in output
    assert expected_message() == (
        "(mcp_resources.E001) Unbalanced.uri_template does not parse: unbalanced brace in 'broken://items/{id'"
    )


def test_the_same_project_with_valid_templates_starts(bad_project: dict[str, str]) -> None:
    finished = run(STARTS["django.setup"], {**bad_project, "DJANGO_SETTINGS_MODULE": "testproject.settings"})
    assert finished.returncode == 0, finished.stderr


def test_freezing_a_registry_compiles_its_templates() -> None:
    namespace: dict[str, Any] = {}
    exec(BAD_APP.replace("@register\n", ""), namespace)
    registry = ResourceRegistry("to-freeze")
    registry.register(namespace["Unbalanced"])
    with pytest.raises(ImproperlyConfigured) as info:
        registry.freeze()
    assert str(info.value) == expected_message()
    assert not registry.frozen


# The checks that protect answers (issue 26) -------------------------------------------------------------------

NON_UNIQUE = """
from mcp_resources import ModelResourceTemplate
from testproject.library.models import Document


class ByTitle(ModelResourceTemplate):
    model = Document
    name = "by-title"
    uri_template = "titles://documents/{title}"
    owner_field = "owner"
    ordering = ("id",)
"""

NON_UNIQUE_APP = (
    NON_UNIQUE
    + """
from mcp_resources import register

register(ByTitle)
"""
)

OWN_URLS = (
    NON_UNIQUE
    + """
from django.urls import path
from mcp_resources import MCPServer, MCPView, ResourceRegistry

own = ResourceRegistry("own")
own.register(ByTitle)
urlpatterns = [path("mcp", MCPView.as_view(server=MCPServer(own)))]
"""
)


def non_unique_message() -> str:
    """What ``manage.py check`` says of ``ByTitle`` (E023), from the check itself, with its hint."""
    namespace: dict[str, Any] = {}
    exec(NON_UNIQUE, namespace)
    (message,) = checked(namespace["ByTitle"])
    assert message.id == "mcp_resources.E023"
    return f"({message.id}) {message.msg} HINT: {message.hint}"


@pytest.fixture(scope="module")
def non_unique_project(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A project whose app registers a model template whose URI variable (a title) names no unique field; and the
    same project without that app, serving a registry of its own with the template (``own_settings``)."""
    root = tmp_path_factory.mktemp("nonunique")
    (root / "nonunique").mkdir()
    (root / "nonunique" / "__init__.py").write_text("")
    (root / "nonunique" / "mcp_resources.py").write_text(NON_UNIQUE_APP)
    (root / "nonunique_settings.py").write_text(
        "from testproject.settings import *  # noqa: F403\n\nINSTALLED_APPS = [*INSTALLED_APPS, 'nonunique']  # noqa\n"
    )
    (root / "own_urls.py").write_text(OWN_URLS)
    (root / "own_settings.py").write_text(
        "from testproject.settings import *  # noqa: F403\n\nROOT_URLCONF = 'own_urls'\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "PYTHONPATH")}
    env.update(PYTHONPATH=os.pathsep.join([str(root), str(ROOT)]), DJANGO_SETTINGS_MODULE="nonunique_settings")
    return env


@pytest.mark.parametrize("start", list(STARTS))
def test_a_non_unique_lookup_stops_the_process_from_starting(non_unique_project: dict[str, str], start: str) -> None:
    """Under gunicorn or uvicorn such a template listed one URI twice in a page and answered its read -32603."""
    finished = run(STARTS[start], non_unique_project)
    assert finished.returncode != 0
    output = finished.stdout + finished.stderr
    assert f"django.core.exceptions.ImproperlyConfigured: {non_unique_message()}" in output
    assert "(mcp_resources.E023) ByTitle's URI variables ['title'] do not identify one library.Document" in output


def test_a_silenced_check_is_not_enforced(non_unique_project: dict[str, str]) -> None:
    """A get_queryset() that makes the lookups unique per caller is the documented reason to silence E023."""
    code = "import django; django.setup(); print('served')"
    env = {**non_unique_project, "DJANGO_SETTINGS_MODULE": "silenced_settings"}
    root = non_unique_project["PYTHONPATH"].split(os.pathsep)[0]
    with open(os.path.join(root, "silenced_settings.py"), "w") as settings_file:
        settings_file.write(
            "from nonunique_settings import *  # noqa: F403\n\nSILENCED_SYSTEM_CHECKS = ['mcp_resources.E023']\n"
        )
    finished = run([sys.executable, "-c", code], env)
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.strip() == "served"


def test_a_registry_the_project_created_is_checked_before_it_is_served(non_unique_project: dict[str, str]) -> None:
    """The project's own registry, served by ``MCPView.as_view(server=MCPServer(own))`` under uvicorn: its URLconf
    refuses to load with the check's message, and no request is answered from it (they used to be)."""
    from tests import live

    env = {**non_unique_project, "DJANGO_SETTINGS_MODULE": "own_settings"}
    with live.project(Path(env["PYTHONPATH"].split(os.pathsep)[0])) as project:
        server = live.Server(project, name="own-registry", env=env).start()
        try:
            body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}
            reply = httpx2.post(server.url, json=body, headers={"Accept": "application/json, text/event-stream"})
        finally:
            server.stop()
    assert reply.status_code == 500
    assert f"ImproperlyConfigured: {non_unique_message()}" in server.logged()


def test_a_registry_is_checked_when_a_server_first_serves_it() -> None:
    """In-process: the first call of an MCPServer over an unfrozen registry, and MCPView.as_view over it."""
    from mcp_resources import MCPServer, MCPView
    from tests.listing_support import context

    namespace: dict[str, Any] = {}
    exec(NON_UNIQUE, namespace)
    for serve in (
        lambda registry: MCPServer(registry).call("resources/templates/list", {}, context()),
        lambda registry: MCPView.as_view(server=MCPServer(registry)),
    ):
        registry = ResourceRegistry("own")
        registry.register(namespace["ByTitle"])
        with pytest.raises(ImproperlyConfigured) as info:
            serve(registry)
        assert str(info.value) == non_unique_message()
        assert not registry.frozen


def _read(self: Any, request: Any, uri: str, variables: Any) -> str:
    return ""


def _template(name: str, base: type = ResourceTemplate, **attrs: Any) -> type:
    return type(name.title().replace("-", ""), (base,), {"name": name, "read": _read, **attrs})


def _documents(name: str, **attrs: Any) -> type:
    from testproject.library.models import Document

    defaults = {"model": Document, "uri_template": f"{name}://{{id}}", "owner_field": "owner"}
    return _template(name, ModelResourceTemplate, **{**defaults, "read": ModelResourceTemplate.read, **attrs})


SERVING = {
    "E003": lambda: [
        _template("items", uri_template="shop://items/{id}"),
        _template("everything", uri_template="shop://{+path}"),
    ],
    "E005": lambda: [_documents("unscoped", owner_field=None)],
    "E019": lambda: [_documents("bad-owner", owner_field="member")],
    "E023": lambda: [_documents("by-title", uri_template="by-title://{title}")],
    "E036": lambda: [_documents("public-docs", cache_control=lambda self, request: ("public", 1_000))],
}


@pytest.mark.parametrize("check_id", sorted(SERVING))
def test_each_check_that_protects_answers_stops_a_registry_as_it_freezes(check_id: str, settings: Any) -> None:
    """E003, E005, E019, E023 and E036 stop a registry with their own message; silenced, they do not."""
    registry = ResourceRegistry(check_id)
    for template in SERVING[check_id]():
        registry.register(template)
    assert [message.id for message in check_templates(registry)] == [f"mcp_resources.{check_id}"]
    with pytest.raises(ImproperlyConfigured, match=rf"^\(mcp_resources\.{check_id}\) "):
        registry.freeze()
    assert not registry.frozen
    settings.SILENCED_SYSTEM_CHECKS = [f"mcp_resources.{check_id}"]
    registry.freeze()
    assert registry.frozen


def test_a_warning_does_not_stop_a_registry() -> None:
    """Only the checks that protect answers are enforced: W002 (a nullable ordering field) is reported, not enforced."""
    registry = ResourceRegistry("warned")
    registry.register(_documents("nullable", ordering=("deleted_at", "id")))
    assert [message.id for message in check_templates(registry)] == ["mcp_resources.W002"]
    registry.freeze()
    assert registry.frozen
