"""The observability SQLite files (request logs, rollups): one way to connect, and to create a schema in WAL mode
while other workers may be doing the same."""

from __future__ import annotations

import sqlite3
import time
from typing import Iterable

OPEN_ATTEMPTS = 50
OPEN_RETRY_S = 0.05


def connect(path: str) -> sqlite3.Connection:
    """An autocommit connection usable from any thread, waiting up to 5 s on a locked file."""
    conn = sqlite3.connect(path, timeout=5.0, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout = 5000")
    return conn


def open_wal(path: str, schema: Iterable[str]) -> sqlite3.Connection:
    """A connection with the file in WAL mode and ``schema`` created; retried while another worker holds the file
    (the last failure is raised)."""
    statements = tuple(schema)
    conn = connect(path)
    for attempt in range(OPEN_ATTEMPTS):
        try:
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
