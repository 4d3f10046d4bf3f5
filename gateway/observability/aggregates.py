"""Request-log aggregates: per-slot rollups written beside the request logs, read for the last 15 min / hour / day.

Every batch the recorder stores also lands, summed, in ``log_rollups`` (same SQLite file as the request logs): one
row per (resolution, time slot, workspace, provider, model, status) holding counts, sums of latency, gateway-added
latency, tokens and cost, and two log-scale histograms (total and added latency) from which p50/p99 are read. Each
window reads one resolution (15 min: 10 s slots, 1 h: 1 min, 1 day: 15 min), so a query touches (slots x groups)
rows through the primary key, however many requests the window holds: a day's query is the same work at 1 million
requests as at 1,000 (``bench/aggregates.py`` measures it).

Percentiles come from histogram buckets ``2**(1/8)`` apart (a bucket's middle is within 4.5% of any value in it),
from 0.01 ms up. Rows older than their window are pruned as new ones are written. Every method blocks: call them
in a thread.
"""

from __future__ import annotations

import math
import sqlite3
import threading
import time
from typing import Any, Iterable

import msgspec

#: window name -> (seconds, slot seconds)
WINDOWS: dict[str, tuple[int, int]] = {"15m": (900, 10), "1h": (3600, 60), "1d": (86400, 900)}
RESOLUTIONS: tuple[int, ...] = tuple(sorted({slot for _, slot in WINDOWS.values()}))
_KEEP_S = {slot: max(w for w, s in WINDOWS.values() if s == slot) + 2 * slot for slot in RESOLUTIONS}

BUCKETS_PER_OCTAVE = 8
BUCKET_FLOOR_MS = 0.01
MAX_BUCKET = 8 * 40  # 0.01 ms * 2**40: far beyond any timeout

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS log_rollups ("
    " res INTEGER NOT NULL, slot INTEGER NOT NULL, workspace TEXT NOT NULL, provider TEXT NOT NULL,"
    " model TEXT NOT NULL, status INTEGER NOT NULL, requests INTEGER NOT NULL, latency_sum REAL NOT NULL,"
    " added_n INTEGER NOT NULL, added_sum REAL NOT NULL, tokens_in INTEGER NOT NULL, tokens_out INTEGER NOT NULL,"
    " cost REAL NOT NULL, latency_hist BLOB NOT NULL, added_hist BLOB NOT NULL,"
    " PRIMARY KEY (res, slot, workspace, provider, model, status)) WITHOUT ROWID",
)
_KEY_WHERE = "res = ? AND slot = ? AND workspace = ? AND provider = ? AND model = ? AND status = ?"
_SELECT_HISTS = f"SELECT latency_hist, added_hist FROM log_rollups WHERE {_KEY_WHERE}"
_UPSERT = (
    "INSERT INTO log_rollups (res, slot, workspace, provider, model, status, requests, latency_sum, added_n,"
    " added_sum, tokens_in, tokens_out, cost, latency_hist, added_hist) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
    " ON CONFLICT (res, slot, workspace, provider, model, status) DO UPDATE SET"
    " requests = requests + excluded.requests, latency_sum = latency_sum + excluded.latency_sum,"
    " added_n = added_n + excluded.added_n, added_sum = added_sum + excluded.added_sum,"
    " tokens_in = tokens_in + excluded.tokens_in, tokens_out = tokens_out + excluded.tokens_out,"
    " cost = cost + excluded.cost, latency_hist = excluded.latency_hist, added_hist = excluded.added_hist"
)
_PRUNE = "DELETE FROM log_rollups WHERE res = ? AND slot < ?"
_PRUNE_EVERY_S = 60.0

_hist_encode = msgspec.msgpack.encode
_hist_decode = msgspec.msgpack.Decoder(dict[int, int]).decode
_LOG_BASE = math.log(2) / BUCKETS_PER_OCTAVE


def bucket(ms: float) -> int:
    """The histogram bucket of a latency in milliseconds."""
    if ms <= BUCKET_FLOOR_MS:
        return 0
    return min(MAX_BUCKET, int(math.log(ms / BUCKET_FLOOR_MS) / _LOG_BASE))


