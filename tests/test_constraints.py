"""The pinned install: the README's commands, .ci/run and the Dockerfile install constraints.txt's versions, and
those versions cover and satisfy every dependency pyproject.toml declares."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not an exact pin"
            pins[canonicalize_name(name)] = version
    return pins


def _quickstart_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    return re.findall(r"^python3 -m venv \.venv && .*$", readme, re.M)[:2]


def test_every_declared_dependency_is_pinned_to_a_version_its_range_allows():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    declared = [*project["project"]["dependencies"], *project["project"]["optional-dependencies"]["test"],
                *project["build-system"]["requires"]]
    pins = _pins()
    for text in declared:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate():
            continue
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is declared in pyproject.toml but not pinned in constraints.txt"
        assert req.specifier.contains(pins[name], prereleases=True), \
            f"constraints.txt pins {req.name}=={pins[name]}, outside pyproject.toml's {req.specifier}"


def test_the_quickstart_ci_and_the_image_install_the_pinned_versions():
    install, test = _quickstart_commands()
    assert install.startswith("python3 -m venv .venv && PIP_CONSTRAINT=constraints.txt .venv/bin/pip install . ")
    assert "PIP_CONSTRAINT=constraints.txt .venv/bin/pip install -q -e '.[test]'" in test
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test in ci_lines, ".ci/run must run the README's test command verbatim"
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "PIP_CONSTRAINT=/src/constraints.txt pip wheel" in dockerfile
    assert "!constraints.txt" in (ROOT / ".dockerignore").read_text().splitlines()
