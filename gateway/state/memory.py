"""In-process StateStore: a dict with expiry times, for one worker (the embedded default)."""

from __future__ import annotations

import time
from typing import Callable

from gateway.state.base import StateStore


class MemoryStateStore(StateStore):
    backend = "memory"

    def __init__(self, clock: Callable[[], float] = time.monotonic, max_keys: int = 100_000) -> None:
        self.clock = clock
        self.max_keys = max_keys
        self._data: dict[str, tuple[float | None, bytes | int]] = {}

    def _live(self, key: str) -> bytes | int | None:
        item = self._data.get(key)
        if item is None:
            return None
        expires, value = item
        if expires is not None and expires <= self.clock():
            del self._data[key]
            return None
        return value

    def _expiry(self, ttl_ms: int | None) -> float | None:
        return None if ttl_ms is None else self.clock() + ttl_ms / 1000

    def _make_room(self) -> None:
        if len(self._data) >= self.max_keys:
            now = self.clock()
            for key in [k for k, (e, _) in self._data.items() if e is not None and e <= now]:
                del self._data[key]
            while len(self._data) >= self.max_keys:
                del self._data[next(iter(self._data))]

    async def get(self, key: str) -> bytes | None:
        value = self._live(key)
        if isinstance(value, int):
            return str(value).encode()
        return value

    async def set(self, key: str, value: bytes, ttl_ms: int | None = None) -> None:
        self._make_room()
        self._data[key] = (self._expiry(ttl_ms), value)

    async def delete(self, key: str) -> None:
        self._data.pop(key, None)

    async def incr(self, key: str, amount: int = 1, ttl_ms: int | None = None) -> int:
        value = self._live(key)
        if value is None:
            self._make_room()
            new = amount
            expires = self._expiry(ttl_ms)
        else:
            new = (value if isinstance(value, int) else int(value)) + amount
            expires = self._data[key][0]
        self._data[key] = (expires, new)
        return new
