"""The SQLite request-log store's file: a ``logs.db`` written by an older release (the model read from the JSON
document, through an expression index; trace ids indexed alone) is upgraded in place when a worker opens it, by
several workers at once; trace lookups through the index by run of rows."""

from __future__ import annotations

import secrets
import sqlite3
import threading

import msgspec
import pytest

from gateway.observability import logstore
from gateway.observability.logstore import INSERT_CHUNK, LogFilter, LogStore

#: the schema of the releases before the ``model`` column, as they created it
OLD_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS request_logs ("
    " id INTEGER PRIMARY KEY, ts REAL NOT NULL, workspace TEXT, trace_id TEXT, status INTEGER, provider TEXT,"
    " doc BLOB NOT NULL)",
    "CREATE INDEX IF NOT EXISTS request_logs_workspace ON request_logs (workspace, id)",
    "CREATE INDEX IF NOT EXISTS request_logs_trace ON request_logs (trace_id)",
    "CREATE INDEX IF NOT EXISTS request_logs_model ON request_logs (json_extract(CAST(doc AS TEXT), '$.model'), id)",
)
MODELS = ["gpt-4o", "gpt-4o-mini", "claude-3-5-haiku"]


def doc(trace_id: str, model: str | None) -> bytes:
    return msgspec.json.encode({"trace_id": trace_id, "model": model, "status": 200})


def old_file(path: str, rows: int = 6) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    for statement in OLD_SCHEMA:
        conn.execute(statement)
    conn.executemany("INSERT INTO request_logs (ts, workspace, trace_id, status, provider, doc)"
                     " VALUES (?, ?, ?, ?, ?, ?)",
                     [(float(i), "default", f"old-{i}", 200, "vendorA", doc(f"old-{i}", MODELS[i % len(MODELS)]))
                      for i in range(rows)])
    conn.close()


def traces(store: LogStore, **filters) -> list[str]:
    rows, _ = store.query("default", LogFilter(**{"limit": 100, **filters}))
    return [msgspec.json.decode(body)["trace_id"] for _, body in rows]


