"""The request-log store: SQLite (WAL) in the data directory, shared by every worker; batched inserts, bounded
retention and the filtered, paged reads behind ``GET /v1/logs``. A batch is written in one transaction, as a few
multi-row INSERT statements (``INSERT_CHUNK``)."""

from __future__ import annotations

import sqlite3
import threading
from typing import Any, Iterator

import msgspec

from gateway import sqlitefile

#: a row's run in the trace index: 4,096 rows each (a query must write the index's expression as it is to use it)
TRACE_RUN_BITS = 12
_TRACE_RUN = f"(id >> {TRACE_RUN_BITS})"
_TRACE_INDEX = f"CREATE INDEX IF NOT EXISTS request_logs_trace ON request_logs ({_TRACE_RUN}, trace_id)"

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS request_logs ("
    " id INTEGER PRIMARY KEY, ts REAL NOT NULL, workspace TEXT, trace_id TEXT, status INTEGER, provider TEXT,"
    " doc BLOB NOT NULL, model TEXT)",  # ``model`` last: where ALTER TABLE puts it in an upgraded file
    "CREATE INDEX IF NOT EXISTS request_logs_workspace ON request_logs (workspace, id)",
    _TRACE_INDEX,  # by run of rows, then trace id: see ``upgrade``
    # the ``model`` filter (a no-op on an older file, whose index of that name ``upgrade`` replaces)
    "CREATE INDEX IF NOT EXISTS request_logs_model ON request_logs (model, id)",
)
#: a row: (ts, workspace, trace_id, status, provider, model, doc)
#: OR ROLLBACK: a row that breaks a constraint ends the batch's transaction at once. With the default (ABORT) SQLite
#: keeps a statement journal for a statement that writes several rows, so that it can undo the statement alone: a
#: temporary file created, written with every page the statement changes, and deleted, for each multi-row INSERT
#: (seen with strace: one per batch). The batch is all or nothing anyway.
_INSERT = ("INSERT OR ROLLBACK INTO request_logs (ts, workspace, trace_id, status, provider, model, doc)"
           " VALUES (?, ?, ?, ?, ?, ?, ?)")
_ROW_VALUES = 7
#: rows per INSERT statement. A batch goes in as a few multi-row statements, not one statement per row: SQLite runs
#: each statement with the GIL released, so a row per statement made the writer thread take the GIL back from the
#: event loop once a row (measured under load, one worker: 3.8 futex calls a request in that thread, 1.5 after), and
#: cost more on its own too (bench/micro/test_logstore_bench.py, a 2-core Intel Xeon VM, alternated runs: 6.0-8.7 ->
#: 5.1-5.7 us a row).
#: 128 rows bind 896 values, under every SQLite build's limit (999 before 3.32). A batch's rows go in chunks of a
#: power of two (100 rows: 64 + 32 + 4), so a connection prepares at most eight statements, whatever the batch sizes.
INSERT_CHUNK = 128


#: chunk size -> its INSERT statement (the sizes ``_chunks`` makes: 1, 2, 4, ... INSERT_CHUNK)
INSERT_SQL = {1 << k: _INSERT + ", (?, ?, ?, ?, ?, ?, ?)" * ((1 << k) - 1) for k in range(INSERT_CHUNK.bit_length())}


def _chunks(rows: list[tuple]) -> Iterator[list[tuple]]:
    """The rows in chunks of ``INSERT_CHUNK`` rows, then of the powers of two below it that the rest holds."""
    start, size = 0, INSERT_CHUNK
    while start < len(rows):
        while size > len(rows) - start:
            size //= 2
        yield rows[start:start + size]
        start += size


def _values(rows: list[tuple]) -> list[Any]:
    """The rows' values in one flat list (a row of another length would shift every later one: refused)."""
    if any(len(row) != _ROW_VALUES for row in rows):
        raise ValueError(f"a request-log row has {_ROW_VALUES} values")
    return [value for row in rows for value in row]


