"""Fixtures shared by the micro benchmarks: the SSE twin under test, pure and compiled."""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

from gateway import _speedups
from gateway.http import sse as pure_sse


def compiled_twin() -> ModuleType:
    if _speedups.NO_EXTENSIONS:
        pytest.skip("GATEWAY_NO_EXTENSIONS is set: the compiled twin is not in use")
    try:
        return importlib.import_module("gateway._speedups.sse")
    except ImportError as exc:
        pytest.fail(f"gateway._speedups.sse is not built ({exc}); run python setup.py build_ext --inplace")


@pytest.fixture(params=["pure", "compiled"])
def sse(request: pytest.FixtureRequest) -> ModuleType:
    """The SSE module under test (``pure`` or ``compiled``), used directly."""
    return pure_sse if request.param == "pure" else compiled_twin()


@pytest.fixture
def sse_in_use(sse: ModuleType, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The SSE module under test, also installed as ``_speedups.sse`` (what the adapters' stream transformers use)."""
    monkeypatch.setattr(_speedups, "sse", sse, raising=False)
    return sse