def schema_of(path: str) -> tuple[list[str], str]:
    """The table's columns and the ``request_logs_model`` index's SQL."""
    conn = sqlite3.connect(path)
    try:
        columns = [row[1] for row in conn.execute("PRAGMA table_info(request_logs)")]
        (index_sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'request_logs_model'").fetchone()
    finally:
        conn.close()
    return columns, index_sql


def test_an_old_file_is_upgraded_and_its_rows_are_found_by_model(tmp_path):
    path = str(tmp_path / "logs.db")
    old_file(path)
    store = LogStore(path)
    assert traces(store, model="gpt-4o-mini") == ["old-4", "old-1"]
    store.insert([(10.0, "default", "new-1", 200, "vendorA", "gpt-4o-mini", doc("new-1", "gpt-4o-mini")),
                  (11.0, "default", "new-2", 200, "vendorA", "gpt-4o", doc("new-2", "gpt-4o"))])
    assert traces(store, model="gpt-4o-mini") == ["new-1", "old-4", "old-1"]
    assert traces(store, model="gpt-4o") == ["new-2", "old-3", "old-0"]
    assert len(traces(store)) == 8 and traces(store, trace_id="old-2") == ["old-2"]  # nothing else lost
    store.close()
    columns, index_sql = schema_of(path)
    assert columns.count("model") == 1
    assert "json_extract" not in index_sql  # the expression index is gone, the column's took its name
    reopened = LogStore(path)  # an upgraded file opens as it is
    assert traces(reopened, model="claude-3-5-haiku") == ["old-5", "old-2"]
    reopened.close()


def test_workers_opening_an_old_file_at_once_all_start_and_upgrade_it_once(tmp_path):
    path = str(tmp_path / "logs.db")
    old_file(path, rows=20_000)  # an upgrade long enough for the others to wait on it
    stores = [LogStore(path) for _ in range(4)]
    start = threading.Barrier(len(stores))
    failures: list[BaseException] = []

    def open_store(store: LogStore) -> None:
        start.wait()
        try:
            store.open()
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            failures.append(exc)

    threads = [threading.Thread(target=open_store, args=(store,)) for store in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert failures == []
    columns, index_sql = schema_of(path)
    assert columns.count("model") == 1 and "json_extract" not in index_sql
    assert len(traces(stores[0], model="gpt-4o", limit=10_000)) == len(range(0, 20_000, 3))
    for store in stores:
        store.close()


def page_size(path: str) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("PRAGMA page_size").fetchone()[0]
    finally:
        conn.close()


def test_a_new_file_has_large_pages_and_an_older_one_keeps_its_own(tmp_path):
    new, old = str(tmp_path / "new.db"), str(tmp_path / "old.db")
    old_file(old)
    for path in (new, old):
        store = LogStore(path, retention_rows=5)
        store.open()
        store.insert([(float(i), "default", f"t-{i}", 200, "vendorA", "gpt-4o", doc(f"t-{i}", "gpt-4o"))
                      for i in range(20)])
        assert traces(store, model="gpt-4o")[:5] == [f"t-{i}" for i in range(19, 14, -1)]
        store.close()
    assert page_size(new) == 16384
    assert page_size(old) == 4096


def index_columns(path: str, name: str) -> list[str | None]:
    conn = sqlite3.connect(path)
    try:
        return [row[2] for row in conn.execute(f"PRAGMA index_info({name})")]
    finally:
        conn.close()


def test_a_file_of_the_previous_release_gets_its_trace_index_by_run_and_keeps_its_rows(tmp_path):
    """The release before indexed trace ids alone (every random id a different page to rewrite)."""
    path = str(tmp_path / "logs.db")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE request_logs (id INTEGER PRIMARY KEY, ts REAL NOT NULL, workspace TEXT, trace_id TEXT,"
                 " status INTEGER, provider TEXT, doc BLOB NOT NULL, model TEXT)")
    conn.execute("CREATE INDEX request_logs_workspace ON request_logs (workspace, id)")
    conn.execute("CREATE INDEX request_logs_trace ON request_logs (trace_id)")
    conn.execute("CREATE INDEX request_logs_model ON request_logs (model, id)")
    conn.executemany("INSERT INTO request_logs (ts, workspace, trace_id, status, provider, model, doc)"
                     " VALUES (?, ?, ?, ?, ?, ?, ?)",
                     [(float(i), "default", f"prev-{i % 50}", 200, "vendorA", None if i % 7 else "gpt-4o",
                       doc(f"prev-{i % 50}", None if i % 7 else "gpt-4o")) for i in range(5000)])
    conn.close()
    store = LogStore(path)
    assert traces(store, trace_id="prev-3") == ["prev-3"] * 100
    assert len(traces(store, model="gpt-4o", limit=10_000)) == len(range(0, 5000, 7))
    store.close()
    assert index_columns(path, "request_logs_trace") == [None, "trace_id"]
    assert index_columns(path, "request_logs_model") == ["model", "id"]


def test_trace_lookups_find_every_run_newest_first_and_page_with_the_cursor(tmp_path):
    """A trace's rows spread over several runs of 4,096 rows, among random ids, in two workspaces."""
    path = str(tmp_path / "logs.db")
    store = LogStore(path)
    wanted = {10, 4095, 4096, 9000, 12_345}
    rows = []
    for i in range(1, 13_000):
        trace = "the-trace" if i in wanted else secrets.token_hex(16)
        rows.append((float(i), "other" if i == 9000 else "default", trace, 200, "vendorA", "gpt-4o",
                     msgspec.json.encode({"trace_id": trace, "n": i})))
    store.insert(rows)

    def found(workspace: str | None = "default", every: bool = False, **filters) -> list[int]:
        got, _ = store.query(workspace, LogFilter(trace_id="the-trace", **{"limit": 100, **filters}), every)
        return [msgspec.json.decode(body)["n"] for _, body in got]

    assert found() == [12_345, 4096, 4095, 10]
    assert found(every=True) == [12_345, 9000, 4096, 4095, 10]
    assert found("other") == [9000]
    page, more = store.query("default", LogFilter(trace_id="the-trace", limit=2))
    assert more and [row_id for row_id, _ in page] == [12_345, 4096]
    assert found(after=4096) == [4095, 10]
    assert found(after=1) == []
    assert found(status=500) == []
    conn = sqlite3.connect(path)
    try:
        sql, args = store._select(conn, "default", LogFilter(trace_id="the-trace"), False)
        plan = " ".join(str(row) for row in conn.execute("EXPLAIN QUERY PLAN " + sql, args))
    finally:
        conn.close()
    assert "request_logs_trace" in plan  # a seek per run, not a read of the workspace's rows
    store.close()


def test_a_trace_lookup_in_an_empty_store_finds_nothing(tmp_path):
    store = LogStore(str(tmp_path / "logs.db"))
    assert store.query("default", LogFilter(trace_id="t")) == ([], False)
    store.close()


def test_a_batch_of_several_statements_lands_whole_in_order_and_a_bad_row_stores_none_of_it(tmp_path):
    """A batch goes in as multi-row statements of ``INSERT_CHUNK`` rows: one longer than two of them keeps every
    row's columns, in order; a row of the wrong shape fails the whole batch (one transaction), not half of it."""
    store = LogStore(str(tmp_path / "logs.db"))
    count = 2 * INSERT_CHUNK + 3
    store.insert([(float(i), "default", f"t-{i}", 200 + i % 3, "vendorA", MODELS[i % len(MODELS)], doc(f"t-{i}", None))
                  for i in range(count)])
    store.insert([(9999.0, "default", "single", 500, "anthropic", "claude-3-5-haiku", doc("single", None))])
    assert traces(store, limit=1) == ["single"]
    assert len(traces(store, limit=count + 10)) == count + 1
    assert traces(store, model="gpt-4o-mini", limit=count) == [f"t-{i}" for i in range(count - 1, -1, -1) if i % 3 == 1]
    assert traces(store, trace_id="t-130") == ["t-130"]
    bad = [(1.0, "default", f"bad-{i}", 200, "vendorA", "gpt-4o", doc(f"bad-{i}", None)) for i in range(10)]
    bad[7] = bad[7][:-1]
    with pytest.raises(ValueError):
        store.insert(bad)
    assert not [t for t in traces(store, limit=count + 10) if t.startswith("bad-")]
    no_doc = [(1.0, "default", f"nodoc-{i}", 200, "vendorA", "gpt-4o", doc("n", None)) for i in range(200)]
    no_doc[150] = (*no_doc[150][:-1], None)  # breaks NOT NULL in the second statement of the batch
    with pytest.raises(sqlite3.IntegrityError):
        store.insert(no_doc)
    assert not [t for t in traces(store, limit=count + 10) if t.startswith("nodoc-")]
    store.insert([(2.0, "default", "after", 200, "vendorA", "gpt-4o", doc("after", None))])  # the store goes on
    assert traces(store, limit=1) == ["after"]
    store.close()


def test_batches_of_every_size_use_at_most_eight_statements_and_lose_no_row(tmp_path):
    """Idle workers write small batches of any size: each size must not become a statement the connection keeps
    prepared (128 of them, tens of KB each); rows go in power-of-two chunks, eight statements at most."""
    store = LogStore(str(tmp_path / "logs.db"))
    total = 0
    for size in range(1, INSERT_CHUNK + 3):
        store.insert([(float(size), "default", f"b{size}-{i}", 200, "vendorA", "gpt-4o", doc("x", None))
                      for i in range(size)])
        assert {len(chunk) for chunk in logstore._chunks(list(range(size)))} <= set(logstore.INSERT_SQL)
        total += size
    assert len(logstore.INSERT_SQL) == 8
    assert [len(chunk) for chunk in logstore._chunks(list(range(100)))] == [64, 32, 4]
    rows, more = store.query("default", LogFilter(limit=total))
    assert len(rows) == total and not more
    store.close()
