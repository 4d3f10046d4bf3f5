"""The StateStore interface: what every piece of state shared between workers (breakers, limits, cache) uses.

Implementations: ``memory.MemoryStateStore`` (one process) and, with the control-plane work, Redis. Keys are
strings; values bytes; ``ttl_ms`` None means no expiry. Every call is bounded: implementations must not wait
without limit.
"""

from __future__ import annotations

import abc


class StateStore(abc.ABC):
    #: name shown by /health
    backend: str = "abstract"

    @abc.abstractmethod
    async def get(self, key: str) -> bytes | None: ...

    @abc.abstractmethod
    async def set(self, key: str, value: bytes, ttl_ms: int | None = None) -> None: ...

    @abc.abstractmethod
    async def delete(self, key: str) -> None: ...

    @abc.abstractmethod
    async def incr(self, key: str, amount: int = 1, ttl_ms: int | None = None) -> int:
        """Add ``amount`` and return the new value; ``ttl_ms`` is set when the key is created."""

    async def close(self) -> None:
        return None
