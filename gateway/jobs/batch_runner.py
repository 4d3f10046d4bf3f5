"""Running one gateway-run batch to its end: validate the input, send every line through the pipeline, write the
output and error files. A runner works only while it holds the batch's lease (see ``batch_scheduler``).

States: ``validating`` (every line checked first; bad lines go to ``errors.data`` and the error file; a file with
no valid line fails the batch) -> ``in_progress`` (lines run, at most ``GATEWAY_BATCH_CONCURRENCY`` at once) ->
``finalizing`` -> ``completed``. A cancel request (``cancelling``) or the end of the window stops new lines from
starting; lines already sent finish, then the batch becomes ``cancelled`` or ``expired`` with the results it has
(lines that never ran get an error line, ``batch_cancelled`` or ``batch_expired``).

Each line is one in-process request to the batch's endpoint with the batch's headers (opened from their sealed
blob when the run starts), run as the key that created the batch: looked up by its id when the run starts and again
on every watch tick, so a rotated key's batch goes on and a revoked (deleted) key's batch stops: lines already sent
finish, then the batch is ``failed`` with ``key_revoked`` in ``errors`` and an error line of that code for every line
that never ran. Headers that do not open (sealed under another ``GATEWAY_SECRET_KEY``, or a blob copied from another
batch) fail the batch the same way, before any line is sent, with ``headers_unreadable``. A 429 the gateway itself
answered for a rate limit policy pauses every line of the batch for its Retry-After (1 s without one) and the line
is sent again: rate limits are waited out, never counted as failures. Every line checks the pause right before it is
sent, so once a limit is met only the lines already on their way meet it too: the batch goes at the pace its
limits allow instead of tripping them over and over. A usage limit policy's 429 (``usage_limit_exceeded``: a budget
spent until its period resets, or for good) is the line's answer, recorded as its error line at once; every later
line it applies to gets its own refusal just as fast (no upstream call), so the batch completes with those lines
failed instead of waiting for a reset that may be weeks away or never come. A 408, 429 or 5xx from upstream is sent
again up to ``GATEWAY_BATCH_LINE_ATTEMPTS`` times in all (after the config's own retries), honouring Retry-After,
then recorded as the line's answer.

Restarts: each finished line's result is stored at once (exactly one per line, whoever stored it first), so a
resumed batch skips finished lines and recounts from the stored results. A line that was in flight when its runner
died is sent again (at-least-once upstream), but the output holds exactly one line per input line, in input order.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from typing import Any, Callable

import msgspec

from gateway.controlplane.keys import KeyRecord, KeyStore
from gateway.controlplane.secrets import SecretBox, SecretError
from gateway.http.errors import ServiceUnavailable, UsageLimitExceeded
from gateway.jobs.batch_finish import headers_unreadable, key_revoked, write_outputs
from gateway.jobs.batch_lines import InputLine, LineChecker, custom_id_of, file_lines
from gateway.jobs.batch_output import (
    OUTPUT,
    add_usage,
    answer_usage,
    gateway_limit,
    invalid_result,
    response_result,
    result_usage,
    retry_after_s,
)
from gateway.jobs.batch_store import BatchRecord, BatchStore, LiveCounts, keep_until, lease_key, line_headers_of
from gateway.jobs.dispatch import InProcessDispatcher
from gateway.jobs.files import GatewayFiles
from gateway.jobs.filestore import FileMissing
from gateway.schema.batches import TERMINAL, Batch, BatchError, BatchErrors, BatchUsage, RequestCounts
from gateway.settings import Settings
from gateway.state.base import StateStoreError
from gateway.waiting import wait_event

log = logging.getLogger("gateway.jobs")

TRANSIENT = frozenset({408, 429, 500, 502, 503, 504})
USAGE_LIMIT = UsageLimitExceeded.code
#: errors.data keeps the first bad lines only (the error file has every one)
MAX_ERRORS = 1000
BACKOFF_MAX_S = 8.0
STOP_CANCEL, STOP_EXPIRE, STOP_LEASE = "cancelled", "expired", "lease"
#: the batch cannot go on (the key it runs as is gone, its headers do not open): it ends failed with ``failure``
STOP_FAILED = "failed"
_line_decoder = msgspec.json.Decoder(InputLine)


class RunnerDeps:
    """What every runner of a worker shares."""

    def __init__(self, settings: Settings, batches: BatchStore, files: GatewayFiles,
                 dispatcher: InProcessDispatcher, parsers: dict[str, Callable[[bytes], Any]], keys: KeyStore,
                 box: Callable[[], SecretBox]) -> None:
        self.settings = settings
        self.keys = keys
        #: the secret box that opens batch headers (opened on first use: it may read the key file)
        self.box = box
        self.batches = batches
        self.files = files
        self.dispatcher = dispatcher
        self.parsers = parsers


class BatchRunner:
    def __init__(self, deps: RunnerDeps, batch_id: str, holder: str) -> None:
        self.deps = deps
        self.store = deps.batches
        self.id = batch_id
        self.holder = holder
        self.settings = deps.settings
        self.stop_reason: str | None = None
        self._stopped = asyncio.Event()
        self.pause_until = 0.0
        self.counts = RequestCounts()
        self.usage = BatchUsage()
        self.dirty = False
        self.invalid: set[int] = set()
        self.done: set[int] = set()
        #: the number of the input file's last line (blank lines count)
        self.last_line = 0
        self.batch: Batch | None = None
        self.workspace = ""
        self.headers: list[tuple[bytes, bytes]] = []
        #: the id of the key the lines run as, and its record (None for records that carry the key in headers)
        self.key_id = ""
        self.key: KeyRecord | None = None
        #: why the batch stops ``failed`` (set with ``STOP_FAILED``)
        self.failure: BatchError | None = None

    def stop(self, reason: str) -> None:
        if self.stop_reason is None or reason == STOP_LEASE:
            self.stop_reason = reason
        self._stopped.set()

    def current(self) -> Batch:
        """The batch being run (loaded when the run starts)."""
        assert self.batch is not None, "the batch is loaded when the run starts"
        return self.batch

    async def run(self) -> None:
        keeper = asyncio.create_task(self._keep(), name=f"batch-lease-{self.id}")
        try:
            await self._drive()
        except (FileMissing, StateStoreError, ServiceUnavailable) as exc:
            log.warning("batch %s paused: %s (a later pass resumes it)", self.id, exc.__class__.__name__)
        finally:
            keeper.cancel()
            await asyncio.gather(keeper, return_exceptions=True)  # it must not outlive the run (or the store)
            try:
                await self.store.store.release(lease_key(self.id), self.holder)
            except StateStoreError:
                pass

    # -- the states ------------------------------------------------------------------------------------------

    async def _drive(self) -> None:
        record = await self.store.find(self.id)
        if record is None or record.batch.status in TERMINAL:
            if record is not None:
                await self.store.finish(record)
            return
        batch = self.batch = record.batch
        self.workspace = record.workspace_id
        self.key_id = record.key_id
        self._open_headers(record)
        await self._check_key()  # the store unreachable: the run pauses (a later pass resumes it)
        if await self.store.cancel_requested(self.id):
            self.stop(STOP_CANCEL)
        elif batch.expires_at and time.time() >= batch.expires_at:
            self.stop(STOP_EXPIRE)
        status = batch.status
        if status == "finalizing":
            await self._finalize("completed")
            return
        if not await self._validate(fresh=status == "validating"):
            return
        if status != "validating":
            await self._recount()
        if status == "validating" and self.stop_reason is None:
            await self._update(self._mark_in_progress)
        if self.stop_reason is None:
            await self._run_lines()
        if self.stop_reason is None and await self.store.cancel_requested(self.id):
            self.stop(STOP_CANCEL)  # a cancel accepted while the last lines finished still ends it cancelled
        if self.stop_reason == STOP_LEASE:
            return
        await self._finalize(self.stop_reason or "completed")

    def _mark_in_progress(self, batch: Batch) -> None:
        batch.status = "in_progress"
        batch.in_progress_at = int(time.time())
        batch.request_counts = msgspec.structs.replace(self.counts)

    async def _validate(self, fresh: bool) -> bool:
        """Check every line (recording bad ones); False when the batch failed instead."""
        batch = self.current()
        checker = LineChecker(batch.endpoint, self.deps.parsers[batch.endpoint])
        errors: list[BatchError] = []
        total = 0
        keep = keep_until(batch)
        try:
            async for number, line in file_lines(self.deps.files.read(batch.input_file_id)):
                total += 1
                self.last_line = number
                if total > self.settings.batch_max_lines:
                    await self._fail([BatchError("too_many_requests", f"the input file holds more than "
                                                 f"{self.settings.batch_max_lines} requests", "input_file_id")])
                    return False
                item, error = checker.check(number, line)
                if error is not None:
                    self.invalid.add(number)
                    if len(errors) < MAX_ERRORS:
                        errors.append(error)
                    await self._persist(number, invalid_result(custom_id_of(line), error), keep)
                if total % 512 == 0:
                    await asyncio.sleep(0)
        except FileMissing:
            await self._fail([BatchError("file_not_found", "the input file was deleted", "input_file_id")])
            return False
        self.counts.total = total
        if fresh:
            self.counts.failed = len(self.invalid)
        if total == 0 or len(self.invalid) == total:
            message = "the input file holds no requests" if total == 0 else "no line of the input file is valid"
            errors = errors or [BatchError("empty_file", message, "input_file_id")]
            await self._fail(errors, total)
            return False
        if errors and fresh:
            await self._update(lambda b: setattr(b, "errors", BatchErrors(data=errors)))
        return True

    async def _fail(self, errors: list[BatchError], total: int = 0) -> None:
        def failed(batch: Batch) -> None:
            batch.status = "failed"
            batch.failed_at = int(time.time())
            batch.errors = BatchErrors(data=errors)
            batch.request_counts = RequestCounts(total=total, completed=0, failed=len(self.invalid))

        await self._update(failed, finish=True)

    async def _recount(self) -> None:
        """A resumed batch: which lines already have a result, and the counts and usage they add up to."""
        self.counts = RequestCounts(total=self.counts.total)
        self.usage = BatchUsage()
        async for _ in self._results(range(1, self.last_line + 1)):
            pass
        self.dirty = True

    async def _results(self, numbers: Any) -> Any:
        """``(line, stored result or None)`` for line numbers, fetched in parallel windows; counts what it finds."""
        window: list[int] = []

        async def flush() -> list[tuple[int, bytes | None]]:
            values = await asyncio.gather(*(self.store.get_result(self.id, n) for n in window))
            out = list(zip(window, values))
            window.clear()
            for number, value in out:
                if value is not None and number not in self.done:
                    self.done.add(number)
                    self._count(value)
            return out

        for number in numbers:
            window.append(number)
            if len(window) >= 128:
                for item in await flush():
                    yield item
        if window:
            for item in await flush():
                yield item

    def _count(self, value: bytes) -> None:
        if value[:1] == OUTPUT:
            self.counts.completed += 1
            add_usage(self.usage, result_usage(value))
        else:
            self.counts.failed += 1

    # -- lines -----------------------------------------------------------------------------------------------

    async def _run_lines(self) -> None:
        batch = self.current()
        slots = asyncio.Semaphore(self.settings.batch_concurrency)
        running: set[asyncio.Task] = set()
        keep = keep_until(batch)

        def finished(task: asyncio.Task) -> None:
            running.discard(task)
            slots.release()
            if not task.cancelled() and task.exception() is not None:
                log.error("batch %s: a line failed unexpectedly", self.id, exc_info=task.exception())

        try:
            async for number, line in file_lines(self.deps.files.read(batch.input_file_id)):
                if self.stop_reason is not None:
                    break
                if number in self.invalid or number in self.done:
                    continue
                await slots.acquire()
                if self.stop_reason is not None:
                    slots.release()
                    break
                task = asyncio.create_task(self._line(number, _line_decoder.decode(line), keep))
                running.add(task)
                task.add_done_callback(finished)
            if running:
                await asyncio.gather(*running, return_exceptions=True)
        except BaseException:
            for task in list(running):  # the runner is stopping (shutdown, a lost file): its lines stop too
                task.cancel()
            raise

    async def _line(self, number: int, item: InputLine, keep: int) -> None:
        body = bytes(item.body)
        request_id = f"{self.id}-{number}"
        headers = [*self.headers, (b"content-type", b"application/json"),
                   (b"x-gateway-trace-id", request_id.encode())]
        attempt = 1
        while True:
            if not await self._gate():
                return
            response = await self.deps.dispatcher.call("POST", item.url, headers, body, self.key)
            if response.status == 429:
                limit = gateway_limit(response.body)
                if limit == USAGE_LIMIT:  # final: the budget will not come back while the batch runs
                    break
                if limit is not None:
                    self.pause_until = max(self.pause_until,
                                           time.monotonic() + (retry_after_s(response.headers) or 1.0))
                    continue
            if response.status in TRANSIENT and attempt < self.settings.batch_line_attempts:
                asked = retry_after_s(response.headers)
                wait = asked if asked is not None else min(BACKOFF_MAX_S, 0.25 * 2 ** attempt) * random.uniform(1, 1.5)
                attempt += 1
                if await self._wait_stop(wait):
                    return
                continue
            break
        value = response_result(item.custom_id, request_id, response.status, response.body)
        if await self._persist(number, value, keep):
            if value[:1] == OUTPUT:
                self.counts.completed += 1
                add_usage(self.usage, answer_usage(response.body))
            else:
                self.counts.failed += 1
            self.done.add(number)
            self.dirty = True

    async def _gate(self) -> bool:
        """Wait out a limit pause; False when the batch stops meanwhile."""
        while True:
            if self.stop_reason is not None:
                return False
            left = self.pause_until - time.monotonic()
            if left <= 0:
                return True
            if await self._wait_stop(left):
                return False

    async def _wait_stop(self, seconds: float) -> bool:
        """Sleep ``seconds`` unless the batch stops first (then True)."""
        return await wait_event(self._stopped, seconds)

    async def _persist(self, number: int, value: bytes, keep: int) -> bool:
        """Store a line's result (retrying while the store is unreachable); True when this call stored it."""
        while True:
            try:
                return await self.store.put_result(self.id, number, value, keep)
            except StateStoreError:
                if self.stop_reason == STOP_LEASE:
                    return False
                await asyncio.sleep(1.0)

    # -- the end ---------------------------------------------------------------------------------------------

    async def _finalize(self, final: str) -> None:
        if final == "completed":
            def finalizing(batch: Batch) -> None:
                batch.status = "finalizing"
                batch.finalizing_at = batch.finalizing_at or int(time.time())

            await self._update(finalizing)
        self.counts = RequestCounts(total=self.counts.total)
        self.usage = BatchUsage()
        self.done.clear()
        outcome = await write_outputs(self, final)
        if self.stop_reason == STOP_LEASE:
            return

        def ended(batch: Batch) -> None:
            now = int(time.time())
            if final == STOP_FAILED and self.failure is not None:
                errors = batch.errors.data if batch.errors is not None else []
                batch.errors = BatchErrors(data=[*errors, self.failure])
            batch.status = final
            setattr(batch, f"{final}_at", now)
            batch.output_file_id, batch.error_file_id = outcome
            batch.request_counts = msgspec.structs.replace(self.counts)
            batch.usage = self.usage if self.counts.completed else None

        await self._update(ended, finish=True)

    async def _update(self, change: Callable[[Batch], None], finish: bool = False) -> BatchRecord | None:
        """Apply ``change`` to the freshest record and save it (keeping a cancel the API recorded meanwhile)."""
        while True:
            try:
                record = await self.store.find(self.id)
                if record is None:
                    return None
                change(record.batch)
                cancel_at = await self.store.cancel_requested(self.id)
                if cancel_at and record.batch.status not in TERMINAL:
                    record.batch.status = "cancelling"
                    record.batch.cancelling_at = record.batch.cancelling_at or cancel_at
                elif cancel_at and record.batch.status == "cancelled":
                    record.batch.cancelling_at = record.batch.cancelling_at or cancel_at
                self.batch = record.batch
                return await (self.store.finish(record) if finish else self.store.save(record))
            except Exception as exc:  # the store's 503 while it is unreachable
                if self.stop_reason == STOP_LEASE or not _unavailable(exc):
                    raise
                await asyncio.sleep(1.0)

    # -- lease and control -----------------------------------------------------------------------------------

    async def _keep(self) -> None:
        """Renew the lease, watch for a cancel or the window's end, and publish the live counts."""
        settings = self.settings
        interval = min(settings.batch_poll_ms, settings.batch_lease_ms / 3) / 1000
        renewed = time.monotonic()
        while True:
            await asyncio.sleep(interval)
            try:
                if not await self.store.store.lease(lease_key(self.id), self.holder, settings.batch_lease_ms):
                    log.warning("batch %s: lease lost; another runner carries on", self.id)
                    self.stop(STOP_LEASE)
                    return
                renewed = time.monotonic()
                if self.batch is not None:
                    await self._watch()
            except StateStoreError:
                if time.monotonic() - renewed > settings.batch_lease_ms / 1000:
                    self.stop(STOP_LEASE)
                    return

    def _fail_with(self, error: BatchError) -> None:
        if self.stop_reason is None:
            self.failure = error
            self.stop(STOP_FAILED)

    def _open_headers(self, record: BatchRecord) -> None:
        """The headers every line is sent with; a blob that does not open stops the batch (failed)."""
        try:
            headers = line_headers_of(self.deps.box(), record)
        except SecretError as exc:
            log.warning("batch %s: its stored headers cannot be opened (%s); failing it", self.id, exc)
            self._fail_with(headers_unreadable(str(exc)))
            return
        self.headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]

    async def _check_key(self) -> None:
        """Read the key the batch runs as; stop the batch (failed) when it was revoked."""
        if not self.key_id or self.stop_reason is not None:
            return
        key = await self.deps.keys.by_id(self.key_id, self.workspace)
        if key is not None:
            self.key = key
        else:
            log.warning("batch %s: the gateway key %s that created it was revoked; stopping", self.id, self.key_id)
            self._fail_with(key_revoked(self.key_id))

    async def _watch(self) -> None:
        batch = self.current()
        try:
            await self._check_key()
        except ServiceUnavailable:  # the store did not answer: the key read at the start stands until it does
            pass
        if self.stop_reason is None:
            if await self.store.cancel_requested(self.id):
                self.stop(STOP_CANCEL)
            elif batch.expires_at and time.time() >= batch.expires_at:
                self.stop(STOP_EXPIRE)
        if self.dirty:
            self.dirty = False
            await self.store.put_counts(self.id, LiveCounts(msgspec.structs.replace(self.counts), self.usage),
                                        keep_until(batch))


def _unavailable(exc: Exception) -> bool:
    return isinstance(exc, (ServiceUnavailable, StateStoreError))
