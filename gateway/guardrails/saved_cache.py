"""Saved guardrails as the request path reads them: a per-worker cache over the records, emptied on record changes.

A config names a saved guardrail by id; the runner asks ``resolve(id, workspace)`` for it on each request that
uses it. The first ask reads the record from the state store, later ones are a dict lookup (unknown ids are
remembered too, so a config naming a missing id does not reach the store on every request). The cache is emptied
by the records watcher when any record changes in any worker or instance (within about
GATEWAY_STATE_WATCH_INTERVAL_MS) and at once by this worker's own writes. A read that started before an emptying
is not kept. A store that cannot be read makes the request a 503 (a guardrail is never skipped).
"""

from __future__ import annotations

from gateway.controlplane.records import Repository
from gateway.guardrails.saved import ID_PREFIX, KIND, SavedGuardrail
from gateway.state.base import StateStore

CACHE_MAX = 4096


def guardrail_repository(store: StateStore) -> Repository[SavedGuardrail]:
    """The records of saved guardrails."""
    return Repository(store, KIND, SavedGuardrail, ID_PREFIX, "guardrail", id_param="guardrail_id")


class SavedGuardrailCache:
    """``resolve(id, workspace)``: the saved guardrail of that workspace, or None; see the module docstring."""

    def __init__(self, repository: Repository[SavedGuardrail]) -> None:
        self.repository = repository
        self._records: dict[tuple[str, str], SavedGuardrail | None] = {}
        self._generation = 0

    def invalidate(self) -> None:
        """Forget every cached record (a record changed somewhere)."""
        self._generation += 1
        self._records.clear()

    async def resolve(self, guardrail_id: str, workspace: str) -> SavedGuardrail | None:
        key = (workspace, guardrail_id)
        try:
            return self._records[key]
        except KeyError:
            pass
        generation = self._generation
        record = await self.repository.find(guardrail_id)
        found = record if record is not None and record.workspace_id == workspace else None
        if generation == self._generation:
            if len(self._records) >= CACHE_MAX:
                del self._records[next(iter(self._records))]
            self._records[key] = found
        return found
