"""Where a gateway-run batch's state lives in the state store, so any worker or instance can resume it.

- The batch record (kind ``batch``, per workspace): the public Batch object, the headers its lines are sent with
  and the id of the key it runs as (never a key secret). Written on state transitions only (a handful per batch),
  never per line. The headers (provider bearer, forwarded headers, ``x-gateway-config``: any may hold credentials)
  are sealed together as one blob with the gateway's secret box (``gateway.controlplane.secrets``), bound to the
  batch's workspace and id, and opened only by the runner; records written before that hold them in plain text,
  still run, and are sealed the first time this store reads them (``sealing.rewrite_sealed``, as saved configs).
- An ``active`` marker record (kind ``batch_active``) while the batch is unfinished: schedulers list these to find
  work, so finished batches cost nothing to skip.
- Per-line results (KV ``batch:<id>:r:<line>``): the finished output line, stored with ``set_if_absent`` so a line
  has exactly one result whoever finished it; they expire a day after the batch's window.
- Live counts and usage (KV ``batch:<id>:counts``), written by the runner a few times a second, merged into the
  Batch on read while it runs.
- The cancel request (KV ``batch:<id>:cancel``, the ``cancelling_at`` time): the runner polls it.
- The lease (``batch:<id>``): exactly one runner at a time (see ``batch_scheduler``).
"""

from __future__ import annotations

import builtins
import time
from typing import Awaitable, Callable, TypeVar

import msgspec

from gateway.controlplane.records import Entity, Repository, store_unavailable
from gateway.controlplane.sealing import rewrite_sealed
from gateway.controlplane.secrets import SecretBox
from gateway.schema.batches import TERMINAL, Batch, BatchUsage, RequestCounts
from gateway.state.base import StateStore, StateStoreError

KIND = "batch"
ACTIVE_KIND = "batch_active"
PREFIX = "batch_gw_"
RESULT_KEEP_S = 86_400


def is_gateway_batch(batch_id: str) -> bool:
    return batch_id.startswith(PREFIX)


class BatchRecord(Entity, kw_only=True):
    batch: Batch
    #: the headers every line is sent with (provider identification, forwarded headers; no gateway key), sealed as
    #: one JSON list of pairs (see ``seal_headers``)
    sealed_headers: str = ""
    #: the same headers in plain text: only in records written before they were sealed
    headers: list[tuple[str, str]] = msgspec.field(default_factory=list)
    #: the id of the gateway key that created the batch: its lines run as that key (empty in records written
    #: before batches ran by key id: their headers hold the key itself)
    key_id: str = ""
    #: ``output_expires_after.seconds`` of the create body: the output and error files expire that long after they
    #: are written (None: they are kept until deleted)
    output_expires_s: int | None = None


class LiveCounts(msgspec.Struct):
    counts: RequestCounts = msgspec.field(default_factory=RequestCounts)
    usage: BatchUsage | None = None


_counts_decoder = msgspec.json.Decoder(LiveCounts)
_headers_decoder = msgspec.json.Decoder(list[tuple[str, str]])
_encode = msgspec.json.encode


def _headers_context(workspace: str, batch_id: str) -> str:
    return f"{KIND}/{workspace}/{batch_id}"


def seal_headers(box: SecretBox, workspace: str, batch_id: str, headers: list[tuple[str, str]]) -> str:
    """The headers of batch ``batch_id`` of ``workspace``, sealed: the blob opens only in that batch's record."""
    return box.seal(_encode(headers), _headers_context(workspace, batch_id))


def line_headers_of(box: SecretBox, record: BatchRecord) -> list[tuple[str, str]]:
    """The headers the record's lines are sent with: opened (SecretError when another secret key sealed them or
    the blob belongs to another batch), or as stored by an older gateway."""
    if not record.sealed_headers:
        return record.headers
    return _headers_decoder.decode(box.open(record.sealed_headers, _headers_context(record.workspace_id, record.id)))


def lease_key(batch_id: str) -> str:
    return f"batch:{batch_id}"


def result_key(batch_id: str, line: int) -> str:
    return f"batch:{batch_id}:r:{line}"


def _counts_key(batch_id: str) -> str:
    return f"batch:{batch_id}:counts"

T = TypeVar("T")


def _cancel_key(batch_id: str) -> str:
    return f"batch:{batch_id}:cancel"


