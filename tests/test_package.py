"""The package's version: the one pyproject.toml installs, named in the gateway's outbound User-Agent."""

from __future__ import annotations

import tomllib
from pathlib import Path

import gateway

ROOT = Path(__file__).resolve().parents[1]


def test_the_version_is_the_one_pyproject_installs_and_the_user_agent_names_it():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert gateway.__version__ == project["version"]
    assert gateway.USER_AGENT == f"gateway/{project['version']}"

