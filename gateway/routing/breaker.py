"""Circuit breaker: a target that fails ``failure_threshold`` times is skipped for ``cooldown_interval`` ms.

Counted failures: statuses in ``failure_status_codes`` when given, else 5xx, 429, timeouts (408, 504) and connection
failures. After the cooldown the target is tried again (half-open): a success closes the breaker, a failure opens
it again at once. State lives in the StateStore, so every worker (and, with Redis, every instance) sees it; the
clock is injectable for tests.
"""

from __future__ import annotations

import time
from typing import Callable

from gateway.state.base import StateStore

DEFAULT_FAILURE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


def counts_as_failure(status: int, failure_status_codes: list[int] | None) -> bool:
    if failure_status_codes:
        return status in failure_status_codes
    return status in DEFAULT_FAILURE_STATUSES or status >= 500


class CircuitBreaker:
    def __init__(self, store: StateStore, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock

    async def is_open(self, key: str) -> bool:
        """True while the target is in its cooldown."""
        raw = await self.store.get(f"cb:{key}:open")
        return raw is not None and float(raw) > self.clock()

    async def record_success(self, key: str) -> None:
        await self.store.delete(f"cb:{key}:fails")
        await self.store.delete(f"cb:{key}:half")

    async def record_failure(self, key: str, threshold: float, cooldown_ms: float) -> bool:
        """Count a failure; returns True when this failure opened the breaker."""
        half_open = await self.store.get(f"cb:{key}:half") is not None
        fails = await self.store.incr(f"cb:{key}:fails", 1, ttl_ms=int(cooldown_ms * 4))
        if half_open or fails >= threshold:
            until = self.clock() + cooldown_ms / 1000
            await self.store.set(f"cb:{key}:open", repr(until).encode(), ttl_ms=int(cooldown_ms * 2))
            await self.store.set(f"cb:{key}:half", b"1", ttl_ms=int(cooldown_ms * 4))
            await self.store.delete(f"cb:{key}:fails")
            return True
        return False
