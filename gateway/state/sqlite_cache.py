"""The embedded store's response-cache space: one SQLite file shared by the workers of a machine, bounded by
entries and bytes, least-recently-used eviction.

Recency is a millisecond stamp per entry, refreshed by a hit when older than ``touch_ms`` (so most hits are
pure reads, and eviction order is exact to that granularity). Totals (entries, bytes) live in a one-row table
kept in the same transactions as the entries, so the bound holds across processes without counting rows.
Blocking functions: ``sqlite.SQLiteStateStore`` runs them on its cache thread.
"""

from __future__ import annotations

import sqlite3

from gateway.state.sqlite_ops import write

SCHEMA = """
CREATE TABLE IF NOT EXISTS cache (key TEXT PRIMARY KEY, value BLOB NOT NULL, expires INTEGER NOT NULL,
    used INTEGER NOT NULL, size INTEGER NOT NULL) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS cache_used ON cache (used);
CREATE INDEX IF NOT EXISTS cache_expiry ON cache (expires);
CREATE TABLE IF NOT EXISTS cache_totals (id INTEGER PRIMARY KEY CHECK (id = 0), entries INTEGER NOT NULL,
    bytes INTEGER NOT NULL);
INSERT OR IGNORE INTO cache_totals (id, entries, bytes) VALUES (0, 0, 0);
"""

EVICT_BATCH = 64


class CacheSpace:
    """Bounded LRU over one SQLite connection (used from one thread)."""

    def __init__(self, conn: sqlite3.Connection, max_entries: int, max_bytes: int, touch_ms: int = 1000) -> None:
        self.conn = conn
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.touch_ms = touch_ms

    def get(self, key: str, now: int) -> bytes | None:
        row = self.conn.execute("SELECT value, expires, used FROM cache WHERE key = ?", (key,)).fetchone()
        if row is None or row[1] <= now:
            return None
        if row[2] < now - self.touch_ms:
            self.conn.execute("UPDATE cache SET used = ? WHERE key = ?", (now, key))
        return bytes(row[0])

    def set(self, key: str, value: bytes, ttl_ms: int, now: int) -> None:
        conn = self.conn
        size = len(value)
        with write(conn):
            self._remove(key)
            if size > self.max_bytes or ttl_ms <= 0:
                return
            conn.execute("INSERT INTO cache (key, value, expires, used, size) VALUES (?, ?, ?, ?, ?)",
                         (key, value, now + ttl_ms, now, size))
            conn.execute("UPDATE cache_totals SET entries = entries + 1, bytes = bytes + ? WHERE id = 0", (size,))
            entries, total = conn.execute("SELECT entries, bytes FROM cache_totals WHERE id = 0").fetchone()
            if entries > self.max_entries or total > self.max_bytes:
                self._drop_expired(now)
                self._evict()

    def _remove(self, key: str) -> None:
        row = self.conn.execute("DELETE FROM cache WHERE key = ? RETURNING size", (key,)).fetchone()
        if row is not None:
            self.conn.execute("UPDATE cache_totals SET entries = entries - 1, bytes = bytes - ? WHERE id = 0",
                              (row[0],))

    def _drop_expired(self, now: int) -> None:
        rows = self.conn.execute("DELETE FROM cache WHERE expires <= ? RETURNING size", (now,)).fetchall()
        if rows:
            self.conn.execute("UPDATE cache_totals SET entries = entries - ?, bytes = bytes - ? WHERE id = 0",
                              (len(rows), sum(r[0] for r in rows)))

    def _evict(self) -> None:
        conn = self.conn
        entries, total = conn.execute("SELECT entries, bytes FROM cache_totals WHERE id = 0").fetchone()
        while entries > self.max_entries or total > self.max_bytes:
            victims = conn.execute("SELECT key, size FROM cache ORDER BY used LIMIT ?", (EVICT_BATCH,)).fetchall()
            if not victims:
                break
            for key, size in victims:
                if entries <= self.max_entries and total <= self.max_bytes:
                    break
                conn.execute("DELETE FROM cache WHERE key = ?", (key,))
                entries -= 1
                total -= size
        conn.execute("UPDATE cache_totals SET entries = ?, bytes = ? WHERE id = 0", (entries, total))

    def purge(self, now: int) -> None:
        with write(self.conn):
            self._drop_expired(now)
