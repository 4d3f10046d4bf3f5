"""Per-slot rollups of the request logs, written beside them so a window's aggregates never read the raw rows.

Every batch the recorder stores is also summed into two tables of the same SQLite file, at three resolutions (10 s,
1 min and 15 min slots: what the 15-minute, hour and day windows read):
- ``log_rollups``: one row per (resolution, slot, workspace, provider, model, status) with the request count and
  the sums of latency, gateway-added latency, tokens and cost. Written with plain upserts; read with SQL sums.
- ``log_latency``: one row per (resolution, slot, workspace, provider, model) with two log-scale histograms (total
  and gateway-added latency) from which each provider and model's p50/p99 are read, and ``log_slot_latency``: the
  same per (resolution, slot, workspace), for the percentiles of each slot. A histogram is stored as its first
  non-empty bucket and the counts from there to its last (msgpack), read-merged-written on each batch.

Counts are summed by SQLite (per slot, and per provider, model and status); only histograms are merged in Python.
A window therefore reads (slots x groups) rows through the primary keys, however many requests it holds: a day's
query is the same work at 1 million requests as at 1,000 (``bench/aggregates.py`` measures it). Histogram buckets
are ``2**(1/8)`` apart from 0.01 ms up, so a bucket's middle is within 4.5% of every value in it. Slots older than
their window are pruned as new batches arrive. Every method blocks: call them in a thread.
"""

from __future__ import annotations

import math
import sqlite3
import threading
import time
from bisect import bisect_left
from itertools import accumulate
from operator import add
from typing import Any, Iterable

import msgspec

from gateway import sqlitefile

#: window name -> (seconds, slot seconds)
WINDOWS: dict[str, tuple[int, int]] = {"15m": (900, 10), "1h": (3600, 60), "1d": (86400, 900)}
RESOLUTIONS: tuple[int, ...] = tuple(sorted({slot for _, slot in WINDOWS.values()}))
_KEEP_S = {slot: max(w for w, s in WINDOWS.values() if s == slot) + 2 * slot for slot in RESOLUTIONS}