class BatchStore:
    def __init__(self, store: StateStore, box: Callable[[], SecretBox]) -> None:
        self.store = store
        self.repo = Repository(store, KIND, BatchRecord, PREFIX, "batch", id_param="batch_id")
        #: the gateway's secret box, asked for only to seal an older record's plain headers
        self.box = box

    # -- records ---------------------------------------------------------------------------------------------

    async def create(self, record: BatchRecord) -> BatchRecord:
        record = await self.repo.create(record)
        await self._call(self.store.record_put(ACTIVE_KIND, record.id, record.workspace_id, b""))
        return record

    async def get(self, workspace: str, batch_id: str) -> BatchRecord:
        """The batch of ``workspace`` with its live counts (404 naming ``batch_id``)."""
        return await self.with_live_counts(await self._sealed(await self.repo.get(workspace, batch_id)))

    async def find(self, batch_id: str) -> BatchRecord | None:
        record = await self.repo.find(batch_id)
        return None if record is None else await self._sealed(record)

    async def list(self, workspace: str) -> list[BatchRecord]:
        """The workspace's batches, newest first."""
        records = [await self._sealed(r) for r in await self.repo.list(workspace)]
        records.reverse()
        return records

    async def _sealed(self, record: BatchRecord) -> BatchRecord:
        """``record``; one written with its headers in plain text is sealed and stored again (best effort)."""
        if not record.headers or record.sealed_headers:
            return record
        sealed = msgspec.structs.replace(
            record, headers=[], sealed_headers=seal_headers(self.box(), record.workspace_id, record.id, record.headers))
        await rewrite_sealed(self.repo, record, sealed)
        return sealed

    async def with_live_counts(self, record: BatchRecord) -> BatchRecord:
        batch = record.batch
        if batch.status in TERMINAL:
            return record
        live = await self.counts(record.id)
        if live is not None:
            batch.request_counts = live.counts
            batch.usage = live.usage
        return record

    async def save(self, record: BatchRecord) -> BatchRecord:
        return await self.repo.replace(record)

    async def finish(self, record: BatchRecord) -> BatchRecord:
        """Save a batch that reached a final state and drop it from the active list."""
        record = await self.save(record)
        await self._call(self.store.record_delete(ACTIVE_KIND, record.id))
        await self._call(self.store.delete(_counts_key(record.id)))
        return record

    async def active_ids(self) -> builtins.list[str]:
        return [r.id for r in await self.store.record_list(ACTIVE_KIND)]

    async def reading(self, workspace: str, file_id: str) -> str | None:
        """The id of an unfinished batch of ``workspace`` whose input is ``file_id`` (None when there is none)."""
        active = await self._call(self.store.record_list(ACTIVE_KIND, workspace))
        for marker in active:
            record = await self.repo.find(marker.id)
            if record is not None and record.batch.input_file_id == file_id and record.batch.status not in TERMINAL:
                return record.id
        return None

    # -- lines, counts, cancel -------------------------------------------------------------------------------

    async def put_result(self, batch_id: str, line: int, value: bytes, keep_until: int) -> bool:
        """Store a line's result unless it has one; True when this call stored it."""
        ttl_ms = max(1, keep_until - int(time.time())) * 1000
        return await self.store.set_if_absent(result_key(batch_id, line), value, ttl_ms)

    async def get_result(self, batch_id: str, line: int) -> bytes | None:
        return await self.store.get(result_key(batch_id, line))

    async def put_counts(self, batch_id: str, live: LiveCounts, keep_until: int) -> None:
        ttl_ms = max(1, keep_until - int(time.time())) * 1000
        await self.store.set(_counts_key(batch_id), _encode(live), ttl_ms)

    async def counts(self, batch_id: str) -> LiveCounts | None:
        raw = await self._call(self.store.get(_counts_key(batch_id)))
        return None if raw is None else _counts_decoder.decode(raw)

    async def request_cancel(self, batch_id: str, at: int, keep_until: int) -> int:
        """Record the cancel request (the first one wins); returns its time (``cancelling_at``)."""
        ttl_ms = max(1, keep_until - int(time.time())) * 1000
        key = _cancel_key(batch_id)
        await self._call(self.store.set_if_absent(key, str(at).encode(), ttl_ms))
        raw = await self._call(self.store.get(key))
        return int(raw) if raw else at

    async def cancel_requested(self, batch_id: str) -> int | None:
        raw = await self.store.get(_cancel_key(batch_id))
        return int(raw) if raw else None

    async def _call(self, awaitable: Awaitable[T]) -> T:
        try:
            return await awaitable
        except StateStoreError as exc:
            raise store_unavailable(exc) from None


def keep_until(batch: Batch) -> int:
    """When a batch's per-line state may go: a day after its window."""
    return (batch.expires_at or batch.created_at) + RESULT_KEEP_S
