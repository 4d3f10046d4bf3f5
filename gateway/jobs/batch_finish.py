"""Writing a finished batch's output and error files: one line per input line, in input order.

The input file is read again line by line; each line's stored result goes to the output file (a 2xx answer) or
the error file (anything else); a line without a result (the batch was cancelled or expired first, the key it
ran as was revoked, its stored headers did not open) gets an error line saying so (``batch_cancelled``,
``batch_expired``, ``key_revoked``, ``headers_unreadable``). Files
are written under ids derived from the batch (``file-gw-<batch>-output`` / ``-errors``), so a finalization that is
interrupted and run again replaces them instead of leaving strays. A file is created only when it has lines. The
runner's counts and usage are recounted from exactly what is written.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.jobs.batch_lines import custom_id_of, file_lines
from gateway.jobs.batch_output import OUTPUT, ResultLines
from gateway.jobs.batch_progress import STOP_FAILED, Results
from gateway.jobs.batch_store import PREFIX as BATCH_PREFIX
from gateway.jobs.files import PREFIX as FILE_PREFIX
from gateway.jobs.files import GatewayFiles
from gateway.jobs.filestore import FileMissing, FileWriter
from gateway.schema.batches import BatchError
from gateway.schema.files import BATCH_OUTPUT

UNRUN = {
    "cancelled": ("batch_cancelled", "the batch was cancelled before this request ran"),
    "expired": ("batch_expired", "the batch expired before this request ran"),
    "completed": ("batch_request_lost", "this request has no recorded result"),
}
#: the error line of a request that never ran because the batch failed, by the batch's failure code
UNRUN_FAILED = {
    "key_revoked": "the gateway key that created the batch ({key}) was revoked before this request ran",
    "headers_unreadable": "the batch's stored request headers could not be opened, so this request never ran",
}


def key_revoked(key_id: str) -> BatchError:
    """The batch-level error of a batch stopped because the key it runs as was revoked."""
    return BatchError("key_revoked", f"the gateway key that created the batch ({key_id}) was revoked while it ran: "
                      "requests not yet sent then failed (see the error file)")


def headers_unreadable(reason: str) -> BatchError:
    """The batch-level error of a batch whose sealed headers do not open."""
    return BatchError("headers_unreadable", f"the batch's stored request headers (provider credentials, config) "
                      f"cannot be opened: {reason}; no request was sent with them")


@dataclass(frozen=True, slots=True)
class Ending:
    """How a batch ended, as its finish needs it."""

    batch_id: str
    workspace: str
    input_file_id: str
    #: the final status: ``completed``, ``cancelled``, ``expired`` or ``failed``
    final: str
    #: why it failed (with ``final == "failed"``), and the key it ran as
    failure: BatchError | None = None
    key_id: str = ""
    #: the output and error files expire this long after they are written (None: kept until deleted)
    output_expires_s: int | None = None

    def unrun(self) -> tuple[str, str]:
        """The error code and message of a line without a result."""
        if self.final == STOP_FAILED and self.failure is not None:
            return self.failure.code, UNRUN_FAILED[self.failure.code].format(key=self.key_id)
        return UNRUN[self.final]


def output_ids(batch_id: str) -> tuple[str, str]:
    stem = batch_id[len(BATCH_PREFIX):] if batch_id.startswith(BATCH_PREFIX) else batch_id
    return f"{FILE_PREFIX}{stem}-output", f"{FILE_PREFIX}{stem}-errors"


class _OutFile:
    def __init__(self, files: GatewayFiles, file_id: str, filename: str) -> None:
        self.files = files
        self.file_id = file_id
        self.filename = filename
        self.writer: FileWriter | None = None
        self.pending: list[bytes] = []
        self.size = 0

    async def add(self, line: bytes) -> None:
        if self.writer is None:
            self.writer = self.files.writer(self.file_id)
        self.pending.append(line)
        self.pending.append(b"\n")
        self.size += len(line) + 1
        if self.size >= 256 * 1024:
            await self._flush()

    async def _flush(self) -> None:
        if self.pending:
            assert self.writer is not None  # add() opened it
            await self.writer.write(b"".join(self.pending))
            self.pending.clear()
            self.size = 0

    async def commit(self, workspace: str, expires_after_s: int | None) -> str | None:
        if self.writer is None:
            return None
        await self._flush()
        size = await self.writer.commit()
        await self.files.add(workspace, self.file_id, self.filename, BATCH_OUTPUT, size, expires_after_s)
        return self.file_id

    async def abort(self) -> None:
        if self.writer is not None:
            await self.writer.abort()


async def write_outputs(files: GatewayFiles, results: Results, lines: ResultLines,
                        ending: Ending) -> tuple[str | None, str | None]:
    """Write the output and error files of the batch; returns their ids (None for an empty one). ``results``
    counts what is written into its tally."""
    batch_id = ending.batch_id
    out_id, err_id = output_ids(batch_id)
    output = _OutFile(files, out_id, f"{batch_id}_output.jsonl")
    errors = _OutFile(files, err_id, f"{batch_id}_errors.jsonl")
    code, message = ending.unrun()
    pending: list[tuple[int, bytes]] = []

    async def drain() -> None:
        numbers = [number for number, _ in pending]
        by_number = dict(pending)
        async for number, value in results.read(numbers):
            if value is None:
                value = lines.error(custom_id_of(by_number[number]), code, message)
            await (output if value[:1] == OUTPUT else errors).add(value[1:])
        pending.clear()

    try:
        async for number, line in file_lines(files.read(ending.input_file_id)):
            pending.append((number, line))
            if len(pending) >= 512:
                await drain()
        await drain()
    except FileMissing:
        await output.abort()
        await errors.abort()
        return None, None
    except BaseException:
        await output.abort()
        await errors.abort()
        raise
    expires = ending.output_expires_s
    return await output.commit(ending.workspace, expires), await errors.commit(ending.workspace, expires)
