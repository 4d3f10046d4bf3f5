"""The embedded store's SQL: schema and one synchronous function per operation, over a sqlite3 connection.

Exactness across the worker processes of one machine comes from SQLite's file locking: every operation that
reads and then writes runs in one ``BEGIN IMMEDIATE`` transaction (the write lock is taken up front, so two
processes can never both read the old value), in WAL mode (readers never block the writer). Times are epoch
milliseconds passed in by the caller. These functions block; ``sqlite.SQLiteStateStore`` runs them on its own
thread, never on the event loop.
"""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from typing import Iterator, Sequence

import msgspec

from gateway import sqlitefile
from gateway.state.base import (
    ADMITTED,
    RECORD_CHANGE_LOG,
    SETTLED_KEEP_MS,
    Admission,
    BudgetItem,
    Record,
    RecordVersions,
    admitted,
    logged_changes,
    reserved_amount,
)

SCHEMA = """
CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value BLOB NOT NULL, expires INTEGER) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS kv_expiry ON kv (expires) WHERE expires IS NOT NULL;
CREATE TABLE IF NOT EXISTS counters (scope TEXT, key TEXT, used INTEGER NOT NULL, expires INTEGER NOT NULL,
    PRIMARY KEY (scope, key)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS counters_expiry ON counters (expires);
CREATE TABLE IF NOT EXISTS reservations (scope TEXT, id TEXT, expires INTEGER NOT NULL, amounts BLOB NOT NULL,
    PRIMARY KEY (scope, id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS reservations_expiry ON reservations (expires);
CREATE TABLE IF NOT EXISTS settled (scope TEXT, id TEXT, expires INTEGER NOT NULL, PRIMARY KEY (scope, id))
    WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS settled_expiry ON settled (expires);
CREATE TABLE IF NOT EXISTS leases (key TEXT PRIMARY KEY, holder TEXT NOT NULL, expires INTEGER NOT NULL)
    WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS breakers (key TEXT PRIMARY KEY, open_until INTEGER NOT NULL, fails BLOB NOT NULL,
    expires INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS records (kind TEXT, id TEXT, workspace TEXT NOT NULL, doc BLOB NOT NULL,
    PRIMARY KEY (kind, id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS records_workspace ON records (kind, workspace, id);
CREATE TABLE IF NOT EXISTS logs (name TEXT, seq INTEGER, item BLOB NOT NULL, PRIMARY KEY (name, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS record_changes (kind TEXT, number INTEGER, id TEXT NOT NULL, PRIMARY KEY (kind, number))
    WITHOUT ROWID;
"""

#: expired reservations released per budget call (the rest by the next calls and the background purge)
SWEEP_BATCH = 200

_encode_amounts = msgspec.json.Encoder().encode
_decode_amounts = msgspec.json.Decoder(list[tuple[str, int]]).decode
_encode_fails = msgspec.json.Encoder().encode
_decode_fails = msgspec.json.Decoder(list[int]).decode


def connect(path: str, busy_timeout_ms: int) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), WAL, bounded lock waits."""
    return sqlitefile.open_wal(path, (), busy_timeout_ms)


def create_schema(conn: sqlite3.Connection, schema: str = SCHEMA) -> None:
    with write(conn):
        for statement in schema.split(";"):
            if statement.strip():
                conn.execute(statement)


@contextmanager
def write(conn: sqlite3.Connection) -> Iterator[None]:
    """One write transaction holding the database's write lock from its first statement."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


# -- key-value -------------------------------------------------------------------------------------------------

def kv_get(conn: sqlite3.Connection, key: str, now: int) -> bytes | None:
    row = conn.execute("SELECT value FROM kv WHERE key = ? AND (expires IS NULL OR expires > ?)",
                       (key, now)).fetchone()
    if row is None:
        return None
    value = row[0]
    return str(value).encode() if isinstance(value, int) else value


