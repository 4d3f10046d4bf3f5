"""Gateway keys for tests: store a key of any workspace and role in a data directory before the gateway starts."""

from __future__ import annotations

import asyncio
from pathlib import Path

from gateway.controlplane.keys import ApiKeys
from gateway.state.sqlite import SQLiteStateStore


def add_key(data_dir: str, key: str, workspace: str, role: str = "member") -> None:
    """Store ``key`` (the secret itself) as a ``role`` key of ``workspace`` in the embedded store of ``data_dir``."""
    folder = Path(data_dir)
    folder.mkdir(parents=True, exist_ok=True)

    async def store_it() -> None:
        store = SQLiteStateStore(str(folder / "state.db"), str(folder / "cache.db"))
        await store.start()
        try:
            await ApiKeys(store).create(name=f"test {role}", role=role, workspace=workspace, secret=key)
        finally:
            await store.close()

    asyncio.run(store_it())
