"""The suite runs against django-mcp-resources as an outside team gets it: installed from the built wheel into this
interpreter's site-packages, with the source tree nowhere on the path."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

import mcp_resources

from live import ROOT


def test_the_package_comes_from_site_packages() -> None:
    location = Path(mcp_resources.__file__).resolve()
    site_packages = Path(sysconfig.get_paths()["purelib"]).resolve()
    assert location.is_relative_to(site_packages), location
    assert location == site_packages / "mcp_resources" / "__init__.py"


def test_it_was_installed_from_a_wheel_not_a_checkout() -> None:
    distribution = metadata.distribution("django-mcp-resources")
    direct_url = distribution.read_text("direct_url.json")
    assert direct_url is not None, "installed from an index, not from the built wheel"
    origin = json.loads(direct_url)
    assert origin["url"].endswith(".whl"), origin  # the wheel file, not a source directory
    assert not origin.get("dir_info", {}).get("editable"), origin
    assert metadata.version("django-mcp-resources") == mcp_resources.__version__


def test_the_source_tree_is_not_importable() -> None:
    source = ROOT.parents[2]  # the repository this project sits in
    assert (source / "mcp_resources" / "__init__.py").exists()
    paths = {Path(entry or ".").resolve() for entry in sys.path}
    assert source not in paths
    offering = [path for path in paths if (path / "mcp_resources").is_dir()]
    assert offering == [Path(sysconfig.get_paths()["purelib"]).resolve()]
    assert "testproject" not in sys.modules


def test_the_wheel_ships_the_consent_page() -> None:
    template = Path(mcp_resources.__file__).parent / "templates" / "mcp_resources" / "oauth" / "authorize.html"
    assert template.is_file()


def test_manage_py_check_is_clean() -> None:
    completed = subprocess.run(
        [sys.executable, "manage.py", "check", "--fail-level", "WARNING"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "teams_site.settings", "PYTHONPATH": str(ROOT)},
    )
    assert completed.returncode == 0, completed.stderr
    assert "System check identified no issues" in completed.stdout
