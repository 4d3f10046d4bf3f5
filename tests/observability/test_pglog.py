"""The PostgreSQL log store against a real PostgreSQL (a database of each test's own): migrations safe when
instances start at once, batches stored once however often replayed, rollups merged by the database, retention by
whole day partitions, the spool while the store is away and its bound; and the URL setting's checks."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from pathlib import Path

import asyncpg
import msgspec
import pytest

from gateway import settings as settings_module
from gateway.observability.logstore import LogFilter
from gateway.observability.logtail import Subscriber, row_matcher
from gateway.observability.metrics import LOGS_DROPPED, Metrics
from gateway.observability.pglog import tail as tail_module
from gateway.observability.pglog.aggregates import shared_report
from gateway.observability.pglog.migrations import LATEST, migrate
from gateway.observability.pglog.spool import Spool
from gateway.observability.pglog.store import DAY_S, PgLogStore, clean_text, partition_name
from gateway.observability.pglog.writer import PgWriter
from gateway.observability.rollups import bucket
from tests.support.postgres import pg_url  # noqa: F401 - a fixture
from tests.support.servers import free_port


def record(ts: float, *, workspace: str = "ws", trace: str | None = None, status: int = 200,
           provider: str = "vendorA", model: str = "gpt-4o-mini", latency: float = 12.0) -> tuple:
    trace = trace or uuid.uuid4().hex
    doc = b'{"trace_id":"%s","model":"%s","status":%d}' % (trace.encode(), model.encode(), status)
    return (uuid.uuid4().hex, ts, workspace, trace, status, provider, model, latency, 2.0, 10, 20, 0.001,
            bucket(latency), bucket(2.0), doc)


async def until(condition, seconds: float) -> None:
    """Wait (bounded) for ``condition()`` to hold: a poll of another task's state."""
    for _ in range(int(seconds / 0.05)):
        if condition():
            return
        await asyncio.sleep(0.05)


async def test_instances_starting_at_once_apply_each_migration_once(pg_url):  # noqa: F811
    conns = [await asyncpg.connect(pg_url) for _ in range(4)]
    try:
        applied = await asyncio.gather(*(migrate(conn) for conn in conns))
        assert sorted(v for versions in applied for v in versions) == list(range(1, LATEST + 1))
        rows = await conns[0].fetch("SELECT version FROM gateway.schema_migrations")
        assert [r[0] for r in rows] == list(range(1, LATEST + 1))
        assert await migrate(conns[1]) == []
    finally:
        for conn in conns:
            await conn.close()


async def test_a_replayed_batch_is_stored_once_and_counted_once(pg_url):  # noqa: F811
    store = PgLogStore(pg_url)
    now = time.time()
    batch = [record(now - i, status=500 if i % 3 == 0 else 200) for i in range(30)]
    try:
        assert await store.write(batch) == 30
        assert await store.write(batch[10:] + [record(now)]) == 1  # a replay after a lost acknowledgement
        rows, more = await store.query(None, LogFilter(limit=100), every_workspace=True)
        assert len(rows) == 31 and not more
        report = await shared_report(store, "1h", None, now=now + 1)
        assert report.totals.requests == 31
        assert report.totals.by_status == {"200": 21, "500": 10}
        assert report.totals.latency_p50_ms == pytest.approx(12.0, rel=0.05)
    finally:
        await store.close()


async def test_filters_read_what_they_name_newest_first_and_page(pg_url):  # noqa: F811
    store = PgLogStore(pg_url)
    now = time.time()
    try:
        await store.write([record(now - 5, model="m-a", provider="vendorA", trace="t1"),
                           record(now - 4, model="m-b", provider="vendorB", status=404),
                           record(now - 3, model="m-a", workspace="other"),
                           record(now - 2, model="m-a", status=503)])
        every = await store.query(None, LogFilter(limit=10), every_workspace=True)
        assert len(every[0]) == 4
        ids = [row_id for row_id, _ in every[0]]
        assert ids == sorted(ids, reverse=True)
        assert len((await store.query("ws", LogFilter(model="m-a")))[0]) == 2
        assert len((await store.query("ws", LogFilter(provider="vendorB")))[0]) == 1
        assert len((await store.query("ws", LogFilter(status_class=5)))[0]) == 1
        assert len((await store.query("ws", LogFilter(trace_id="t1")))[0]) == 1
        assert len((await store.query("ws", LogFilter(since=now - 4.5, until=now - 1)))[0]) == 2
        first, more = await store.query("ws", LogFilter(limit=2))
        assert more
        rest, more = await store.query("ws", LogFilter(limit=2, after=first[-1][0]))
        assert len(rest) == 1 and not more
    finally:
        await store.close()


