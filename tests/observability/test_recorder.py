"""The recorder a worker hands finished requests to: the records of a batch become their log rows and lines, stored as
they were; a record that cannot be built is counted and reported, and loses nothing else of its batch."""

from __future__ import annotations

import asyncio
import time

from gateway.observability.linesink import LineSink
from gateway.observability.logstore import LogFilter, LogStore
from gateway.observability.metrics import LOGS_DROPPED
from gateway.observability.record import RequestRecord
from gateway.observability.recorder import ObservabilityRecorder
from gateway.observability.sqlitelog import SqliteLogs
from gateway.schema.common import Usage
from gateway.settings import load


def _record(trace_id: str) -> RequestRecord:
    now = time.perf_counter()
    rec = RequestRecord(trace_id, "chat", now)
    rec.workspace, rec.provider, rec.model, rec.status = "default", "vendorA", "gpt-4o-mini", 200
    rec.upstream_started, rec.upstream_s, rec.total_s = now + 0.0001, 0.02, 0.0205
    rec.usage, rec.usage_source = Usage(prompt_tokens=12, completion_tokens=40, total_tokens=52), "reported"
    return rec


def _recorder(tmp_path) -> ObservabilityRecorder:
    settings = load({"GATEWAY_DATA_DIR": str(tmp_path), "GATEWAY_LOG_FILE": "off"})
    return ObservabilityRecorder(settings, SqliteLogs(LogStore(str(tmp_path / "logs.db")), LineSink("off")))


def test_records_are_stored_as_they_were_and_an_unbuildable_one_is_counted_alone(tmp_path, capsys):
    recorder = _recorder(tmp_path)
    broken = _record("trace-broken")
    broken.started = None  # type: ignore[assignment]  # what no pipeline sends: the build fails
    for rec in (_record("trace-a"), broken, _record("trace-b")):
        recorder.record(rec)  # the request path: an enqueue

    async def write() -> tuple[list[tuple[int, bytes]], bool]:
        await recorder.logs.open()
        await recorder.drain()
        return await recorder.logs.query(None, LogFilter(limit=10), every_workspace=True)

    rows, more = asyncio.run(write())
    assert not more
    assert [b'"trace_id":"trace-b"' in doc for _, doc in rows] == [True, False]
    assert b'"trace_id":"trace-a"' in rows[1][1] and b'"completion_tokens":40' in rows[1][1]
    assert recorder.metrics._counts[(LOGS_DROPPED, ("build_failed",))] == 1
    assert "request log build failed" in capsys.readouterr().err  # reported once, on stderr
    asyncio.run(recorder.logs.close())