def bucket_value(index: int) -> float:
    """The middle (geometric) of a bucket, in milliseconds."""
    return BUCKET_FLOOR_MS * math.exp((index + 0.5) * _LOG_BASE)


def quantile(hist: dict[int, int], q: float) -> float | None:
    """The ``q`` quantile (0..1) of a histogram, in milliseconds; None when it is empty."""
    total = sum(hist.values())
    if not total:
        return None
    rank = max(1, math.ceil(q * total))
    seen = 0
    for index in sorted(hist):
        seen += hist[index]
        if seen >= rank:
            return round(bucket_value(index), 3)
    return None  # unreachable: seen ends at total >= rank


def merge(into: dict[int, int], other: dict[int, int]) -> None:
    for index, count in other.items():
        into[index] = into.get(index, 0) + count


class RequestStats(msgspec.Struct, array_like=True, gc=False):
    """What one request adds to the aggregates (built by the recorder beside its log entry)."""

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


class _Sum:
    __slots__ = ("requests", "latency_sum", "added_n", "added_sum", "tokens_in", "tokens_out", "cost",
                 "latency_hist", "added_hist")

    def __init__(self) -> None:
        self.requests = 0
        self.latency_sum = 0.0
        self.added_n = 0
        self.added_sum = 0.0
        self.tokens_in = 0
        self.tokens_out = 0
        self.cost = 0.0
        self.latency_hist: dict[int, int] = {}
        self.added_hist: dict[int, int] = {}

    def add(self, stats: RequestStats, latency_bucket: int, added_bucket: int | None) -> None:
        self.requests += 1
        self.latency_sum += stats.latency_ms
        self.tokens_in += stats.tokens_in
        self.tokens_out += stats.tokens_out
        self.cost += stats.cost
        hist = self.latency_hist
        hist[latency_bucket] = hist.get(latency_bucket, 0) + 1
        if added_bucket is not None:
            self.added_n += 1
            self.added_sum += stats.added_ms  # type: ignore[operator]
            hist = self.added_hist
            hist[added_bucket] = hist.get(added_bucket, 0) + 1


