"""The twin list: every ``_speedups/*.pyx`` that setup.py builds has a pure twin listed in ``gateway._speedups``
(and the other way round), each pair exposes the same names, and a compiled module built from older sources refuses
to load."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gateway import _speedups
from tests.support.twins import compiled_twin

ROOT = Path(__file__).resolve().parents[1]


def built_sources() -> set[str]:
    """The names of the extensions setup.py builds, found with the glob pattern setup.py itself uses."""
    pattern = re.search(r'glob\.glob\("([^"]+\.pyx)"\)', (ROOT / "setup.py").read_text())
    assert pattern, "setup.py no longer globs the .pyx sources"
    return {path.stem for path in ROOT.glob(pattern.group(1))}


def test_the_twin_table_names_exactly_the_pyx_sources() -> None:
    assert set(_speedups.TWINS) == built_sources()


def test_every_pure_twin_imports() -> None:
    for name, module in _speedups.TWINS.items():
        assert importlib.import_module(module).__name__ == module, name


@pytest.mark.parametrize("name", sorted(_speedups.TWINS))
def test_each_pair_exposes_the_same_public_names(name: str) -> None:
    compiled, pure = compiled_twin(name), _speedups.pure(name)
    assert compiled.__all__ == pure.__all__
    for public in pure.__all__:
        assert hasattr(compiled, public), f"gateway._speedups.{name} lacks {public}"


@pytest.mark.parametrize(("name", "constant", "changed"), [
    ("sse", "DONE", b"data: [END]\n\n"),
    ("conditions", "_AND", 99),
    ("similarity", "__all__", ["best_match"]),
    ("recordrow", "__all__", ["RecordRows", "RowBuilder"]),
    ("context", "__all__", ["build_context"]),
])
def test_a_stale_build_refuses_to_load_and_the_picker_falls_back_to_pure(name: str, constant: str,
                                                                          changed: object) -> None:
    compiled_twin(name)  # built and loadable as it is
    code = (f"from gateway import _speedups\n"
            f"pure = _speedups.pure({name!r})\n"
            f"setattr(pure, {constant!r}, {changed!r})  # as if the pure twin changed after the build\n"
            f"try:\n    import gateway._speedups.{name}\nexcept ImportError as exc:\n    print('refused:', exc)\n"
            f"_speedups.configure(False)\n"
            f"print('picked:', _speedups.pick({name!r}).__name__, _speedups.ACTIVE[{name!r}])\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert f"refused: gateway._speedups.{name} is stale" in done.stdout
    assert f"picked: {_speedups.TWINS[name]} pure" in done.stdout
