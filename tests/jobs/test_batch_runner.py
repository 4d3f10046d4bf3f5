"""The batch runner in process, against a scripted app standing in for the pipeline: states, order, retries,
limit waits, cancel, expiry, resume after a crash and one runner per batch."""

from __future__ import annotations

import asyncio
import time

import msgspec
import pytest

from gateway.api.jobs import batch_parsers
from gateway.controlplane.keys import ApiKeys, KeyStore
from gateway.controlplane.secrets import SecretBox
from gateway.jobs.batch_deps import RunnerDeps
from gateway.jobs.batch_runner import BatchRunner
from gateway.jobs.batch_scheduler import BatchScheduler
from gateway.jobs.batch_store import BatchRecord, BatchStore, lease_key, seal_headers
from gateway.jobs.dispatch import InProcessDispatcher
from gateway.jobs.files import GatewayFiles, new_file_id
from gateway.jobs.filestore import DirectoryFileStore
from gateway.schema.batches import Batch
from gateway.settings import Settings
from gateway.state.memory import MemoryStateStore
from gateway.waiting import within
from tests.support.poll import await_for

CHAT = "/v1/chat/completions"
OK = b'{"object":"chat.completion","usage":{"prompt_tokens":2,"completion_tokens":3,"total_tokens":5}}'


class ScriptedApp:
    """Answers each call with ``answer(call number, body)`` -> (status, headers, body), after ``delay`` seconds."""

    def __init__(self, answer=None, delay: float = 0.0) -> None:
        self.answer = answer or (lambda n, body: (200, [], OK))
        self.delay = delay
        self.calls = 0
        self.bodies: list[bytes] = []
        self.headers: list[dict[bytes, bytes]] = []

    async def __call__(self, scope, receive, send) -> None:
        body = (await receive())["body"]
        self.calls += 1
        self.bodies.append(body)
        self.headers.append(dict(scope["headers"]))
        if self.delay:
            await asyncio.sleep(self.delay)
        status, headers, answer = self.answer(self.calls, body)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": answer})


def lines(n: int, bad: tuple[int, ...] = ()) -> bytes:
    out = []
    for i in range(1, n + 1):
        if i in bad:
            out.append(b"{not json")
        else:
            out.append(msgspec.json.encode({"custom_id": f"c{i}", "method": "POST", "url": CHAT, "body": {
                "model": "m", "messages": [{"role": "user", "content": f"line {i}"}]}}))
    return b"\n".join(out) + b"\n"


class Harness:
    def __init__(self, store, tmp_path, app: ScriptedApp, **settings) -> None:
        values = {"data_dir": str(tmp_path), "batch_poll_ms": 50, "batch_lease_ms": 600, "batch_concurrency": 4}
        values.update(settings)
        self.settings = Settings(**values)
        self.store = store
        self.box = SecretBox(b"k" * 32)
        self.batches = BatchStore(store, lambda: self.box)
        self.files = GatewayFiles(store, DirectoryFileStore(tmp_path / "files"))
        self.app = app
        self.deps = RunnerDeps(self.settings, self.batches, self.files, InProcessDispatcher(app).call, batch_parsers(),
                               KeyStore(ApiKeys(store), None), lambda: self.box)

    async def batch(self, content: bytes, window_s: int = 3600, sealed_by: SecretBox | None = None,
                    headers: tuple[tuple[str, str], ...] = (("x-gateway-api-key", "k"),)) -> str:
        """A batch of ``content``; its headers stored in plain text (as older gateways did), or sealed by a box."""
        file_id = new_file_id()
        writer = self.files.writer(file_id)
        await writer.write(content)
        size = await writer.commit()
        await self.files.add("default", file_id, "in.jsonl", "batch", size)
        now = int(time.time())
        batch = Batch(id=f"batch_gw_{file_id[8:]}", endpoint=CHAT, input_file_id=file_id,
                      completion_window="immediate", created_at=now, expires_at=now + window_s)
        record = BatchRecord(id=batch.id, workspace_id="default", batch=batch)
        if sealed_by is None:
            record.headers = list(headers)
        else:
            record.sealed_headers = seal_headers(sealed_by, "default", batch.id, list(headers))
        await self.batches.create(record)
        return batch.id

    async def run(self, batch_id: str, holder: str = "h1", timeout: float = 30) -> Batch:  # noqa: ASYNC109
        assert await self.store.lease(lease_key(batch_id), holder, self.settings.batch_lease_ms)
        await within(BatchRunner(self.deps, batch_id, holder).run(), timeout)
        return (await self.batches.get("default", batch_id)).batch

    async def output(self, file_id: str | None) -> list[dict]:
        if file_id is None:
            return []
        data = b"".join([p async for p in self.files.read(file_id)])
        return [msgspec.json.decode(line) for line in data.splitlines()]


