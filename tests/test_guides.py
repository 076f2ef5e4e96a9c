"""The client guides (docs/guides/) and the quickstart's sign-in page, run for real.

- The quickstart's ``registration/login.html`` is the template Django's ``LoginView`` renders, and signing in with it
  sends the visitor back to the authorization endpoint (``next``).
- Every Python example of docs/guides/python-sdk.md runs, as written, against a live uvicorn server of the demo with
  the official Python SDK (only its ``URL`` and ``TOKEN`` lines replaced), ``prefix`` included.
- The JavaScript examples of docs/guides/typescript-sdk.md run the same way on Node 22 with the TypeScript SDK 1.x
  (``@modelcontextprotocol/sdk``) and 2.x (``@modelcontextprotocol/client``), as ``make ts-install`` installs them
  into tests/ts/node_modules/ (skipped without it, except under ``CI``).
"""

from __future__ import annotations

import ast
import contextlib
import io
import os
import re
import subprocess
from pathlib import Path

import pytest
from django.template import TemplateDoesNotExist
from django.test import Client, override_settings

from tests import live
from tests.ts import ts_driver

ROOT = Path(__file__).resolve().parent.parent
GUIDES = ROOT / "docs" / "guides"
TS = ROOT / "tests" / "ts"


def blocks(page: Path, language: str) -> list[str]:
    return re.findall(rf"^```{re.escape(language)}\n(.*?)^```$", page.read_text(), flags=re.MULTILINE | re.DOTALL)


# The quickstart's sign-in page ------------------------------------------------------------------------------


def login_template() -> str:
    [template] = blocks(ROOT / "docs" / "quickstart.md", "html+django")
    return template


@pytest.mark.django_db
def test_the_quickstart_sign_in_page_signs_in_and_returns_to_the_authorization_endpoint(alice: object) -> None:
    templates = [
        {
            "BACKEND": "django.template.backends.django.DjangoTemplates",
            "OPTIONS": {
                "loaders": [("django.template.loaders.locmem.Loader", {"registration/login.html": login_template()})],
                "context_processors": ["django.template.context_processors.request"],
            },
        }
    ]
    authorize = "/o/authorize/?client_id=x&response_type=code"
    with override_settings(TEMPLATES=templates):
        client = Client()
        page = client.get("/accounts/login/", {"next": authorize})
        assert page.status_code == 200
        assert page.templates[0].name == "registration/login.html"
        assert b'name="username"' in page.content
        assert b'name="password"' in page.content
        signed_in = client.post("/accounts/login/", {"username": "alice", "password": "alice", "next": authorize})
    assert signed_in.status_code == 302
    assert signed_in["Location"] == authorize


def test_without_the_sign_in_template_the_sign_in_is_a_server_error() -> None:
    # What the quickstart warns about: neither Django nor the app ships registration/login.html.
    templates = [
        {
            "BACKEND": "django.template.backends.django.DjangoTemplates",
            "APP_DIRS": True,
            "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
        }
    ]
    with override_settings(TEMPLATES=templates), pytest.raises(TemplateDoesNotExist):
        Client().get("/accounts/login/")


# Live examples ----------------------------------------------------------------------------------------------


def with_server(code: str, server: live.Server, token: str, *, url: str, token_line: str) -> str:
    """``code`` with its endpoint and token lines pointed at ``server``; fails if the guide's lines moved."""
    assert url in code, "the guide's URL line changed: update this test"
    assert token_line in code, "the guide's TOKEN line changed: update this test"
    filled = token_line.replace("the token printed by mcp_token", token)
    return code.replace(url, server.url).replace(token_line, filled)


@pytest.fixture(scope="module")
def alice_token(demo_server: live.Server) -> str:
    return demo_server.token("alice")


@pytest.mark.e2e
def test_the_python_sdk_guide_runs(demo_server: live.Server, alice_token: str) -> None:
    examples = blocks(GUIDES / "python-sdk.md", "python")
    assert len(examples) == 2
    outputs = []
    for example in examples:
        code = with_server(
            example,
            demo_server,
            alice_token,
            url="http://127.0.0.1:8000/mcp",
            token_line='TOKEN = "the token printed by mcp_token"',
        )
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            # The guide as written (dont_inherit: not this module's `from __future__ import annotations`).
            exec(compile(code, str(GUIDES / "python-sdk.md"), "exec", dont_inherit=True), {"__name__": "guide"})
        outputs.append(printed.getvalue().splitlines())
    connect, prefix = outputs
    assert connect[0] == "2026-07-28"
    assert connect[1].endswith(" resources")
    notes = ast.literal_eval(prefix[0])  # a printed list of URIs
    assert notes
    assert all(uri.startswith("learn://notes/") for uri in notes)
    assert ast.literal_eval(prefix[1]) == ["learn://notes/{id}"]


def node() -> Path:
    ts_driver.require_node()
    return ts_driver.NODE


TS_PACKAGES = {"1.x": "@modelcontextprotocol/sdk", "2.x": "@modelcontextprotocol/client"}


@pytest.mark.e2e
@pytest.mark.parametrize(("line", "example"), [("1.x", 0), ("2.x", 1)])
def test_the_typescript_sdk_guide_runs(
    demo_server: live.Server, alice_token: str, tmp_path: Path, line: str, example: int
) -> None:
    binary = node()
    package = TS / "node_modules" / TS_PACKAGES[line] / "package.json"
    if not package.exists():
        if os.environ.get("CI"):
            pytest.fail(f"CI requires {TS_PACKAGES[line]} (make ts-install)")
        pytest.skip(f"{TS_PACKAGES[line]} is not installed (make ts-install)")
    code = with_server(
        blocks(GUIDES / "typescript-sdk.md", "javascript")[example],
        demo_server,
        alice_token,
        url="http://127.0.0.1:8000/mcp",
        token_line="const TOKEN = 'the token printed by mcp_token';",
    )
    # The module resolves the SDK from tests/ts/node_modules, as from a project's own node_modules.
    (tmp_path / "node_modules").symlink_to(TS / "node_modules")
    script = tmp_path / "guide.mjs"
    script.write_text(code)
    ran = subprocess.run([str(binary), str(script)], capture_output=True, text=True, timeout=120, check=False)
    assert ran.returncode == 0, ran.stderr
    printed = ran.stdout.splitlines()
    if line == "1.x":
        assert printed[0] == "2025-11-25"
    else:
        assert printed[0] == "modern 2026-07-28"
    uris = re.findall(r"'(learn://[^']+)'", ran.stdout)
    assert uris
    assert all(uri.startswith("learn://notes/") for uri in uris)