def kv_set(conn: sqlite3.Connection, key: str, value: bytes, expires: int | None) -> None:
    conn.execute("INSERT OR REPLACE INTO kv (key, value, expires) VALUES (?, ?, ?)", (key, value, expires))


def kv_delete(conn: sqlite3.Connection, key: str) -> None:
    conn.execute("DELETE FROM kv WHERE key = ?", (key,))


def kv_set_if_absent(conn: sqlite3.Connection, key: str, value: bytes, expires: int | None, now: int) -> bool:
    with write(conn):
        cur = conn.execute(
            "INSERT INTO kv (key, value, expires) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE SET "
            "value = excluded.value, expires = excluded.expires WHERE kv.expires IS NOT NULL AND kv.expires <= ?",
            (key, value, expires, now))
        return cur.rowcount == 1


def kv_incr(conn: sqlite3.Connection, key: str, amount: int, expires: int | None, now: int) -> int:
    with write(conn):
        row = conn.execute("SELECT value FROM kv WHERE key = ? AND (expires IS NULL OR expires > ?)",
                           (key, now)).fetchone()
        if row is None:
            conn.execute("INSERT OR REPLACE INTO kv (key, value, expires) VALUES (?, ?, ?)", (key, amount, expires))
            return amount
        value = int(row[0]) + amount
        conn.execute("UPDATE kv SET value = ? WHERE key = ?", (value, key))
        return value


# -- leases ----------------------------------------------------------------------------------------------------

def lease(conn: sqlite3.Connection, key: str, holder: str, ttl_ms: int, now: int) -> bool:
    with write(conn):
        cur = conn.execute(
            "INSERT INTO leases (key, holder, expires) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE SET "
            "holder = excluded.holder, expires = excluded.expires WHERE leases.holder = excluded.holder "
            "OR leases.expires <= ?", (key, holder, now + ttl_ms, now))
        return cur.rowcount == 1


def release(conn: sqlite3.Connection, key: str, holder: str, now: int) -> bool:
    cur = conn.execute("DELETE FROM leases WHERE key = ? AND holder = ? AND expires > ?", (key, holder, now))
    return cur.rowcount == 1


# -- budgets ---------------------------------------------------------------------------------------------------

def _add(conn: sqlite3.Connection, scope: str, key: str, delta: int, now: int) -> None:
    conn.execute("UPDATE counters SET used = max(0, used + ?) WHERE scope = ? AND key = ? AND expires > ?",
                 (delta, scope, key, now))


def _sweep(conn: sqlite3.Connection, now: int) -> None:
    """Release expired reservations (inside the caller's write transaction)."""
    rows = conn.execute("SELECT scope, id, amounts FROM reservations WHERE expires <= ? LIMIT ?",
                        (now, SWEEP_BATCH)).fetchall()
    for scope, rid, amounts in rows:
        for key, amount in _decode_amounts(amounts):
            _add(conn, scope, key, -amount, now)
        conn.execute("DELETE FROM reservations WHERE scope = ? AND id = ?", (scope, rid))


def _has_expired_reservations(conn: sqlite3.Connection, now: int) -> bool:
    return conn.execute("SELECT 1 FROM reservations WHERE expires <= ? LIMIT 1", (now,)).fetchone() is not None


def _known(conn: sqlite3.Connection, scope: str, rid: str, now: int) -> bool:
    return (conn.execute("SELECT 1 FROM reservations WHERE scope = ? AND id = ?", (scope, rid)).fetchone()
            is not None or conn.execute("SELECT 1 FROM settled WHERE scope = ? AND id = ? AND expires > ?",
                                        (scope, rid, now)).fetchone() is not None)