BUCKETS_PER_OCTAVE = 8
BUCKET_FLOOR_MS = 0.01
MAX_BUCKET = BUCKETS_PER_OCTAVE * 40  # 0.01 ms * 2**40: far beyond any timeout

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS log_rollups ("
    " res INTEGER NOT NULL, slot INTEGER NOT NULL, workspace TEXT NOT NULL, provider TEXT NOT NULL,"
    " model TEXT NOT NULL, status INTEGER NOT NULL, requests INTEGER NOT NULL, latency_sum REAL NOT NULL,"
    " added_n INTEGER NOT NULL, added_sum REAL NOT NULL, tokens_in INTEGER NOT NULL, tokens_out INTEGER NOT NULL,"
    " cost REAL NOT NULL, PRIMARY KEY (res, slot, workspace, provider, model, status)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS log_latency ("
    " res INTEGER NOT NULL, slot INTEGER NOT NULL, workspace TEXT NOT NULL, provider TEXT NOT NULL,"
    " model TEXT NOT NULL, latency_hist BLOB NOT NULL, added_hist BLOB NOT NULL,"
    " PRIMARY KEY (res, slot, workspace, provider, model)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS log_slot_latency ("
    " res INTEGER NOT NULL, slot INTEGER NOT NULL, workspace TEXT NOT NULL, latency_hist BLOB NOT NULL,"
    " added_hist BLOB NOT NULL, PRIMARY KEY (res, slot, workspace)) WITHOUT ROWID",
)
_UPSERT_COUNTS = (
    "INSERT INTO log_rollups VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"
    " ON CONFLICT (res, slot, workspace, provider, model, status) DO UPDATE SET"
    " requests = requests + excluded.requests, latency_sum = latency_sum + excluded.latency_sum,"
    " added_n = added_n + excluded.added_n, added_sum = added_sum + excluded.added_sum,"
    " tokens_in = tokens_in + excluded.tokens_in, tokens_out = tokens_out + excluded.tokens_out,"
    " cost = cost + excluded.cost"
)
#: (select one row's histograms, upsert them) per histogram table, in the order ``summarise`` returns them
_HIST_SQL = (
    ("SELECT latency_hist, added_hist FROM log_latency"
     " WHERE res = ? AND slot = ? AND workspace = ? AND provider = ? AND model = ?",
     "INSERT INTO log_latency VALUES (?,?,?,?,?,?,?) ON CONFLICT (res, slot, workspace, provider, model)"
     " DO UPDATE SET latency_hist = excluded.latency_hist, added_hist = excluded.added_hist"),
    ("SELECT latency_hist, added_hist FROM log_slot_latency WHERE res = ? AND slot = ? AND workspace = ?",
     "INSERT INTO log_slot_latency VALUES (?,?,?,?,?) ON CONFLICT (res, slot, workspace)"
     " DO UPDATE SET latency_hist = excluded.latency_hist, added_hist = excluded.added_hist"),
)
_TABLES = ("log_rollups", "log_latency", "log_slot_latency")
_PRUNE_EVERY_S = 60.0
_SLOT_COUNTS = (
    "SELECT slot, SUM(requests), SUM(CASE WHEN status >= 500 THEN requests ELSE 0 END),"
    " SUM(CASE WHEN status >= 400 AND status < 500 THEN requests ELSE 0 END), SUM(tokens_in + tokens_out),"
    " SUM(cost) FROM log_rollups WHERE res = ? AND slot >= ?{where} GROUP BY slot"
)
_GROUP_COUNTS = (
    "SELECT provider, model, status, SUM(requests), SUM(latency_sum), SUM(added_n), SUM(added_sum),"
    " SUM(tokens_in), SUM(tokens_out), SUM(cost) FROM log_rollups WHERE res = ? AND slot >= ?{where}"
    " GROUP BY provider, model, status"
)
_SLOT_LATENCY = "SELECT slot, latency_hist, added_hist FROM log_slot_latency WHERE res = ? AND slot >= ?{where}"
#: the per-slot histograms of one provider and/or model, from the per-group rows
_SLOT_LATENCY_OF_GROUP = "SELECT slot, latency_hist, added_hist FROM log_latency WHERE res = ? AND slot >= ?{where}"
_GROUP_LATENCY = ("SELECT provider, model, latency_hist, added_hist FROM log_latency"
                  " WHERE res = ? AND slot >= ?{where}")

_encode = msgspec.msgpack.encode
_decode_hist = msgspec.msgpack.Decoder(tuple[int, list[int]]).decode
_LOG_BASE = math.log(2) / BUCKETS_PER_OCTAVE
_EMPTY = _encode((0, []))


def bucket(ms: float) -> int:
    """The histogram bucket of a latency in milliseconds."""
    if ms <= BUCKET_FLOOR_MS:
        return 0
    return min(MAX_BUCKET, int(math.log(ms / BUCKET_FLOOR_MS) / _LOG_BASE))


def bucket_value(index: int) -> float:
    """The middle (geometric) of a bucket, in milliseconds."""
    return BUCKET_FLOOR_MS * math.exp((index + 0.5) * _LOG_BASE)


def new_hist() -> list[int]:
    """An empty full-length histogram: one count per bucket."""
    return [0] * (MAX_BUCKET + 1)


def add_into(hist: list[int], first: int, counts: list[int]) -> None:
    """Add ``counts`` (buckets ``first``, ``first + 1``, ...) to a full-length histogram."""
    end = first + len(counts)
    hist[first:end] = map(add, hist[first:end], counts)