async def test_a_model_name_no_index_can_hold_is_stored_and_found_not_a_stuck_writer(pg_url):  # noqa: F811
    store = PgLogStore(pg_url)
    odd = "gpt\x00" + "x" * 5000 + "\udcff"
    try:
        rec = list(record(time.time()))
        rec[6] = clean_text(odd)  # as the recorder cleans it
        assert await store.write([tuple(rec)]) == 1
        rows, _ = await store.query("ws", LogFilter(model=odd))
        assert len(rows) == 1
    finally:
        await store.close()


async def test_retention_drops_whole_days_and_the_rollups_of_past_windows(pg_url):  # noqa: F811
    store = PgLogStore(pg_url, retention_days=2)
    now = time.time()
    store._last_prune = now  # the writer prunes about once a minute: here the test does, once
    try:
        await store.write([record(now - 5 * DAY_S), record(now - DAY_S), record(now)])
        dropped = await store.prune(now)
        assert dropped == [partition_name(int((now - 5 * DAY_S) // DAY_S) * DAY_S)]
        rows, _ = await store.query(None, LogFilter(limit=10), every_workspace=True)
        assert len(rows) == 2
        report = await shared_report(store, "1d", None, now=now)
        assert report.totals.requests == 1  # the record of a day ago is outside the day's window
    finally:
        await store.close()


async def test_records_spool_while_the_store_is_away_and_are_stored_once_in_order_when_it_answers(pg_url, tmp_path):  # noqa: F811
    down = PgLogStore(f"postgresql://gateway:gateway@127.0.0.1:{free_port()}/nowhere", timeout_s=1.0)
    writer = PgWriter(down, Spool(tmp_path, 10_000_000), Metrics(), batch_records=50)
    await writer.start()
    now = time.time()
    sent = [record(now + i / 1000) for i in range(300)]
    for i in range(0, 300, 30):
        await writer.submit(sent[i:i + 30])
    # the writer says it is unhealthy as its first spool write begins: wait for the write too
    await until(lambda: not writer.healthy and writer.health()["spooled_records"] > 0, 10)
    assert not writer.healthy and writer.health()["spooled_records"] > 0
    await writer.close(timeout_s=2)
    assert writer.spool.path.exists() and writer.dropped == 0

    store = PgLogStore(pg_url)
    again = PgWriter(store, Spool(tmp_path, 10_000_000), Metrics(), batch_records=50)  # a new worker adopts the file
    await again.start()
    try:
        await until(lambda: not again.spool.records, 15)
        assert again.spool.records == 0 and again.healthy
        rows, _ = await store.query(None, LogFilter(limit=100), every_workspace=True)
        conn = await asyncpg.connect(pg_url)
        try:
            stored = await conn.fetch("SELECT rid FROM gateway.request_logs ORDER BY id")
            requests = await conn.fetchval("SELECT sum(requests) FROM gateway.log_rollups WHERE res = 10")
        finally:
            await conn.close()
        assert [r[0] for r in stored] == [r[0] for r in sent]  # each once, in the order recorded
        assert requests == 300
    finally:
        await again.close()
    assert not await asyncio.to_thread(lambda: list(Path(tmp_path).glob("*.spool")))


async def test_a_full_spool_drops_and_counts_instead_of_failing(tmp_path):
    down = PgLogStore(f"postgresql://gateway:gateway@127.0.0.1:{free_port()}/nowhere", timeout_s=1.0)
    counts = Metrics()
    writer = PgWriter(down, Spool(tmp_path, 4000), counts, memory_records=10, batch_records=10)
    await writer.start()
    try:
        for _ in range(20):
            await writer.submit([record(time.time()) for _ in range(10)])
        assert writer.dropped > 0 and writer.spool.bytes <= 4000
        assert counts._counts[(LOGS_DROPPED, ("spool_full",))] == writer.dropped
        assert writer.health()["dropped"] == writer.dropped
    finally:
        await writer.close(timeout_s=1)


@pytest.mark.parametrize(("url", "reason"), [
    ("mysql://u:secret@h/db", "must start with postgresql://"),
    ("postgresql://u:secret@h:99999/db", "port"),
    ("postgresql://u:secret@h:5432", "database name"),
    ("postgresql://u:secret@/db", "needs a host"),
])
def test_a_malformed_store_url_stops_the_start_naming_the_variable_never_the_password(url, reason):
    with pytest.raises(ValueError) as caught:
        settings_module.load({"GATEWAY_LOG_STORE_URL": url})
    assert str(caught.value).startswith("GATEWAY_LOG_STORE_URL: ") and reason in str(caught.value)
    assert "secret" not in str(caught.value)
    assert "log_store_url" in settings_module.SECRETS


LAZY_PROBE = """
import sys
import gateway.app
from gateway.api import aggregates, health, logs, logstream
from gateway.runtime import Runtime
from gateway.settings import load
runtime = Runtime(load({"GATEWAY_DATA_DIR": sys.argv[1]}))
print("asyncpg" in sys.modules, type(runtime.recorder).__name__)
"""


def test_a_worker_without_the_setting_never_imports_asyncpg(tmp_path):
    done = subprocess.run([sys.executable, "-c", LAZY_PROBE, str(tmp_path)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "ObservabilityRecorder"]


def test_gateway_logs_migrate_applies_the_schema_once_and_names_a_missing_url(pg_url):  # noqa: F811
    def migrate_command(url: str | None) -> subprocess.CompletedProcess:
        env = {"PATH": "/usr/bin:/bin", **({"GATEWAY_LOG_STORE_URL": url} if url else {})}
        return subprocess.run([sys.executable, "-m", "gateway", "logs", "migrate"], capture_output=True, text=True,
                              timeout=60, env=env)

    first, again = migrate_command(pg_url), migrate_command(pg_url)
    assert first.returncode == 0 and f"applied: {', '.join(map(str, range(1, LATEST + 1)))}" in first.stdout
    assert again.returncode == 0 and "already up to date" in again.stdout
    missing = migrate_command(None)
    assert missing.returncode == 2 and "GATEWAY_LOG_STORE_URL is not set" in missing.stderr


async def test_a_catch_up_past_its_limit_delivers_the_newest_batches_and_counts_the_older_as_skipped(
        pg_url, monkeypatch):  # noqa: F811
    """A listener that was down for more batches than a catch-up reads: the newest are delivered, the records of the
    older ones are counted to every stream as skipped (never silently missed), and none is delivered twice."""
    store = PgLogStore(pg_url)
    now = time.time()
    try:
        await store.write([record(now - 10, trace="delivered")])
        tail = tail_module.PgLogTail(store)
        (first,), _ = await store.batches_after(0, 10)
        tail._note(first[0])  # the stream had this batch before its connection went
        for i in range(6):  # two records a batch, while nobody listened
            await store.write([record(now - 9 + i, trace=f"missed-{i}-a"), record(now - 9 + i, trace=f"missed-{i}-b")])
        monkeypatch.setattr(tail_module, "MAX_WAITING", 4)
        flt = LogFilter()
        sub = Subscriber((None, True, flt), row_matcher(flt, None, True))
        tail.subscribers.add(sub)
        await tail._catch_up()
        data = sub.take()
        assert data.startswith(b'event: skipped\ndata: {"skipped":4}\n\n')  # the two oldest missed batches
        logs = [msgspec.json.decode(line[len(b"data: "):]) for line in data.split(b"\n")
                if line.startswith(b'data: {"id"')]
        traces = [item["trace_id"] for item in logs]
        assert traces == [f"missed-{i}-{x}" for i in range(2, 6) for x in "ab"]
        await tail._catch_up()  # again: nothing new, nothing twice
        assert sub.take() == b""
    finally:
        await store.close()
