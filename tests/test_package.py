"""The package's version: the one pyproject.toml installs, named in the gateway's outbound User-Agent."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import gateway

ROOT = Path(__file__).resolve().parents[1]


def test_the_version_is_the_one_pyproject_installs_and_the_user_agent_names_it():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert gateway.__version__ == project["version"]
    assert gateway.USER_AGENT == f"gateway/{project['version']}"


def test_importing_the_app_reads_no_package_metadata():
    code = "import sys, gateway.app; print('importlib.metadata' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"
