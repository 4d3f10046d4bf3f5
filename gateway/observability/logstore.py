"""The request-log store: SQLite (WAL) in the data directory, shared by every worker; batched inserts, bounded
retention and the filtered, paged reads behind ``GET /v1/logs``."""

from __future__ import annotations

import sqlite3
import threading
from typing import Any

import msgspec

from gateway import sqlitefile

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS request_logs ("
    " id INTEGER PRIMARY KEY, ts REAL NOT NULL, workspace TEXT, trace_id TEXT, status INTEGER, provider TEXT,"
    " doc BLOB NOT NULL, model TEXT)",  # ``model`` last: where ALTER TABLE puts it in an upgraded file
    "CREATE INDEX IF NOT EXISTS request_logs_workspace ON request_logs (workspace, id)",
    "CREATE INDEX IF NOT EXISTS request_logs_trace ON request_logs (trace_id)",
    # the ``model`` filter (a no-op on an older file, whose index of that name ``upgrade`` replaces)
    "CREATE INDEX IF NOT EXISTS request_logs_model ON request_logs (model, id)",
)
#: a row: (ts, workspace, trace_id, status, provider, model, doc)
_INSERT = ("INSERT INTO request_logs (ts, workspace, trace_id, status, provider, model, doc)"
           " VALUES (?, ?, ?, ?, ?, ?, ?)")
_PRUNE = "DELETE FROM request_logs WHERE id <= (SELECT MAX(id) FROM request_logs) - ?"
#: pages of a new file: a ~600-byte row per insert writes fewer pages to the WAL than with SQLite's 4 KiB default
#: (measured: 5.5 against 6.9 us per row with retention pruning); a file made earlier keeps its 4 KiB pages
PAGE_SIZE = 16384
_BACKFILL = ("UPDATE request_logs SET model = CASE WHEN json_valid(CAST(doc AS TEXT))"
             " THEN json_extract(CAST(doc AS TEXT), '$.model') END WHERE model IS NULL AND id <= ?")


def _upgraded(conn: sqlite3.Connection) -> bool:
    return [row[2] for row in conn.execute("PRAGMA index_info(request_logs_model)")] == ["model", "id"]


def upgrade(conn: sqlite3.Connection) -> None:
    """Bring a file made by an older release (no ``model`` column; the ``model`` filter's index on the JSON
    expression ``json_extract(CAST(doc AS TEXT), '$.model')``) to the current schema, in place: add the column,
    fill it from the documents of the rows already there, index it and drop the expression index.

    Every worker calls this on open, several at once: one ``BEGIN IMMEDIATE`` transaction, so a racing worker
    waits for the write lock and then sees all of it or none of it (an already upgraded file costs one read, and no
    lock). The backfill is bounded by retention (100,000 rows by default: under a second).

    During a rolling restart, rows an old worker still writes after the upgrade have a NULL ``model``: the
    ``model`` filter does not find them (every other filter does), and the old worker's own ``model`` filter reads
    every row. An old worker opening the upgraded file leaves it as it is (its schema creates nothing that exists
    by name)."""
    if _upgraded(conn):
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        if not _upgraded(conn):  # another worker may have done it while this one waited for the lock
            try:
                conn.execute("ALTER TABLE request_logs ADD COLUMN model TEXT")
            except sqlite3.OperationalError as exc:
                if "duplicate column name" not in str(exc):
                    raise
            newest = conn.execute("SELECT MAX(id) FROM request_logs").fetchone()[0] or 0
            conn.execute(_BACKFILL, (newest,))
            conn.execute("DROP INDEX IF EXISTS request_logs_model")
            conn.execute("CREATE INDEX request_logs_model ON request_logs (model, id)")
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
                conn.executemany(_INSERT, rows)
                conn.execute("COMMIT")
            except BaseException:
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
        sql = ["SELECT id, doc FROM request_logs WHERE 1" if every_workspace
               else "SELECT id, doc FROM request_logs WHERE workspace IS ?"]
        args: list[Any] = [] if every_workspace else [workspace]
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
        self.open()
        conn = sqlitefile.connect(self.path)  # readers use their own connection: WAL lets them run beside the writer
        try:
            rows = conn.execute(" ".join(sql), args).fetchall()
        finally:
            conn.close()
        return rows[: flt.limit], len(rows) > flt.limit

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
