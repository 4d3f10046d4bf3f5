"""Fixtures shared by the micro benchmarks: the SSE twin under test, pure and compiled; one BLAS thread."""

from __future__ import annotations

import os
from types import ModuleType

import pytest

from gateway.http import sse as pure_sse
from gateway.providers import vendorA
from gateway.providers.anthropic import stream as anthropic_stream
from gateway.providers.cloudC import stream as cloudC_stream
from tests.support.twins import compiled_twin

# the semantic-cache benchmarks pin themselves to one core: numpy's BLAS must not start a second thread there
# (set before any benchmark module imports numpy)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


@pytest.fixture(params=["pure", "compiled"])
def sse(request: pytest.FixtureRequest) -> ModuleType:
    """The SSE module under test (``pure`` or ``compiled``), used directly."""
    return pure_sse if request.param == "pure" else compiled_twin("sse")


@pytest.fixture
def sse_in_use(sse: ModuleType, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The SSE module under test, also installed in the adapters' stream modules benchmarked here (in place of the
    names they import from ``gateway._speedups.sse_in_use``)."""
    for user in (vendorA, anthropic_stream, cloudC_stream):
        for name in ("SseSplitter", "encode_event", "is_done", "scan_relay"):
            if hasattr(user, name):
                monkeypatch.setattr(user, name, getattr(sse, name))
    return sse