def reserve(conn: sqlite3.Connection, scope: str, items: Sequence[BudgetItem], rid: str | None,
            ttl_ms: int | None, now: int) -> Admission:
    with write(conn):
        _sweep(conn, now)
        if rid is not None and _known(conn, scope, rid, now):
            return ADMITTED
        amounts: list[int] = []
        for index, item in enumerate(items):
            row = conn.execute("SELECT used FROM counters WHERE scope = ? AND key = ? AND expires > ?",
                               (scope, item.key, now)).fetchone()
            used = row[0] if row is not None else 0
            amount = reserved_amount(item, used)
            if amount < 0:
                return Admission(False, index, item.key, used, item.limit)
            amounts.append(amount)
        for item, amount in zip(items, amounts):
            conn.execute(
                "INSERT INTO counters (scope, key, used, expires) VALUES (?, ?, ?, ?) ON CONFLICT (scope, key) "
                "DO UPDATE SET used = CASE WHEN counters.expires > ? THEN counters.used + excluded.used "
                "ELSE excluded.used END, expires = CASE WHEN counters.expires > ? THEN counters.expires "
                "ELSE excluded.expires END",
                (scope, item.key, amount, now + item.key_ttl_ms, now, now))
        if rid is not None:
            assert ttl_ms is not None  # check_reserve: a reservation id comes with its ttl
            conn.execute("INSERT INTO reservations (scope, id, expires, amounts) VALUES (?, ?, ?, ?)",
                         (scope, rid, now + ttl_ms,
                          _encode_amounts([(item.key, a) for item, a in zip(items, amounts)])))
        return admitted(items, amounts)


def settle(conn: sqlite3.Connection, scope: str, rid: str, items: Sequence[BudgetItem], actual: Sequence[int],
           now: int) -> str:
    with write(conn):
        _sweep(conn, now)
        if conn.execute("SELECT 1 FROM settled WHERE scope = ? AND id = ? AND expires > ?",
                        (scope, rid, now)).fetchone() is not None:
            return "duplicate"
        conn.execute("INSERT OR REPLACE INTO settled (scope, id, expires) VALUES (?, ?, ?)",
                     (scope, rid, now + SETTLED_KEEP_MS))
        row = conn.execute("SELECT amounts FROM reservations WHERE scope = ? AND id = ?", (scope, rid)).fetchone()
        if row is None:
            for item, amount in zip(items, actual):
                _add(conn, scope, item.key, amount, now)
            return "late"
        conn.execute("DELETE FROM reservations WHERE scope = ? AND id = ?", (scope, rid))
        for (key, amount), real in zip(_decode_amounts(row[0]), actual):
            _add(conn, scope, key, real - amount, now)
        return "settled"


def usage(conn: sqlite3.Connection, scope: str, keys: Sequence[str], now: int) -> list[int]:
    if _has_expired_reservations(conn, now):
        with write(conn):
            _sweep(conn, now)
    out = []
    for key in keys:
        row = conn.execute("SELECT used FROM counters WHERE scope = ? AND key = ? AND expires > ?",
                           (scope, key, now)).fetchone()
        out.append(row[0] if row is not None else 0)
    return out


# -- breakers --------------------------------------------------------------------------------------------------

def breaker_open_until(conn: sqlite3.Connection, key: str) -> int:
    row = conn.execute("SELECT open_until FROM breakers WHERE key = ?", (key,)).fetchone()
    return row[0] if row is not None else 0


def breaker_failure(conn: sqlite3.Connection, key: str, threshold: int, window_ms: int, cooldown_ms: int,
                    now: int) -> bool:
    expires = now + 2 * cooldown_ms + window_ms
    with write(conn):
        row = conn.execute("SELECT open_until, fails FROM breakers WHERE key = ? AND expires > ?",
                           (key, now)).fetchone()
        open_until, fails = (row[0], _decode_fails(row[1])) if row is not None else (0, [])
        if open_until > now:
            conn.execute("UPDATE breakers SET expires = ? WHERE key = ?", (expires, key))
            return False
        fails = [t for t in fails if t > now - window_ms][-(threshold - 1):] if threshold > 1 else []
        fails.append(now)
        opened = bool(open_until) or len(fails) >= threshold
        if opened:
            open_until, fails = now + cooldown_ms, []
        conn.execute("INSERT OR REPLACE INTO breakers (key, open_until, fails, expires) VALUES (?, ?, ?, ?)",
                     (key, open_until, _encode_fails(fails), expires))
        return opened