async def test_a_batch_runs_every_line_and_writes_them_in_input_order(tmp_path):
    h = Harness(MemoryStateStore(), tmp_path, ScriptedApp(delay=0.005))
    batch = await h.run(await h.batch(lines(30)))
    assert batch.status == "completed"
    assert batch.in_progress_at and batch.finalizing_at and batch.completed_at
    assert (batch.request_counts.total, batch.request_counts.completed, batch.request_counts.failed) == (30, 30, 0)
    assert batch.usage.total_tokens == 150 and batch.error_file_id is None
    out = await h.output(batch.output_file_id)
    assert [line["custom_id"] for line in out] == [f"c{i}" for i in range(1, 31)]
    assert all(line["response"]["status_code"] == 200 for line in out)


async def test_bad_lines_are_recorded_with_their_number_and_the_rest_run(tmp_path):
    h = Harness(MemoryStateStore(), tmp_path, ScriptedApp())
    batch = await h.run(await h.batch(lines(6, bad=(2, 5))))
    assert batch.status == "completed"
    assert [(e.code, e.line) for e in batch.errors.data] == [("invalid_json_line", 2), ("invalid_json_line", 5)]
    assert (batch.request_counts.completed, batch.request_counts.failed) == (4, 2)
    errors = await h.output(batch.error_file_id)
    assert [e["error"]["code"] for e in errors] == ["invalid_json_line"] * 2
    assert h.app.calls == 4


@pytest.mark.parametrize("content, code", [(lines(3, bad=(1, 2, 3)), "invalid_json_line"), (b"\n\n", "empty_file")])
async def test_a_file_without_a_valid_line_fails_the_batch(tmp_path, content, code):
    h = Harness(MemoryStateStore(), tmp_path, ScriptedApp())
    batch = await h.run(await h.batch(content))
    assert batch.status == "failed" and batch.failed_at and batch.errors.data[0].code == code
    assert h.app.calls == 0 and batch.output_file_id is None


async def test_too_many_lines_fail_the_batch(tmp_path):
    h = Harness(MemoryStateStore(), tmp_path, ScriptedApp(), batch_max_lines=5)
    batch = await h.run(await h.batch(lines(6)))
    assert batch.status == "failed" and batch.errors.data[0].code == "too_many_requests"


async def test_the_gateways_own_429_is_waited_out_not_failed(tmp_path):
    limited = (429, [(b"retry-after-ms", b"30")], b'{"error":{"message":"rate limit","type":"rate_limit_error"}}')
    app = ScriptedApp(lambda n, body: limited if n <= 6 else (200, [], OK))
    h = Harness(MemoryStateStore(), tmp_path, app, batch_line_attempts=1)
    batch = await h.run(await h.batch(lines(10)))
    assert (batch.status, batch.request_counts.completed, batch.request_counts.failed) == ("completed", 10, 0)
    assert app.calls == 16


async def test_a_spent_usage_limit_is_each_lines_answer_not_retried(tmp_path):
    spent = (429, [], b'{"error":{"message":"usage limit policy exceeded","type":"insufficient_quota",'
                      b'"param":null,"code":"usage_limit_exceeded"}}')
    app = ScriptedApp(lambda n, body: (200, [], OK) if n <= 3 else spent)
    h = Harness(MemoryStateStore(), tmp_path, app, batch_line_attempts=5, batch_concurrency=1)
    batch = await h.run(await h.batch(lines(10)))
    assert (batch.status, batch.request_counts.completed, batch.request_counts.failed) == ("completed", 3, 7)
    assert app.calls == 10  # one call per line: a spent budget is never retried


