"""The shared state-store suite runs every test in this folder against each backend the ``store`` fixture names."""

from __future__ import annotations

import pytest

from gateway.state.memory import MemoryStateStore

BACKENDS = ["memory"]


@pytest.fixture(params=BACKENDS)
async def store(request):
    store = MemoryStateStore()
    await store.start()
    yield store
    await store.close()