def breaker_success(conn: sqlite3.Connection, key: str, now: int) -> None:
    conn.execute("DELETE FROM breakers WHERE key = ? AND ((open_until > 0 AND open_until <= ?) OR expires <= ?)",
                 (key, now, now))


# -- records ---------------------------------------------------------------------------------------------------

#: the meta rows of the record counters: every change, the changes counted per kind too, and each kind's own
_TOTAL, _KINDED, _KIND = "records_version", "records_version_kinded", "records_version:"


def _bump_version(conn: sqlite3.Connection, kind: str, id: str) -> int:
    """Count a change of the record ``kind``/``id`` and log it under the kind's new count (in the caller's write
    transaction), keeping the kind's last ``RECORD_CHANGE_LOG`` changes."""
    for name in (_TOTAL, _KINDED, _KIND + kind):
        conn.execute("INSERT INTO meta (name, value) VALUES (?, 1) ON CONFLICT (name) DO UPDATE SET value = value + 1",
                     (name,))
    count = conn.execute("SELECT value FROM meta WHERE name = ?", (_KIND + kind,)).fetchone()[0]
    conn.execute("INSERT OR REPLACE INTO record_changes (kind, number, id) VALUES (?, ?, ?)", (kind, count, id))
    conn.execute("DELETE FROM record_changes WHERE kind = ? AND number <= ?", (kind, count - RECORD_CHANGE_LOG))
    return conn.execute("SELECT value FROM meta WHERE name = ?", (_TOTAL,)).fetchone()[0]


def record_put(conn: sqlite3.Connection, kind: str, id: str, workspace: str, doc: bytes) -> int:
    with write(conn):
        conn.execute("INSERT OR REPLACE INTO records (kind, id, workspace, doc) VALUES (?, ?, ?, ?)",
                     (kind, id, workspace, doc))
        return _bump_version(conn, kind, id)


def record_create(conn: sqlite3.Connection, kind: str, id: str, workspace: str, doc: bytes) -> bool:
    """``StateStore.record_create``: an INSERT that does nothing on a taken key, in the write transaction."""
    with write(conn):
        if conn.execute("INSERT INTO records (kind, id, workspace, doc) VALUES (?, ?, ?, ?) "
                        "ON CONFLICT (kind, id) DO NOTHING", (kind, id, workspace, doc)).rowcount == 0:
            row = conn.execute("SELECT doc FROM records WHERE kind = ? AND id = ?", (kind, id)).fetchone()
            return row is not None and bytes(row[0]) == doc
        _bump_version(conn, kind, id)
        return True


def record_put_if(conn: sqlite3.Connection, kind: str, id: str, workspace: str, doc: bytes, expected: bytes) -> bool:
    """``StateStore.record_put_if``: one UPDATE whose WHERE holds the check, in the write transaction."""
    with write(conn):
        if conn.execute("UPDATE records SET workspace = ?, doc = ? WHERE kind = ? AND id = ? AND doc IN (?, ?)",
                        (workspace, doc, kind, id, expected, doc)).rowcount == 0:
            return False
        _bump_version(conn, kind, id)
        return True


def record_get(conn: sqlite3.Connection, kind: str, id: str) -> Record | None:
    row = conn.execute("SELECT workspace, doc FROM records WHERE kind = ? AND id = ?", (kind, id)).fetchone()
    return Record(kind, id, row[0], bytes(row[1])) if row is not None else None


def record_delete(conn: sqlite3.Connection, kind: str, id: str) -> bool:
    with write(conn):
        if conn.execute("DELETE FROM records WHERE kind = ? AND id = ?", (kind, id)).rowcount == 0:
            return False
        _bump_version(conn, kind, id)
        return True


