"""Saved guardrails as the request path reads them: a per-worker cache over the records, emptied on record changes.

A config names a saved guardrail by id; the runner asks ``resolve(id, workspace)`` for it on each request that
uses it. The first ask reads the record from the state store, later ones are a dict lookup (unknown ids are
remembered too, so a config naming a missing id does not reach the store on every request). The cache is emptied
by the records watcher when any record changes in any worker or instance (within about
GATEWAY_STATE_WATCH_INTERVAL_MS) and at once by this worker's own writes. A read that started before an emptying
is not kept. A store that cannot be read makes the request a 503 (a guardrail is never skipped).

A record is kept opened (its checks' credentials in clear, ``saved.opened``), so a request never opens it; one
saved in clear by an older release is sealed in the store when it is loaded. A record whose credentials do not
open (sealed under another secret key) makes each request using it a 500 ``record_unusable`` saying so.
"""

from __future__ import annotations

from typing import Callable

from gateway.controlplane.records import Repository
from gateway.controlplane.secrets import SecretBox, SecretError
from gateway.guardrails.saved import ID_PREFIX, KIND, SavedGuardrail, opened, sealed_record
from gateway.http.errors import RecordUnusable
from gateway.state.base import StateStore

CACHE_MAX = 4096


def guardrail_repository(store: StateStore) -> Repository[SavedGuardrail]:
    """The records of saved guardrails."""
    return Repository(store, KIND, SavedGuardrail, ID_PREFIX, "guardrail", id_param="guardrail_id")


class SavedGuardrailCache:
    """``resolve(id, workspace)``: the saved guardrail of that workspace, or None; see the module docstring."""

    def __init__(self, repository: Repository[SavedGuardrail], box: Callable[[], SecretBox]) -> None:
        self.repository = repository
        #: the gateway's secret box (asked for only when a record is loaded: it may read the key file)
        self.box = box
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
        found = None
        if record is not None and record.workspace_id == workspace:
            found = await self._opened(record)
        if generation == self._generation:
            if len(self._records) >= CACHE_MAX:
                del self._records[next(iter(self._records))]
            self._records[key] = found
        return found

    async def _opened(self, record: SavedGuardrail) -> SavedGuardrail:
        box = self.box()
        record = await sealed_record(self.repository, box, record)
        try:
            return opened(box, record)
        except SecretError as exc:
            raise RecordUnusable(f"saved guardrail '{record.id}' cannot be used: {exc}",
                                 param="guardrail_id") from None
