"""What docs/deployment.md tells operators to run, run: the health check it documents."""

from __future__ import annotations

import json
import re
from pathlib import Path

from django.test import Client

DEPLOYMENT = (Path(__file__).resolve().parent.parent / "docs" / "deployment.md").read_text()


def documented_health_check() -> tuple[dict[str, str], dict[str, object]]:
    """The headers and the body of the health check's ``curl`` command in docs/deployment.md."""
    command = DEPLOYMENT.split("**Liveness of the endpoint:**", 1)[1].split("```", 2)[1].replace("\\\n", " ")
    headers = dict(header.split(": ", 1) for header in re.findall(r"-H '([^']+)'", command))
    body = json.loads(re.search(r"-d '([^']+)'", command).group(1))
    return headers, body


def test_the_documented_health_check_needs_no_token_and_no_database() -> None:
    # No django_db mark: pytest-django fails any query, so this proves the probe never touches the database.
    headers, body = documented_health_check()
    assert headers.pop("Content-Type") == "application/json"
    extra = {f"HTTP_{name.upper().replace('-', '_')}": value for name, value in headers.items()}
    response = Client().post("/mcp", json.dumps(body), content_type="application/json", **extra)
    assert response.status_code == 200, response.content
    assert "2026-07-28" in response.json()["result"]["supportedVersions"]


def test_a_get_is_no_health_check() -> None:
    assert Client().get("/mcp").status_code == 405


def test_a_host_outside_allowed_hosts_is_refused() -> None:
    _, body = documented_health_check()
    response = Client().post("/mcp", json.dumps(body), content_type="application/json", HTTP_HOST="10.0.0.5")
    assert response.status_code == 400