def record_delete_if(conn: sqlite3.Connection, kind: str, id: str, expected: bytes) -> bool:
    with write(conn):
        deleted = conn.execute("DELETE FROM records WHERE kind = ? AND id = ? AND doc = ?", (kind, id, expected))
        if deleted.rowcount == 0:
            return False
        _bump_version(conn, kind, id)
        return True


def record_list(conn: sqlite3.Connection, kind: str, workspace: str | None) -> list[Record]:
    if workspace is None:
        rows = conn.execute("SELECT id, workspace, doc FROM records WHERE kind = ? ORDER BY id", (kind,))
    else:
        rows = conn.execute("SELECT id, workspace, doc FROM records WHERE kind = ? AND workspace = ? ORDER BY id",
                            (kind, workspace))
    return [Record(kind, id, ws, bytes(doc)) for id, ws, doc in rows.fetchall()]


def records_version(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT value FROM meta WHERE name = ?", (_TOTAL,)).fetchone()
    return row[0] if row is not None else 0


def record_versions(conn: sqlite3.Connection, kinds: Sequence[str], since: Sequence[int]) -> RecordVersions:
    """The counters and, for the kinds that moved past their ``since``, their logged changes: one read transaction,
    so both come from the same moment."""
    names = [_TOTAL, _KINDED, *(_KIND + k for k in kinds)]
    conn.execute("BEGIN")
    try:
        rows = conn.execute(f"SELECT name, value FROM meta WHERE name IN ({', '.join('?' * len(names))})", names)
        found = dict(rows.fetchall())
        counts = tuple(found.get(_KIND + k, 0) for k in kinds)
        changed = tuple(
            logged_changes(count, after, conn.execute(
                "SELECT number, id FROM record_changes WHERE kind = ? AND number > ?", (kind, after)).fetchall()
                if 0 <= after < count else ())
            for kind, count, after in zip(kinds, counts, since))
    finally:
        conn.execute("COMMIT")
    total = found.get(_TOTAL, 0)
    return RecordVersions(counts, total, total - found.get(_KINDED, 0), changed)


# -- logs ------------------------------------------------------------------------------------------------------

def log_append(conn: sqlite3.Connection, name: str, item: bytes, max_len: int) -> int:
    meta = "log:" + name
    with write(conn):
        conn.execute("INSERT INTO meta (name, value) VALUES (?, 1) ON CONFLICT (name) DO UPDATE SET value = value + 1",
                     (meta,))
        seq = conn.execute("SELECT value FROM meta WHERE name = ?", (meta,)).fetchone()[0]
        conn.execute("INSERT INTO logs (name, seq, item) VALUES (?, ?, ?)", (name, seq, item))
        conn.execute("DELETE FROM logs WHERE name = ? AND seq <= ?", (name, seq - max(max_len, 1)))
        return seq


def log_read(conn: sqlite3.Connection, name: str, after_seq: int, limit: int) -> list[tuple[int, bytes]]:
    rows = conn.execute("SELECT seq, item FROM logs WHERE name = ? AND seq > ? ORDER BY seq LIMIT ?",
                        (name, after_seq, max(limit, 0))).fetchall()
    return [(seq, bytes(item)) for seq, item in rows]


# -- housekeeping ----------------------------------------------------------------------------------------------

def purge(conn: sqlite3.Connection, now: int) -> None:
    """Delete expired rows and release expired reservations (the background task, every few seconds)."""
    with write(conn):
        _sweep(conn, now)
        conn.execute("DELETE FROM kv WHERE expires IS NOT NULL AND expires <= ?", (now,))
        conn.execute("DELETE FROM counters WHERE expires <= ?", (now,))
        conn.execute("DELETE FROM settled WHERE expires <= ?", (now,))
        conn.execute("DELETE FROM leases WHERE expires <= ?", (now,))
