"""The compiled twin of a speedups module for tests: skipped only when extensions are switched off on purpose
(GATEWAY_NO_EXTENSIONS), a failure when it should be there and is not built."""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

from gateway._speedups import NO_EXTENSIONS


def compiled_twin(name: str) -> ModuleType:
    if NO_EXTENSIONS:
        pytest.skip("GATEWAY_NO_EXTENSIONS is set: the compiled twin is not in use")
    try:
        return importlib.import_module(f"gateway._speedups.{name}")
    except ImportError as exc:
        pytest.fail(f"gateway._speedups.{name} is not built ({exc}); run python setup.py build_ext --inplace")