def encode_hist(hist: list[int]) -> bytes:
    """A full-length histogram as (first non-empty bucket, counts up to the last non-empty one)."""
    first = next((i for i, n in enumerate(hist) if n), None)
    if first is None:
        return _EMPTY
    last = len(hist) - next(i for i, n in enumerate(reversed(hist)) if n)
    return _encode((first, hist[first:last]))


def decode_hist(blob: bytes) -> tuple[int, list[int]]:
    return _decode_hist(blob)


def quantile(hist: list[int], q: float) -> float | None:
    """The ``q`` quantile (0..1) of a full-length histogram, in milliseconds; None when it is empty."""
    running = list(accumulate(hist))
    total = running[-1] if running else 0
    if not total:
        return None
    return round(bucket_value(bisect_left(running, max(1, math.ceil(q * total)))), 3)


class RequestStats(msgspec.Struct, array_like=True, gc=False):
    """What one request adds to the rollups (built by the recorder beside its log entry)."""

    ts: float
    workspace: str | None
    provider: str | None
    model: str | None
    status: int
    latency_ms: float
    added_ms: float | None
    tokens_in: int
    tokens_out: int
    cost: float


Hists = tuple[dict[int, int], dict[int, int]]  # (latency, added): bucket -> count


def _merge_pair(into: dict[tuple, Hists], key: tuple, pair: Hists) -> None:
    target = into.get(key)
    if target is None:
        into[key] = ({**pair[0]}, {**pair[1]})
        return
    for mine, theirs in zip(target, pair):
        for index, n in theirs.items():
            mine[index] = mine.get(index, 0) + n


