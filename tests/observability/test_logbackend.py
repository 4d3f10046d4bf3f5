"""The request-log store's shared suite: every test here runs against each backend behind ``LogWriter`` and
``LogReader`` (the embedded SQLite file and PostgreSQL), as a worker builds it from its settings, and says what the
log routes rely on: what is written is read back, filtered, paged, summed into a window and followed live."""

from __future__ import annotations

import time
import uuid

import pytest

from gateway.observability.aggregates import read_report
from gateway.observability.logbackend import LogBackend, LogReader, LogWriter
from gateway.observability.logstore import LogFilter
from gateway.observability.logtail import Subscriber, row_matcher
from gateway.observability.metrics import Metrics
from gateway.observability.pglog.backend import PgLogs
from gateway.observability.rollups import RequestStats
from gateway.observability.sqlitelog import SqliteLogs
from gateway.settings import load
from gateway.waiting import within
from tests.support.poll import await_for
from tests.support.postgres import pg_url  # noqa: F401 - a fixture

BACKENDS = ["sqlite", "postgresql"]


def _backend(kind: str, request: pytest.FixtureRequest, data_dir: str) -> LogBackend:
    env = {"GATEWAY_DATA_DIR": data_dir, "GATEWAY_LOG_FILE": "off"}
    if kind == "sqlite":
        return SqliteLogs.for_settings(load(env))
    env["GATEWAY_LOG_STORE_URL"] = request.getfixturevalue("pg_url")
    return PgLogs.for_settings(load(env), Metrics())


@pytest.fixture(params=BACKENDS)
async def logs(request, tmp_path):
    backend = _backend(request.param, request, str(tmp_path))
    await backend.open()
    yield backend
    await backend.close()


def _request(ts: float, *, workspace: str | None = "ws", trace: str | None = None, status: int = 200,
             provider: str = "vendorA", model: str = "gpt-4o-mini") -> tuple[tuple, bytes, RequestStats]:
    """One request as the recorder builds it: its row, its JSON line and its rollup figures."""
    trace = trace or uuid.uuid4().hex
    doc = b'{"trace_id":"%s","model":"%s","status":%d}' % (trace.encode(), model.encode(), status)
    row = (ts, workspace, trace, status, provider, model, doc)
    return row, doc + b"\n", RequestStats(ts, workspace, provider, model, status, 12.0, 2.0, 10, 20, 0.001)


async def _write(logs: LogWriter, requests: list[tuple[tuple, bytes, RequestStats]]) -> None:
    rows, lines, stats = (list(part) for part in zip(*requests, strict=True))
    assert await logs.write(rows, lines, stats) == 0


async def _listed(logs: LogReader, count: int, **filters: object) -> list[tuple[int, bytes]]:
    """The rows of every workspace once ``count`` are listed (a backend may store a batch a moment later)."""
    flt = LogFilter(limit=100, **filters)  # type: ignore[arg-type]

    async def enough() -> list[tuple[int, bytes]] | None:
        rows, _ = await logs.query(None, flt, every_workspace=True)
        return rows if len(rows) >= count else None

    return await await_for(enough, timeout=15.0)


async def test_what_is_written_is_listed_newest_first_and_filtered(logs):
    now = time.time()
    await _write(logs, [_request(now - 3, trace="t-old", status=200),
                        _request(now - 2, trace="t-err", status=503, provider="anthropic", model="claude"),
                        _request(now - 1, trace="t-new", status=200, workspace="other")])
    rows = await _listed(logs, 3)
    assert [doc.split(b'"')[3] for _, doc in rows] == [b"t-new", b"t-err", b"t-old"]
    assert rows[0][0] > rows[1][0] > rows[2][0]  # ids grow with each row
    for flt, traces in (({"status_class": 5}, [b"t-err"]), ({"status": 200}, [b"t-new", b"t-old"]),
                        ({"provider": "anthropic"}, [b"t-err"]), ({"model": "claude"}, [b"t-err"]),
                        ({"trace_id": "t-old"}, [b"t-old"]), ({"since": now - 1.5}, [b"t-new"])):
        found, more = await logs.query(None, LogFilter(**flt), every_workspace=True)  # type: ignore[arg-type]
        assert [doc.split(b'"')[3] for _, doc in found] == traces, flt
        assert not more


async def test_a_workspace_reads_only_its_own_rows_and_pages_with_a_cursor(logs):
    now = time.time()
    await _write(logs, [_request(now - i, trace=f"t-{i}") for i in range(5)] + [_request(now, workspace="other")])
    await _listed(logs, 6)
    first, more = await logs.query("ws", LogFilter(limit=2))
    assert [doc.split(b'"')[3] for _, doc in first] == [b"t-4", b"t-3"] and more  # by id: the last written first
    second, more = await logs.query("ws", LogFilter(limit=10, after=first[-1][0]))
    assert [doc.split(b'"')[3] for _, doc in second] == [b"t-2", b"t-1", b"t-0"] and not more
    nobody, more = await logs.query("nobody", LogFilter())
    assert nobody == [] and not more


async def test_the_window_sums_what_was_written(logs):
    now = time.time()
    await _write(logs, [_request(now - 1, status=500 if i % 3 == 0 else 200) for i in range(9)])
    await _listed(logs, 9)
    report = await read_report(logs, "1h", None, now=now + 1)
    assert report.totals.requests == 9
    assert report.totals.by_status == {"200": 6, "500": 3}
    assert report.totals.latency_p50_ms == pytest.approx(12.0, rel=0.05)
    narrowed = await read_report(logs, "15m", "ws", provider="nobody", now=now + 1)
    assert narrowed.totals.requests == 0


async def test_the_live_tail_hands_new_rows_to_a_subscriber(logs):
    tail = logs.tail()
    subscriber = Subscriber(("all",), row_matcher(LogFilter(), None, True))
    await tail.subscribe(subscriber)
    try:
        await _write(logs, [_request(time.time(), trace="t-live")])
        await within(subscriber.wake.wait(), 15.0)
        assert b"t-live" in subscriber.take()
    finally:
        tail.unsubscribe(subscriber)
        await tail.close()


async def test_health_names_the_backend_and_another_worker_reads_what_one_wrote(logs, request, tmp_path):
    kind = request.node.callspec.params["logs"]
    health = logs.health()
    assert health["backend"] == kind and health["healthy"] is True
    await _write(logs, [_request(time.time(), trace="t-kept")])
    await _listed(logs, 1)
    # the same store opened again: SQLite as another worker of this machine (the same data directory), PostgreSQL
    # as another instance (its own data directory and spool)
    other_dir = tmp_path / ("." if kind == "sqlite" else "other")
    other_dir.mkdir(exist_ok=True)
    other = _backend(kind, request, str(other_dir))
    await other.open()
    try:
        rows, _ = await other.query(None, LogFilter(), every_workspace=True)
        assert [doc.split(b'"')[3] for _, doc in rows] == [b"t-kept"]
    finally:
        await other.close()