def summarise(batch: Iterable[RequestStats]) -> dict[tuple, _Sum]:
    """The batch summed per (resolution, slot, workspace, provider, model, status)."""
    sums: dict[tuple, _Sum] = {}
    for stats in batch:
        group = (stats.workspace or "", stats.provider or "", stats.model or "", stats.status)
        latency_bucket = bucket(stats.latency_ms)
        added_bucket = None if stats.added_ms is None else bucket(stats.added_ms)
        ts = stats.ts
        for res in RESOLUTIONS:
            key = (res, int(ts // res) * res, *group)
            entry = sums.get(key)
            if entry is None:
                entry = sums[key] = _Sum()
            entry.add(stats, latency_bucket, added_bucket)
    return sums


class RollupStore:
    """The ``log_rollups`` table: summed batches written in one transaction, windows read by primary key."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._last_prune = 0.0

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=5.0, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 5000")
        return conn

    def open(self) -> None:
        """Create the table (workers may race here: retried while the file is locked)."""
        with self._lock:
            if self._conn is not None:
                return
            conn = self._connect()
            for attempt in range(50):
                try:
                    conn.execute("PRAGMA journal_mode=WAL")
                    conn.execute("PRAGMA synchronous=NORMAL")
                    for statement in _SCHEMA:
                        conn.execute(statement)
                    break
                except sqlite3.OperationalError:
                    if attempt == 49:
                        conn.close()
                        raise
                    time.sleep(0.05)
            self._conn = conn

    def add(self, batch: list[RequestStats], now: float | None = None) -> None:
        """Add a batch of requests to every resolution's slots (one write transaction)."""
        if not batch:
            return
        sums = summarise(batch)
        self.open()
        with self._lock:
            conn = self._conn
            assert conn is not None
            conn.execute("BEGIN IMMEDIATE")
            try:
                for key, s in sums.items():
                    latency_hist, added_hist = s.latency_hist, s.added_hist
                    old = conn.execute(_SELECT_HISTS, key).fetchone()
                    if old is not None:
                        merge(latency_hist, _hist_decode(old[0]))
                        merge(added_hist, _hist_decode(old[1]))
                    conn.execute(_UPSERT, (*key, s.requests, s.latency_sum, s.added_n, s.added_sum, s.tokens_in,
                                           s.tokens_out, s.cost, _hist_encode(latency_hist),
                                           _hist_encode(added_hist)))
                now = time.time() if now is None else now
                if now - self._last_prune >= _PRUNE_EVERY_S:
                    self._last_prune = now
                    for res, keep in _KEEP_S.items():
                        conn.execute(_PRUNE, (res, int(now - keep)))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def rows(self, res: int, since: int, workspace: str | None) -> list[tuple]:
        """(slot, provider, model, status, requests, latency_sum, added_n, added_sum, tokens_in, tokens_out, cost,
        latency_hist, added_hist) of every row of resolution ``res`` from slot ``since``; ``workspace`` None: all."""
        sql = ("SELECT slot, provider, model, status, requests, latency_sum, added_n, added_sum, tokens_in,"
               " tokens_out, cost, latency_hist, added_hist FROM log_rollups WHERE res = ? AND slot >= ?")
        args: list[Any] = [res, since]
        if workspace is not None:
            sql += " AND workspace = ?"
            args.append(workspace)
        self.open()
        conn = self._connect()  # readers use their own connection: WAL lets them run beside the writer
        try:
            return conn.execute(sql, args).fetchall()
        finally:
            conn.close()

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


# --- reading a window ------------------------------------------------------------------------------------------


class Figures(msgspec.Struct, kw_only=True):
    """Totals of a window, or of one provider and model in it."""

    requests: int = 0
    requests_per_second: float = 0.0
    errors: int = 0
    error_rate: float = 0.0
    by_status: dict[str, int] = msgspec.field(default_factory=dict)
    latency_avg_ms: float | None = None
    latency_p50_ms: float | None = None
    latency_p99_ms: float | None = None
    added_avg_ms: float | None = None
    added_p50_ms: float | None = None
    added_p99_ms: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cost_usd: float = 0.0


class Group(Figures, kw_only=True):
    provider: str | None
    model: str | None


class Series(msgspec.Struct):
    """One value per slot, oldest first; ``t`` is each slot's start (unix seconds)."""

    t: list[int]
    requests_per_second: list[float]
    errors_4xx: list[int]
    errors_5xx: list[int]
    error_rate: list[float]
    latency_p50_ms: list[float | None]
    latency_p99_ms: list[float | None]
    added_p50_ms: list[float | None]
    added_p99_ms: list[float | None]
    tokens: list[int]
    cost_usd: list[float]


class AggregateReport(msgspec.Struct):
    """The answer of ``GET /v1/logs/aggregates``."""

    window: str
    slot_seconds: int
    start: float
    end: float
    totals: Figures
    series: Series
    groups: list[Group]
    object: str = "logs.aggregates"


class _Acc:
    __slots__ = ("requests", "errors", "by_status", "latency_sum", "added_n", "added_sum", "tokens_in",
                 "tokens_out", "cost", "latency_hist", "added_hist")

    def __init__(self) -> None:
        self.requests = 0
        self.errors = 0
        self.by_status: dict[str, int] = {}
        self.latency_sum = 0.0
        self.added_n = 0
        self.added_sum = 0.0
        self.tokens_in = 0
        self.tokens_out = 0
        self.cost = 0.0
        self.latency_hist: dict[int, int] = {}
        self.added_hist: dict[int, int] = {}

    def add(self, status: int, requests: int, latency_sum: float, added_n: int, added_sum: float, tokens_in: int,
            tokens_out: int, cost: float, latency_hist: dict[int, int], added_hist: dict[int, int]) -> None:
        self.requests += requests
        if status >= 400:
            self.errors += requests
        key = str(status)
        self.by_status[key] = self.by_status.get(key, 0) + requests
        self.latency_sum += latency_sum
        self.added_n += added_n
        self.added_sum += added_sum
        self.tokens_in += tokens_in
        self.tokens_out += tokens_out
        self.cost += cost
        merge(self.latency_hist, latency_hist)
        merge(self.added_hist, added_hist)

    def figures(self, seconds: float, **extra: Any) -> Any:
        cls = Group if extra else Figures
        n = self.requests
        return cls(
            requests=n, requests_per_second=round(n / seconds, 3) if seconds > 0 else 0.0, errors=self.errors,
            error_rate=round(self.errors / n, 4) if n else 0.0, by_status=dict(sorted(self.by_status.items())),
            latency_avg_ms=round(self.latency_sum / n, 3) if n else None,
            latency_p50_ms=quantile(self.latency_hist, 0.5), latency_p99_ms=quantile(self.latency_hist, 0.99),
            added_avg_ms=round(self.added_sum / self.added_n, 3) if self.added_n else None,
            added_p50_ms=quantile(self.added_hist, 0.5), added_p99_ms=quantile(self.added_hist, 0.99),
            prompt_tokens=self.tokens_in, completion_tokens=self.tokens_out,
            total_tokens=self.tokens_in + self.tokens_out, cost_usd=round(self.cost, 8), **extra,
        )


def report(store: RollupStore, window: str, workspace: str | None, now: float | None = None) -> AggregateReport:
    """The aggregates of the last ``window`` (a key of WINDOWS) for one workspace (None: every workspace)."""
    seconds, res = WINDOWS[window]
    now = time.time() if now is None else now
    current = int(now // res) * res
    first = current - (seconds // res - 1) * res
    slots = list(range(first, current + 1, res))
    index = {slot: i for i, slot in enumerate(slots)}
    per_slot = [_Acc() for _ in slots]
    per_group: dict[tuple[str, str], _Acc] = {}
    total = _Acc()
    for (slot, provider, model, status, requests, latency_sum, added_n, added_sum, tokens_in, tokens_out, cost,
         latency_blob, added_blob) in store.rows(res, first, workspace):
        i = index.get(slot)
        if i is None:  # a slot ahead of this clock (another worker's clock): count it in the last one
            i = len(slots) - 1
        values = (status, requests, latency_sum, added_n, added_sum, tokens_in, tokens_out, cost,
                  _hist_decode(latency_blob), _hist_decode(added_blob))
        per_slot[i].add(*values)
        group = per_group.get((provider, model))
        if group is None:
            group = per_group[(provider, model)] = _Acc()
        group.add(*values)
        total.add(*values)
    span = max(1.0, now - first)
    last_span = max(1.0, now - current)
    series = Series(
        t=slots,
        requests_per_second=[round(a.requests / (last_span if i == len(slots) - 1 else res), 3)
                             for i, a in enumerate(per_slot)],
        errors_4xx=[sum(n for s, n in a.by_status.items() if s[0] == "4") for a in per_slot],
        errors_5xx=[sum(n for s, n in a.by_status.items() if s[0] == "5") for a in per_slot],
        error_rate=[round(a.errors / a.requests, 4) if a.requests else 0.0 for a in per_slot],
        latency_p50_ms=[quantile(a.latency_hist, 0.5) for a in per_slot],
        latency_p99_ms=[quantile(a.latency_hist, 0.99) for a in per_slot],
        added_p50_ms=[quantile(a.added_hist, 0.5) for a in per_slot],
        added_p99_ms=[quantile(a.added_hist, 0.99) for a in per_slot],
        tokens=[a.tokens_in + a.tokens_out for a in per_slot],
        cost_usd=[round(a.cost, 8) for a in per_slot],
    )
    groups = [acc.figures(span, provider=provider or None, model=model or None)
              for (provider, model), acc in sorted(per_group.items(), key=lambda kv: -kv[1].requests)]
    return AggregateReport(window, res, float(first), now, total.figures(span), series, groups)