class RateLimitedApp(ScriptedApp):
    """A stand-in for a rate-limit policy: ``per_window`` calls per ``window_s``; beyond, the gateway's own 429
    with the time to the next window as Retry-After."""

    def __init__(self, per_window: int, window_s: float) -> None:
        super().__init__(delay=0.005)
        self.per_window = per_window
        self.window_s = window_s
        self.window_start = time.monotonic()
        self.used = 0
        self.limited = 0

    async def __call__(self, scope, receive, send) -> None:
        now = time.monotonic()
        if now - self.window_start >= self.window_s:
            self.window_start, self.used = now, 0
        if self.used >= self.per_window:
            await receive()
            self.limited += 1
            wait_ms = int((self.window_start + self.window_s - now) * 1000) + 1
            await send({"type": "http.response.start", "status": 429,
                        "headers": [(b"retry-after-ms", str(wait_ms).encode())]})
            await send({"type": "http.response.body", "body": b'{"error":{"message":"rate limit exceeded"}}'})
            return
        self.used += 1
        await super().__call__(scope, receive, send)


async def test_a_batch_slows_down_to_its_limit_instead_of_tripping_it(tmp_path):
    app = RateLimitedApp(per_window=4, window_s=0.1)
    h = Harness(MemoryStateStore(), tmp_path, app, batch_concurrency=16)
    batch = await h.run(await h.batch(lines(80)))
    assert (batch.status, batch.request_counts.completed, batch.request_counts.failed) == ("completed", 80, 0)
    # sixteen lines at a time would meet the limit about twelve times per window (some 240 times in all)
    print("LIMITED", app.limited)
    assert app.limited < 120, app.limited


async def test_upstream_failures_are_tried_again_then_recorded(tmp_path):
    relayed = (500, [], b'{"error":{"message":"boom"},"provider":"vendorA"}')

    def answer(n, body):
        if b"line 3" in body:
            return relayed  # always fails
        return relayed if n <= 2 else (200, [], OK)

    app = ScriptedApp(answer)
    h = Harness(MemoryStateStore(), tmp_path, app, batch_line_attempts=3, batch_concurrency=1)
    batch = await h.run(await h.batch(lines(4)))
    assert (batch.request_counts.completed, batch.request_counts.failed) == (3, 1)
    errors = await h.output(batch.error_file_id)
    assert [(e["custom_id"], e["response"]["status_code"]) for e in errors] == [("c3", 500)]
    assert sum(1 for b in app.bodies if b"line 3" in b) == 3


async def test_cancel_stops_new_lines_and_keeps_finished_ones(tmp_path):
    h = Harness(MemoryStateStore(), tmp_path, ScriptedApp(delay=0.05), batch_concurrency=2)
    batch_id = await h.batch(lines(40))
    task = asyncio.create_task(h.run(batch_id))
    await await_for(lambda: _done_at_least(h, batch_id, 4), 20)
    await h.batches.request_cancel(batch_id, int(time.time()), int(time.time()) + 3600)
    batch = await task
    assert batch.status == "cancelled" and batch.cancelled_at and batch.cancelling_at
    out, errors = await h.output(batch.output_file_id), await h.output(batch.error_file_id)
    assert 4 <= len(out) < 40 and len(out) + len(errors) == 40
    assert {e["error"]["code"] for e in errors} == {"batch_cancelled"}
    assert sorted([int(x["custom_id"][1:]) for x in out + errors]) == list(range(1, 41))


async def test_a_batch_past_its_window_expires_with_what_finished(tmp_path):
    h = Harness(MemoryStateStore(), tmp_path, ScriptedApp(delay=0.05), batch_concurrency=1)
    batch = await h.run(await h.batch(lines(100), window_s=1))
    assert batch.status == "expired" and batch.expired_at
    out, errors = await h.output(batch.output_file_id), await h.output(batch.error_file_id)
    assert out and len(out) + len(errors) == 100
    assert {e["error"]["code"] for e in errors} == {"batch_expired"}


async def _done_at_least(h: Harness, batch_id: str, n: int) -> bool:
    live = await h.batches.counts(batch_id)
    return live is not None and live.counts.completed >= n


