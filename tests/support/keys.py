"""Gateway keys for tests: store a key of any workspace and role in a data directory before the gateway starts."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from gateway.controlplane.keys import key_hash


def add_key(data_dir: str, key: str, workspace: str, role: str = "member") -> None:
    path = Path(data_dir) / "gateway.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    try:
        conn.execute("CREATE TABLE IF NOT EXISTS gateway_keys ("
                     " hash TEXT PRIMARY KEY, workspace TEXT NOT NULL, role TEXT NOT NULL, created_at REAL NOT NULL)")
        conn.execute("INSERT OR REPLACE INTO gateway_keys VALUES (?, ?, ?, ?)", (key_hash(key), workspace, role,
                                                                                   time.time()))
        conn.commit()
    finally:
        conn.close()
