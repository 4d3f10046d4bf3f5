"""Every compiled module built from _speedups/*.pyx has a registered pure twin, and the other way round."""

from __future__ import annotations

import importlib
from pathlib import Path

from gateway import _speedups

ROOT = Path(__file__).resolve().parents[1]


def test_the_twin_table_names_exactly_the_pyx_sources() -> None:
    sources = {p.stem for p in (ROOT / "_speedups").glob("*.pyx")}
    assert set(_speedups.TWINS) == sources


def test_every_pure_twin_imports() -> None:
    for name, module in _speedups.TWINS.items():
        assert importlib.import_module(module).__name__ == module, name