def summarise(batch: Iterable[RequestStats]) -> tuple[dict[tuple, list], dict[tuple, Hists], dict[tuple, Hists]]:
    """The batch summed per (res, slot, workspace, provider, model, status); its histograms per (res, slot,
    workspace, provider, model) and per (res, slot, workspace).

    Each record is counted once, at the finest resolution; the coarser slots and the per-slot histograms are then
    folded from those few sums (a batch spans seconds, so it holds a handful of keys, not one per record).
    """
    finest = RESOLUTIONS[0]
    fine: dict[tuple, list] = {}
    fine_hists: dict[tuple, Hists] = {}
    for s in batch:
        added = s.added_ms
        slot = int(s.ts // finest) * finest
        where = (slot, s.workspace or "", s.provider or "", s.model or "")
        key = (*where, s.status)
        c = fine.get(key)
        if c is None:
            c = fine[key] = [0, 0.0, 0, 0.0, 0, 0, 0.0]
        c[0] += 1
        c[1] += s.latency_ms
        c[4] += s.tokens_in
        c[5] += s.tokens_out
        c[6] += s.cost
        pair = fine_hists.get(where)
        if pair is None:
            pair = fine_hists[where] = ({}, {})
        latency = pair[0]
        index = bucket(s.latency_ms)
        latency[index] = latency.get(index, 0) + 1
        if added is not None:
            c[2] += 1
            c[3] += added
            added_hist = pair[1]
            index = bucket(added)
            added_hist[index] = added_hist.get(index, 0) + 1
    counts: dict[tuple, list] = {}
    group_hists: dict[tuple, Hists] = {}
    slot_hists: dict[tuple, Hists] = {}
    for res in RESOLUTIONS:
        for (slot, *rest), c in fine.items():
            key = (res, slot // res * res, *rest)
            into = counts.get(key)
            if into is None:
                counts[key] = list(c)
            else:
                for i, value in enumerate(c):
                    into[i] += value
        for (slot, workspace, provider, model), pair in fine_hists.items():
            coarse = slot // res * res
            _merge_pair(group_hists, (res, coarse, workspace, provider, model), pair)
            _merge_pair(slot_hists, (res, coarse, workspace), pair)
    return counts, group_hists, slot_hists


class WindowRows(msgspec.Struct):
    """What one window reads: counts per slot ``(slot, requests, errors_5xx, errors_4xx, tokens, cost)`` and per
    provider, model and status ``(provider, model, status, requests, latency_sum, added_n, added_sum, tokens_in,
    tokens_out, cost)``; encoded histograms per slot ``(slot, latency, added)`` and per slot, provider and model
    ``(provider, model, latency, added)``."""

    slot_counts: list[tuple]
    group_counts: list[tuple]
    slot_latency: list[tuple]
    group_latency: list[tuple]


class RollupStore:
    """The rollup tables: summed batches written in one transaction, windows read by primary key."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._last_prune = 0.0

    def open(self) -> None:
        """Create the tables (workers may race here: retried while the file is locked)."""
        with self._lock:
            if self._conn is None:
                self._conn = sqlitefile.open_wal(self.path, _SCHEMA)

    def add(self, batch: list[RequestStats], now: float | None = None) -> None:
        """Add a batch of requests to every resolution's slots (one write transaction)."""
        if not batch:
            return
        counts, *hists = summarise(batch)
        self.open()
        with self._lock:
            conn = self._conn
            assert conn is not None
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(_UPSERT_COUNTS, [(*key, *c) for key, c in counts.items()])
                for (select, upsert), table in zip(_HIST_SQL, hists):
                    conn.executemany(upsert, [(*key, *_merged(conn, select, key, pair)) for key, pair in table.items()])
                now = time.time() if now is None else now
                if now - self._last_prune >= _PRUNE_EVERY_S:
                    self._last_prune = now
                    for res, keep in _KEEP_S.items():
                        for table_name in _TABLES:
                            conn.execute(f"DELETE FROM {table_name} WHERE res = ? AND slot < ?", (res, int(now - keep)))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def read(self, res: int, since: int, workspace: str | None, provider: str | None = None,
             model: str | None = None) -> WindowRows:
        """Resolution ``res`` from slot ``since`` on, for one workspace (None: every workspace, summed), narrowed
        to one provider and/or model when given."""
        where = ""
        args: list[Any] = [res, since]
        for column, value in (("workspace", workspace), ("provider", provider), ("model", model)):
            if value is not None:
                where += f" AND {column} = ?"
                args.append(value)
        slot_latency = _SLOT_LATENCY if provider is None and model is None else _SLOT_LATENCY_OF_GROUP
        self.open()
        conn = sqlitefile.connect(self.path)  # readers use their own connection: WAL lets them run beside the writer
        try:
            conn.execute("BEGIN")  # one snapshot for every table
            rows = WindowRows(*(conn.execute(sql.format(where=where), args).fetchall()
                                for sql in (_SLOT_COUNTS, _GROUP_COUNTS, slot_latency, _GROUP_LATENCY)))
            conn.execute("COMMIT")
            return rows
        finally:
            conn.close()

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None



def _merged(conn: sqlite3.Connection, select: str, key: tuple, pair: Hists) -> tuple[bytes, bytes]:
    """The encoded histograms of ``key``: what the table holds plus this batch's counts."""
    old = conn.execute(select, key).fetchone() or (None, None)
    return merge_encoded(old[0], pair[0]), merge_encoded(old[1], pair[1])


def merge_encoded(blob: bytes | None, counts: dict[int, int]) -> bytes:
    """An encoded histogram (None: empty) plus a batch's counts per bucket, encoded again. Works on the span of
    buckets either holds (a few dozen), never the full-length histogram: this runs for every key of every batch."""
    first, old = decode_hist(blob) if blob is not None else (0, [])
    if not counts:  # nothing to add: the stored bytes as they are (this module encoded them)
        return blob if blob is not None and old else _EMPTY
    low, high = min(counts), max(counts)
    if old:
        low, high = min(low, first), max(high, first + len(old) - 1)
    out = [0] * (high - low + 1)
    if old:
        out[first - low:first - low + len(old)] = old
    for index, n in counts.items():
        out[index - low] += n
    return _encode((low, out))