_PRUNE = "DELETE FROM request_logs WHERE id <= (SELECT MAX(id) FROM request_logs) - ?"
#: pages of a new file: a ~600-byte row per insert writes fewer pages to the WAL than with SQLite's 4 KiB default
#: (measured: 5.5 against 6.9 us per row with retention pruning); a file made earlier keeps its 4 KiB pages
PAGE_SIZE = 16384
_BACKFILL = ("UPDATE request_logs SET model = CASE WHEN json_valid(CAST(doc AS TEXT))"
             " THEN json_extract(CAST(doc AS TEXT), '$.model') END WHERE model IS NULL AND id <= ?")


def _index_columns(conn: sqlite3.Connection, name: str) -> list[str | None]:
    """An index's columns by name (None for an expression)."""
    return [row[2] for row in conn.execute(f"PRAGMA index_info({name})")]


def _upgraded(conn: sqlite3.Connection) -> bool:
    return (_index_columns(conn, "request_logs_model") == ["model", "id"]
            and _index_columns(conn, "request_logs_trace") == [None, "trace_id"])


def upgrade(conn: sqlite3.Connection) -> None:
    """Bring a file made by an older release to the current schema, in place:

    - no ``model`` column, the ``model`` filter's index on the JSON expression
      ``json_extract(CAST(doc AS TEXT), '$.model')``: add the column, fill it from the documents of the rows already
      there, index it and drop the expression index;
    - the trace index on ``trace_id`` alone: index it by run of 4,096 rows first. Trace ids that clients send
      (a W3C ``traceparent``'s, say) are random, and each one inserted into an index ordered by the id alone lands
      on a different page: a batch of 128 rows rewrote ~100 of the index's pages, and a row cost about three times
      what one with the gateway's own (ordered) ids did (``bench/micro/test_logstore_bench.py``: 14.0 against 4.4 us
      at 100,000 rows). By run, a batch's ids land in the newest run's few pages (4.9 us); a lookup seeks the trace
      id in each run (``query``: ~0.1 ms over 200,000 rows).

    Every worker calls this on open, several at once: one ``BEGIN IMMEDIATE`` transaction, so a racing worker
    waits for the write lock and then sees all of it or none of it (an already upgraded file costs one read, and no
    lock). The backfill is bounded by retention (100,000 rows by default: under a second).

    During a rolling restart, rows an old worker still writes after the upgrade have a NULL ``model``: the
    ``model`` filter does not find them (every other filter does), and the old worker's own ``model`` filter reads
    every row. An old worker opening the upgraded file leaves it as it is (its schema creates nothing that exists
    by name); its trace lookups then read the workspace's rows instead of the index (slower, not wrong)."""
    if _upgraded(conn):
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        # another worker may have done it (or part of it) while this one waited for the lock
        if _index_columns(conn, "request_logs_model") != ["model", "id"]:
            try:
                conn.execute("ALTER TABLE request_logs ADD COLUMN model TEXT")
            except sqlite3.OperationalError as exc:
                if "duplicate column name" not in str(exc):
                    raise
            newest = conn.execute("SELECT MAX(id) FROM request_logs").fetchone()[0] or 0
            conn.execute(_BACKFILL, (newest,))
            conn.execute("DROP INDEX IF EXISTS request_logs_model")
            conn.execute("CREATE INDEX request_logs_model ON request_logs (model, id)")
        if _index_columns(conn, "request_logs_trace") != [None, "trace_id"]:
            conn.execute("DROP INDEX IF EXISTS request_logs_trace")
            conn.execute(_TRACE_INDEX)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


class LogFilter(msgspec.Struct, frozen=True):
    """The filters of ``GET /v1/logs`` (validated by the handler)."""

    trace_id: str | None = None
    status: int | None = None
    status_class: int | None = None  # 2 for 2xx, ... 5 for 5xx
    provider: str | None = None
    model: str | None = None
    since: float | None = None
    until: float | None = None
    after: int | None = None
    limit: int = 20


