"""Sending a batch's lines through the pipeline, at most ``batch_concurrency`` at once, each retried or paused as
its answer asks, and storing each line's result. See ``docs/jobs.md`` for what a line's answer means to the batch.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable

import msgspec

from gateway.controlplane.keys import KeyRecord
from gateway.http.errors import UsageLimitExceeded
from gateway.jobs.batch_lines import InputLine, file_lines
from gateway.jobs.batch_output import OUTPUT, ResultLines, answer_usage, gateway_limit, retry_after_s
from gateway.jobs.batch_progress import Results, RunAs, RunControl, Tally
from gateway.jobs.dispatch import Headers, LocalResponse
from gateway.jobs.files import GatewayFiles

log = logging.getLogger("gateway.jobs")

#: runs one request through the pipeline: ``(method, path, headers, body, key) -> answer``
SendLine = Callable[[str, str, Headers, bytes, "KeyRecord | None"], Awaitable[LocalResponse]]

TRANSIENT = frozenset({408, 429, 500, 502, 503, 504})
USAGE_LIMIT = UsageLimitExceeded.code
BACKOFF_MAX_S = 8.0
_line_decoder = msgspec.json.Decoder(InputLine)


class LineDispatch:
    """Runs the lines of one batch that have no result yet."""

    def __init__(self, batch_id: str, send: SendLine, files: GatewayFiles, concurrency: int, attempts: int,
                 run_as: RunAs, control: RunControl, tally: Tally, results: Results, lines: ResultLines) -> None:
        self.batch_id = batch_id
        self.send = send
        self.files = files
        self.concurrency = concurrency
        self.attempts = attempts
        self.run_as = run_as
        self.control = control
        self.tally = tally
        self.results = results
        self.lines = lines

    async def run(self, input_file_id: str, invalid: set[int], keep: int) -> None:
        """Send every line not in ``invalid`` and not done; returns when the sent ones have finished."""
        control = self.control
        slots = asyncio.Semaphore(self.concurrency)
        running: set[asyncio.Task] = set()

        def finished(task: asyncio.Task) -> None:
            running.discard(task)
            slots.release()
            if not task.cancelled() and task.exception() is not None:
                log.error("batch %s: a line failed unexpectedly", self.batch_id, exc_info=task.exception())

        try:
            async for number, line in file_lines(self.files.read(input_file_id)):
                if control.stop_reason is not None:
                    break
                if number in invalid or number in self.tally.done:
                    continue
                await slots.acquire()
                if control.stop_reason is not None:
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
        request_id = f"{self.batch_id}-{number}"
        headers = [*self.run_as.headers, (b"content-type", b"application/json"),
                   (b"x-gateway-trace-id", request_id.encode())]
        control = self.control
        attempt = 1
        while True:
            if not await self._gate():
                return
            response = await self.send("POST", item.url, headers, body, self.run_as.key)
            if response.status == 429:
                limit = gateway_limit(response.body)
                if limit == USAGE_LIMIT:  # final: the budget will not come back while the batch runs
                    break
                if limit is not None:
                    control.pause_until = max(control.pause_until,
                                              time.monotonic() + (retry_after_s(response.headers) or 1.0))
                    continue
            if response.status in TRANSIENT and attempt < self.attempts:
                asked = retry_after_s(response.headers)
                wait = asked if asked is not None else min(BACKOFF_MAX_S, 0.25 * 2 ** attempt) * random.uniform(1, 1.5)
                attempt += 1
                if await control.wait_stop(wait):
                    return
                continue
            break
        value = self.lines.response(item.custom_id, request_id, response.status, response.body)
        if await self.results.put(number, value, keep):
            output = value[:1] == OUTPUT
            self.tally.add(number, output, answer_usage(response.body) if output else None)
            self.tally.dirty = True

    async def _gate(self) -> bool:
        """Wait out a limit pause; False when the batch stops meanwhile."""
        control = self.control
        while True:
            if control.stop_reason is not None:
                return False
            left = control.pause_until - time.monotonic()
            if left <= 0:
                return True
            if await control.wait_stop(left):
                return False