async def test_a_resumed_batch_sends_only_unfinished_lines_and_writes_each_once(store, tmp_path):
    app = ScriptedApp(delay=0.02)
    h = Harness(store, tmp_path, app, batch_concurrency=3)
    batch_id = await h.batch(lines(60, bad=(7,)))
    first = asyncio.create_task(h.run(batch_id, holder="first"))
    await await_for(lambda: _done_at_least(h, batch_id, 15), 20)
    first.cancel()  # the runner dies mid-batch: lines in flight are lost
    with pytest.raises(asyncio.CancelledError):
        await first
    sent_before = app.calls
    batch = await h.run(batch_id, holder="second")
    assert batch.status == "completed"
    assert (batch.request_counts.total, batch.request_counts.completed, batch.request_counts.failed) == (60, 59, 1)
    out = await h.output(batch.output_file_id)
    assert [line["custom_id"] for line in out] == [f"c{i}" for i in range(1, 61) if i != 7]
    assert 59 <= app.calls <= 59 + 3  # at-least-once: only the lines in flight at the crash are sent twice
    assert app.calls > sent_before


async def test_two_schedulers_run_each_batch_exactly_once(store, tmp_path):
    app = ScriptedApp(delay=0.01)
    h = Harness(store, tmp_path, app)
    ids = [await h.batch(lines(20)) for _ in range(3)]
    schedulers = [BatchScheduler(h.deps), BatchScheduler(h.deps)]
    for scheduler in schedulers:
        await scheduler.start()
    try:
        async def all_done() -> bool:
            statuses = [(await h.batches.get("default", i)).batch.status for i in ids]
            return statuses == ["completed"] * 3

        await await_for(all_done, 30)
    finally:
        for scheduler in schedulers:
            await scheduler.close()
    assert app.calls == 60
    assert not await h.batches.active_ids()


SECRET_HEADERS = (("authorization", "Bearer sk-upstream-secret"), ("x-gateway-config", '{"api_key":"sk-cfg"}'))


@pytest.mark.parametrize("sealed", [True, False], ids=["sealed", "plain-older-record"])
async def test_lines_are_sent_with_the_batchs_headers_sealed_or_as_older_records_hold_them(tmp_path, sealed):
    h = Harness(MemoryStateStore(), tmp_path, ScriptedApp())
    batch_id = await h.batch(lines(3), headers=SECRET_HEADERS, sealed_by=h.box if sealed else None)
    stored = await h.store.record_get("batch", batch_id)
    assert (b"sk-upstream-secret" in stored.doc) is not sealed
    batch = await h.run(batch_id)
    assert (batch.status, batch.request_counts.completed) == ("completed", 3)
    assert all(sent[b"authorization"] == b"Bearer sk-upstream-secret" and sent[b"x-gateway-config"] == b'{"api_key":'
               b'"sk-cfg"}' for sent in h.app.headers)
    # an older record is sealed the first time it is read (here by the runner)
    stored = await h.store.record_get("batch", batch_id)
    assert b"sk-upstream-secret" not in stored.doc and b"sk-cfg" not in stored.doc


async def test_headers_sealed_under_another_secret_key_fail_the_batch_before_any_line_is_sent(store, tmp_path):
    h = Harness(store, tmp_path, ScriptedApp())
    batch = await h.run(await h.batch(lines(4, bad=(2,)), headers=SECRET_HEADERS, sealed_by=SecretBox(b"o" * 32)))
    assert batch.status == "failed" and batch.failed_at and h.app.calls == 0
    assert [e.code for e in batch.errors.data] == ["invalid_json_line", "headers_unreadable"]
    assert "another secret key" in batch.errors.data[-1].message
    assert "GATEWAY_SECRET_KEY" in batch.errors.data[-1].message
    assert (batch.request_counts.total, batch.request_counts.completed, batch.request_counts.failed) == (4, 0, 1)
    errors = await h.output(batch.error_file_id)
    assert [e["error"]["code"] for e in errors] == ["headers_unreadable", "invalid_json_line", "headers_unreadable",
                                                       "headers_unreadable"]
    assert not await h.batches.active_ids()


async def test_a_sealed_blob_copied_from_another_batch_does_not_open(tmp_path):
    h = Harness(MemoryStateStore(), tmp_path, ScriptedApp())
    source = await h.batches.find(await h.batch(lines(1), headers=SECRET_HEADERS, sealed_by=h.box))
    target_id = await h.batch(lines(2), sealed_by=h.box)
    target = await h.batches.find(target_id)
    target.sealed_headers = source.sealed_headers
    await h.batches.save(target)
    batch = await h.run(target_id)
    assert batch.status == "failed" and h.app.calls == 0
    assert batch.errors.data[-1].code == "headers_unreadable"
    assert "another record" in batch.errors.data[-1].message
