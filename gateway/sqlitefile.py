"""The package's SQLite files (request logs, rollups, the log tail, the embedded state store): one way to connect,
and one way to put a file in WAL mode and create its schema while other workers may be doing the same."""

from __future__ import annotations

import sqlite3
import time
from typing import Iterable

OPEN_ATTEMPTS = 50
OPEN_RETRY_S = 0.05


def connect(path: str, busy_timeout_ms: int = 5000) -> sqlite3.Connection:
    """An autocommit connection (transactions are explicit) usable from any thread, waiting up to
    ``busy_timeout_ms`` on a locked file."""
    conn = sqlite3.connect(path, timeout=busy_timeout_ms / 1000, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    return conn


def open_wal(path: str, schema: Iterable[str] = (), busy_timeout_ms: int = 5000,
             page_size: int | None = None) -> sqlite3.Connection:
    """A connection with the file in WAL mode and ``schema`` created; retried while another worker holds the file
    (switching to WAL needs it to itself; the last failure is raised). ``page_size`` applies to a file this call
    creates (an existing file keeps its own)."""
    statements = tuple(schema)
    conn = connect(path, busy_timeout_ms)
    for attempt in range(OPEN_ATTEMPTS):
        try:
            if page_size is not None:  # before WAL mode, which writes the header of a new file
                conn.execute(f"PRAGMA page_size = {int(page_size)}")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            for statement in statements:
                conn.execute(statement)
            return conn
        except sqlite3.OperationalError:
            if attempt == OPEN_ATTEMPTS - 1:
                conn.close()
                raise
            time.sleep(OPEN_RETRY_S)
    raise AssertionError("unreachable")
