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
from typing import Any

import pytest
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from mcp_resources.checks import check_templates
from mcp_resources.registries import ResourceRegistry
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
