"""Circuit breaker: a target with ``failure_threshold`` failures within the last ``cooldown_interval`` ms is
skipped for ``cooldown_interval`` ms.

Counted failures: statuses in ``failure_status_codes`` when given, else 5xx, 429, timeouts (408, 504) and connection
failures. Successes do not erase failures: the count is of failures inside a rolling window as long as the
cooldown, so a target failing every other request opens too. After the cooldown the target is tried again
(half-open): a success closes the breaker (and clears the count), a failure opens it again at once. Failures of
requests that were already under way when it opened are ignored.

State lives in the StateStore through its atomic breaker operations, so every worker (and, with Redis, every
instance) shares each breaker. A store that cannot answer never blocks traffic: the breaker then reads as closed
and records nothing. A success reaches the store only when this worker last saw the breaker opened, so healthy
targets cost one store read per request. The clock is injectable for tests.
"""

from __future__ import annotations

import math
import time
from typing import Callable

from gateway.state.base import StateStore, StateStoreError

DEFAULT_FAILURE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


def counts_as_failure(status: int, failure_status_codes: list[int] | None) -> bool:
    if failure_status_codes:
        return status in failure_status_codes
    return status in DEFAULT_FAILURE_STATUSES or status >= 500


class CircuitBreaker:
    def __init__(self, store: StateStore, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock
        #: breakers this worker last saw opened (now or in the past): their successes must be reported
        self._tripped: set[str] = set()

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    async def is_open(self, key: str) -> bool:
        """True while the target is in its cooldown."""
        try:
            until = await self.store.breaker_open_until(key)
        except StateStoreError:
            return False
        if until:
            self._tripped.add(key)
        else:
            self._tripped.discard(key)
        return until > self._now_ms()

    async def record_success(self, key: str) -> None:
        if key not in self._tripped:
            return
        self._tripped.discard(key)
        try:
            await self.store.breaker_success(key, self._now_ms())
        except StateStoreError:
            pass

    async def record_failure(self, key: str, threshold: float, cooldown_ms: float) -> bool:
        """Count a failure; returns True when this failure opened the breaker."""
        cooldown = int(cooldown_ms)
        try:
            opened = await self.store.breaker_failure(key, max(1, math.ceil(threshold)), cooldown, cooldown,
                                                      self._now_ms())
        except StateStoreError:
            return False
        if opened:
            self._tripped.add(key)
        return opened