class LogStore:
    """Request logs in SQLite (WAL) shared by every worker: batched inserts, bounded retention, paged reads.
    Every method blocks: call them in a thread."""

    def __init__(self, path: str, retention_rows: int = 100_000) -> None:
        self.path = path
        self.retention_rows = max(1, retention_rows)
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._since_prune = 0

    def open(self) -> None:
        """Create the table, or upgrade an older file (several workers may race here: retried while the file is
        locked)."""
        with self._lock:
            if self._conn is None:
                conn = sqlitefile.open_wal(self.path, _SCHEMA, page_size=PAGE_SIZE)
                try:
                    upgrade(conn)
                except BaseException:
                    conn.close()
                    raise
                self._conn = conn

    def insert(self, rows: list[tuple]) -> None:
        self.open()
        with self._lock:
            conn = self._conn
            assert conn is not None
            conn.execute("BEGIN IMMEDIATE")
            try:
                for chunk in _chunks(rows):
                    conn.execute(INSERT_SQL[len(chunk)], _values(chunk))
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:  # a constraint broken has rolled it back already
                    conn.execute("ROLLBACK")
                raise
            self._since_prune += len(rows)
            if self._since_prune >= min(1000, self.retention_rows):
                self._since_prune = 0
                conn.execute(_PRUNE, (self.retention_rows,))

    def query(self, workspace: str | None, flt: LogFilter, every_workspace: bool = False
              ) -> tuple[list[tuple[int, bytes]], bool]:
        """The newest matching rows first, after the cursor; and whether more follow. ``every_workspace`` reads
        all workspaces' rows (``workspace`` is then ignored)."""
        self.open()
        conn = sqlitefile.connect(self.path)  # readers use their own connection: WAL lets them run beside the writer
        try:
            sql, args = self._select(conn, workspace, flt, every_workspace)
            rows = conn.execute(sql, args).fetchall() if sql else []
        finally:
            conn.close()
        return rows[: flt.limit], len(rows) > flt.limit

    @staticmethod
    def _select(conn: sqlite3.Connection, workspace: str | None, flt: LogFilter, every_workspace: bool
                ) -> tuple[str, list[Any]]:
        """The query's SQL and arguments ("" when no row can match)."""
        table = "request_logs"
        args: list[Any] = []
        runs = ""
        if flt.trace_id is not None:
            # the trace index is ordered by run of rows first: seek the trace id in each run the rows span
            oldest, newest = conn.execute("SELECT MIN(id), MAX(id) FROM request_logs").fetchone()
            if oldest is None:
                return "", []
            if flt.after is not None:
                newest = min(newest, flt.after - 1)
            if newest < oldest:
                return "", []
            first, last = oldest >> TRACE_RUN_BITS, newest >> TRACE_RUN_BITS
            runs = f"AND {_TRACE_RUN} IN (" + ",".join(map(str, range(last, first - 1, -1))) + ")"
            table = "request_logs INDEXED BY request_logs_trace"
        sql = [f"SELECT id, doc FROM {table} WHERE 1" if every_workspace
               else f"SELECT id, doc FROM {table} WHERE workspace IS ?"]
        if not every_workspace:
            args.append(workspace)
        if runs:
            sql.append(runs)
        if flt.status_class is not None:
            sql.append("AND status >= ? AND status < ?")
            args += [flt.status_class * 100, flt.status_class * 100 + 100]
        if flt.model is not None:
            sql.append("AND model = ?")
            args.append(flt.model)
        for column, op, value in (
            ("trace_id", "=", flt.trace_id), ("status", "=", flt.status), ("provider", "=", flt.provider),
            ("ts", ">=", flt.since), ("ts", "<=", flt.until), ("id", "<", flt.after),
        ):
            if value is not None:
                sql.append(f"AND {column} {op} ?")
                args.append(value)
        sql.append("ORDER BY id DESC LIMIT ?")
        args.append(flt.limit + 1)
        return " ".join(sql), args

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
