"""The twin list: every ``_speedups/*.pyx`` that setup.py builds has a pure twin and a module naming both that
``/health`` lists (and the other way round); each pair exposes the same names; the module in use serves the compiled
twin unless extensions are switched off; and a compiled module built from older sources refuses to load, so the
pure twin is used."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from gateway._speedups import NO_EXTENSIONS, context_in_use, sse_in_use
from gateway.api.health import speedups
from gateway.cache import similarity as pure_similarity
from gateway.cache import similarity_in_use
from gateway.http import context as pure_context
from gateway.http import sse as pure_sse
from gateway.observability import recordrow as pure_recordrow
from gateway.observability import recordrow_in_use
from gateway.routing import conditions as pure_conditions
from gateway.routing import conditions_in_use
from gateway.upstream import head as pure_head
from gateway.upstream import head_in_use
from tests.support.twins import compiled_twin

ROOT = Path(__file__).resolve().parents[1]
#: compiled module name -> (its pure twin, the module naming both and the one in use)
TWINS: dict[str, tuple[ModuleType, ModuleType]] = {
    "sse": (pure_sse, sse_in_use),
    "conditions": (pure_conditions, conditions_in_use),
    "similarity": (pure_similarity, similarity_in_use),
    "recordrow": (pure_recordrow, recordrow_in_use),
    "context": (pure_context, context_in_use),
    "head": (pure_head, head_in_use),
}


def built_sources() -> set[str]:
    """The names of the extensions setup.py builds, found with the glob pattern setup.py itself uses."""
    pattern = re.search(r'glob\.glob\("([^"]+\.pyx)"\)', (ROOT / "setup.py").read_text())
    assert pattern, "setup.py no longer globs the .pyx sources"
    return {path.stem for path in ROOT.glob(pattern.group(1))}


def test_the_twin_table_names_exactly_the_pyx_sources() -> None:
    assert set(speedups()) == built_sources()
    assert set(TWINS) == built_sources()


def test_every_compiled_module_has_a_type_stub_of_its_pure_twins_names() -> None:
    for name, (pure, _) in TWINS.items():
        stub = (ROOT / "gateway" / "_speedups" / f"{name}.pyi").read_text()
        assert f"from {pure.__name__} import *" in stub, name


@pytest.mark.parametrize("name", sorted(TWINS))
def test_each_pair_exposes_the_same_public_names(name: str) -> None:
    compiled, pure = compiled_twin(name), TWINS[name][0]
    assert compiled.__all__ == pure.__all__
    for public in pure.__all__:
        assert hasattr(compiled, public), f"gateway._speedups.{name} lacks {public}"


@pytest.mark.parametrize("name", sorted(TWINS))
def test_the_module_in_use_serves_the_compiled_twin_unless_switched_off(name: str) -> None:
    pure, in_use = TWINS[name]
    expected = pure if NO_EXTENSIONS else compiled_twin(name)
    assert in_use.IMPLEMENTATION == speedups()[name] == ("pure" if NO_EXTENSIONS else "compiled")
    served = [public for public in pure.__all__ if hasattr(in_use, public)]
    assert served, f"{in_use.__name__} names nothing of {pure.__name__}"
    for public in served:
        assert getattr(in_use, public) is getattr(expected, public), f"{in_use.__name__}.{public}"


@pytest.mark.parametrize(("name", "constant", "changed"), [
    ("sse", "DONE", b"data: [END]\n\n"),
    ("conditions", "_AND", 99),
    ("similarity", "__all__", ["best_match"]),
    ("recordrow", "__all__", ["RecordRows", "RowBuilder"]),
    ("context", "__all__", ["build_context"]),
    ("head", "_BODYLESS", frozenset(("GET",))),
])
def test_a_stale_build_refuses_to_load_and_the_pure_twin_is_used(name: str, constant: str, changed: object) -> None:
    compiled_twin(name)  # built and loadable as it is
    pure, in_use = TWINS[name]
    code = (f"import importlib\n"
            f"pure = importlib.import_module({pure.__name__!r})\n"
            f"setattr(pure, {constant!r}, {changed!r})  # as if the pure twin changed after the build\n"
            f"try:\n    import gateway._speedups.{name}\nexcept ImportError as exc:\n    print('refused:', exc)\n"
            f"in_use = importlib.import_module({in_use.__name__!r})\n"
            f"print('in use:', in_use.IMPLEMENTATION)\n")
    environ = {k: v for k, v in os.environ.items() if k not in ("GATEWAY_NO_EXTENSIONS", "GATEWAY_SERVE_SETTINGS")}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          check=False, env=environ)
    assert done.returncode == 0, done.stderr
    assert f"refused: gateway._speedups.{name} is stale" in done.stdout
    assert "in use: pure" in done.stdout
