"""Running one gateway-run batch to its end while this worker holds its lease: the batch's states, from
``validating`` to its final status. The parts the run is made of live beside it: ``batch_dispatch`` (the lines),
``batch_watch`` (lease, cancel, window, key), ``batch_finish`` (the output and error files), sharing the objects of
``batch_progress``. What a user sees of a batch's life (states, limits, retries, restarts) is in ``docs/jobs.md``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable

import msgspec

from gateway.background import BackgroundTask
from gateway.controlplane.secrets import SecretError
from gateway.http.errors import ServiceUnavailable
from gateway.jobs.batch_deps import RunnerDeps
from gateway.jobs.batch_dispatch import LineDispatch
from gateway.jobs.batch_finish import Ending, headers_unreadable, write_outputs
from gateway.jobs.batch_lines import LineChecker, custom_id_of, file_lines
from gateway.jobs.batch_output import ResultLines
from gateway.jobs.batch_progress import STOP_CANCEL, STOP_FAILED, STOP_LEASE, Results, RunAs, RunControl, Tally
from gateway.jobs.batch_store import BatchRecord, keep_until, lease_key, line_headers_of
from gateway.jobs.batch_watch import RunWatch
from gateway.jobs.filestore import FileMissing
from gateway.schema.batches import TERMINAL, Batch, BatchError, BatchErrors, RequestCounts
from gateway.state.base import StateStoreError

log = logging.getLogger("gateway.jobs")

#: errors.data keeps the first bad lines only (the error file has every one)
MAX_ERRORS = 1000


class BatchRunner:
    def __init__(self, deps: RunnerDeps, batch_id: str, holder: str) -> None:
        self.deps = deps
        self.store = deps.batches
        self.id = batch_id
        self.holder = holder
        self.settings = deps.settings
        self.control = RunControl()
        self.tally = Tally()
        self.run_as = RunAs()
        self.lines = ResultLines()
        self.results = Results(self.store, batch_id, self.control, self.tally)
        self.watch = RunWatch(batch_id, holder, self.settings, self.store, deps.keys, lambda: self.batch,
                              self.run_as, self.control, self.tally)
        self.invalid: set[int] = set()
        #: the number of the input file's last line (blank lines count)
        self.last_line = 0
        self.batch: Batch | None = None
        #: the output and error files' expiry (the create body's ``output_expires_after.seconds``)
        self.output_expires_s: int | None = None

    def current(self) -> Batch:
        """The batch being run (loaded when the run starts)."""
        assert self.batch is not None, "the batch is loaded when the run starts"
        return self.batch

    async def run(self) -> None:
        keeper = BackgroundTask(f"batch-lease-{self.id}")
        keeper.start(self.watch.keep)
        try:
            await self._drive()
        except (FileMissing, StateStoreError, ServiceUnavailable) as exc:
            log.warning("batch %s paused: %s (a later pass resumes it)", self.id, exc.__class__.__name__)
        finally:
            await keeper.close()  # it must not outlive the run (or the store)
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
        self.output_expires_s = record.output_expires_s
        self.run_as.workspace = record.workspace_id
        self.run_as.key_id = record.key_id
        self._open_headers(record)
        await self.watch.check_key()  # the store unreachable: the run pauses (a later pass resumes it)
        await self.watch.check_stop(batch)
        status = batch.status
        if status == "finalizing":
            await self._finalize("completed")
            return
        if not await self._validate(fresh=status == "validating"):
            return
        if status != "validating":
            await self._recount()
        if status == "validating" and self.control.stop_reason is None:
            await self._update(self._mark_in_progress)
        if self.control.stop_reason is None:
            dispatch = LineDispatch(self.id, self.deps.send, self.deps.files, self.settings.batch_concurrency,
                                    self.settings.batch_line_attempts, self.run_as, self.control, self.tally,
                                    self.results, self.lines)
            await dispatch.run(batch.input_file_id, self.invalid, keep_until(batch))
        if self.control.stop_reason is None and await self.store.cancel_requested(self.id):
            self.control.stop(STOP_CANCEL)  # a cancel accepted while the last lines finished still ends it cancelled
        if self.control.stop_reason == STOP_LEASE:
            return
        await self._finalize(self.control.stop_reason or "completed")

    def _mark_in_progress(self, batch: Batch) -> None:
        batch.status = "in_progress"
        batch.in_progress_at = int(time.time())
        batch.request_counts = msgspec.structs.replace(self.tally.counts)

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
                    await self.results.put(number, self.lines.invalid(custom_id_of(line), error), keep)
                if total % 512 == 0:
                    await asyncio.sleep(0)
        except FileMissing:
            await self._fail([BatchError("file_not_found", "the input file was deleted", "input_file_id")])
            return False
        counts = self.tally.counts
        counts.total = total
        if fresh:
            counts.failed = len(self.invalid)
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
        self.tally.reset()
        async for _ in self.results.read(range(1, self.last_line + 1)):
            pass
        self.tally.dirty = True

    # -- the end ---------------------------------------------------------------------------------------------

    async def _finalize(self, final: str) -> None:
        if final == "completed":
            def finalizing(batch: Batch) -> None:
                batch.status = "finalizing"
                batch.finalizing_at = batch.finalizing_at or int(time.time())

            await self._update(finalizing)
        tally = self.tally
        tally.reset()
        control = self.control
        ending = Ending(self.id, self.run_as.workspace, self.current().input_file_id, final, control.failure,
                        self.run_as.key_id, self.output_expires_s)
        outcome = await write_outputs(self.deps.files, self.results, self.lines, ending)
        if control.stop_reason == STOP_LEASE:
            return

        def ended(batch: Batch) -> None:
            now = int(time.time())
            if final == STOP_FAILED and control.failure is not None:
                errors = batch.errors.data if batch.errors is not None else []
                batch.errors = BatchErrors(data=[*errors, control.failure])
            batch.status = final
            setattr(batch, f"{final}_at", now)
            batch.output_file_id, batch.error_file_id = outcome
            batch.request_counts = msgspec.structs.replace(tally.counts)
            batch.usage = tally.usage if tally.counts.completed else None

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
                if self.control.stop_reason == STOP_LEASE or not _unavailable(exc):
                    raise
                await asyncio.sleep(1.0)

    def _open_headers(self, record: BatchRecord) -> None:
        """The headers every line is sent with; a blob that does not open stops the batch (failed)."""
        try:
            headers = line_headers_of(self.deps.box(), record)
        except SecretError as exc:
            log.warning("batch %s: its stored headers cannot be opened (%s); failing it", self.id, exc)
            self.control.fail_with(headers_unreadable(str(exc)))
            return
        self.run_as.headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]


def _unavailable(exc: Exception) -> bool:
    return isinstance(exc, (ServiceUnavailable, StateStoreError))
