"""The PostgreSQL log store (asyncpg): one writer connection per worker storing batches with ``COPY``, a small pool
for the reads behind ``/v1/logs`` and ``/v1/logs/aggregates``, day partitions and retention.

One batch is one transaction: the records are copied into a temporary staging table, inserted into
``request_logs`` unless their ``(ts, rid)`` is already there (a replay after a lost acknowledgement), and only the
records actually inserted are added to the rollups, in SQL (``INSERT ... SELECT ... GROUP BY ... ON CONFLICT DO
UPDATE``, so every instance's counts are merged by the database). The commit sends ``NOTIFY gateway_logs`` with the
batch's number and time range, which the live stream of every instance listens for (``tail``).
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any

import asyncpg  # type: ignore[import-untyped]

from gateway.http.errors import ServiceUnavailable
from gateway.observability.logstore import LogFilter
from gateway.observability.pglog.migrations import migrate
from gateway.observability.rollups import _KEEP_S, RESOLUTIONS, WindowRows, encode_hist, new_hist

CHANNEL = "gateway_logs"
DAY_S = 86400
#: one staged record: what the spool keeps (made by ``pglog.backend.PgLogs.write``)
COLUMNS = ("rid", "ts", "workspace", "trace_id", "status", "provider", "model", "latency_ms", "added_ms",
           "tokens_in", "tokens_out", "cost", "lat_bucket", "added_bucket", "doc")
_STAGING = (
    "CREATE TEMPORARY TABLE IF NOT EXISTS log_staging (seq integer, rid text, ts double precision, workspace text,"
    " trace_id text, status integer, provider text, model text, latency_ms double precision,"
    " added_ms double precision, tokens_in bigint, tokens_out bigint, cost double precision, lat_bucket smallint,"
    " added_bucket smallint, doc bytea) ON COMMIT DELETE ROWS"
)
_INSERT = (
    "WITH ins AS (INSERT INTO gateway.request_logs (ts, rid, batch, workspace, trace_id, status, provider, model, doc)"
    " SELECT ts, rid, $1, workspace, trace_id, status, provider, model, doc FROM log_staging ORDER BY seq"
    " ON CONFLICT DO NOTHING RETURNING rid)"
    " DELETE FROM log_staging s WHERE NOT EXISTS (SELECT 1 FROM ins WHERE ins.rid = s.rid)"
)
_ROLLUP_COUNTS = (
    "INSERT INTO gateway.log_rollups SELECT r.res, floor(s.ts / r.res)::bigint * r.res, coalesce(s.workspace, ''),"
    " coalesce(s.provider, ''), coalesce(s.model, ''), s.status, count(*), sum(s.latency_ms), count(s.added_ms),"
    " coalesce(sum(s.added_ms), 0), sum(s.tokens_in), sum(s.tokens_out), sum(s.cost)"
    " FROM log_staging s CROSS JOIN unnest($1::integer[]) AS r(res) GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6"
    " ON CONFLICT (res, slot, workspace, provider, model, status) DO UPDATE SET"
    " requests = log_rollups.requests + excluded.requests,"
    " latency_sum = log_rollups.latency_sum + excluded.latency_sum,"
    " added_n = log_rollups.added_n + excluded.added_n, added_sum = log_rollups.added_sum + excluded.added_sum,"
    " tokens_in = log_rollups.tokens_in + excluded.tokens_in,"
    " tokens_out = log_rollups.tokens_out + excluded.tokens_out,"
    " cost = log_rollups.cost + excluded.cost"
)
_ROLLUP_HIST = (
    "INSERT INTO gateway.log_hist SELECT r.res, floor(s.ts / r.res)::bigint * r.res, coalesce(s.workspace, ''),"
    " coalesce(s.provider, ''), coalesce(s.model, ''), k.kind, k.bucket, count(*)"
    " FROM log_staging s CROSS JOIN unnest($1::integer[]) AS r(res)"
    " CROSS JOIN LATERAL (VALUES (0::smallint, s.lat_bucket), (1::smallint, s.added_bucket)) AS k(kind, bucket)"
    " WHERE k.bucket IS NOT NULL GROUP BY 1, 2, 3, 4, 5, 6, 7 ORDER BY 1, 2, 3, 4, 5, 6, 7"
    " ON CONFLICT (res, slot, workspace, provider, model, kind, bucket) DO UPDATE SET n = log_hist.n + excluded.n"
)
_SLOT_COUNTS = (
    "SELECT slot, SUM(requests)::bigint, SUM(CASE WHEN status >= 500 THEN requests ELSE 0 END)::bigint,"
    " SUM(CASE WHEN status >= 400 AND status < 500 THEN requests ELSE 0 END)::bigint,"
    " SUM(tokens_in + tokens_out)::bigint, SUM(cost) FROM gateway.log_rollups"
    " WHERE res = $1 AND slot >= $2{where} GROUP BY slot"
)
_GROUP_COUNTS = (
    "SELECT provider, model, status, SUM(requests)::bigint, SUM(latency_sum), SUM(added_n)::bigint,"
    " SUM(added_sum), SUM(tokens_in)::bigint, SUM(tokens_out)::bigint, SUM(cost) FROM gateway.log_rollups"
    " WHERE res = $1 AND slot >= $2{where} GROUP BY provider, model, status"
)
_SLOT_HIST = ("SELECT slot, kind, bucket, SUM(n)::bigint FROM gateway.log_hist WHERE res = $1 AND slot >= $2{where}"
              " GROUP BY slot, kind, bucket")
_GROUP_HIST = ("SELECT provider, model, kind, bucket, SUM(n)::bigint FROM gateway.log_hist"
               " WHERE res = $1 AND slot >= $2{where} GROUP BY provider, model, kind, bucket")
_SELECT_ROW = "SELECT id, ts, workspace, trace_id, status, provider, doc FROM gateway.request_logs"
_PARTITIONS = ("SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
               " WHERE i.inhparent = 'gateway.request_logs'::regclass")
_PRUNE_EVERY_S = 60.0
#: what an unreachable, restarting or overloaded PostgreSQL raises
UNREACHABLE = (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError)


def unreachable() -> ServiceUnavailable:
    return ServiceUnavailable("the request-log store (PostgreSQL) does not answer right now; records are kept and "
                              "listed once it is back", code="log_store_unavailable")


#: the longest text kept in an indexed column (a btree entry must fit in a third of a page)
MAX_TEXT = 512


def clean_text(value: str | None) -> str | None:
    """A value PostgreSQL stores in an indexed text column: no NUL, valid UTF-8, at most ``MAX_TEXT`` characters
    (a client's model name or trace id may be anything; one bad record must never stop the writer)."""
    if value is None or (value.isascii() and "\x00" not in value and len(value) <= MAX_TEXT):
        return value
    fixed = value.encode("utf-8", "replace").decode("utf-8").replace("\x00", "\ufffd")
    return fixed[:MAX_TEXT]


def partition_name(day_start: int) -> str:
    return "request_logs_p" + datetime.fromtimestamp(day_start, UTC).strftime("%Y%m%d")


class PgLogStore:
    """The shared store of one worker: ``write`` from the log writer (``PgWriter``), reads through ``PgLogs``."""

    def __init__(self, url: str, retention_days: int = 30, timeout_s: float = 10.0) -> None:
        self.url = url
        self.retention_days = retention_days
        self.timeout_s = timeout_s
        self._conn: Any = None
        self._pool: Any = None
        self._days: set[int] = set()
        self._last_prune = 0.0
        self._pool_lock = asyncio.Lock()
        self._migrated = False

    async def connect(self, **options: Any) -> Any:
        return await asyncpg.connect(self.url, timeout=self.timeout_s, command_timeout=self.timeout_s,
                                     server_settings={"application_name": "gateway"}, **options)

    async def migrate(self) -> list[int]:
        conn = await self.connect()
        try:
            return await migrate(conn)
        finally:
            await conn.close()

    # -- writing -------------------------------------------------------------------------------------------------
    async def open(self) -> None:
        """Connect the writer (applying the migrations the first time)."""
        await self._writer()

    async def _writer(self) -> Any:
        if self._conn is None or self._conn.is_closed():
            conn = await self.connect()
            try:
                if not self._migrated:
                    await migrate(conn)
                    self._migrated = True
                await conn.execute(_STAGING)
            except BaseException:
                conn.terminate()
                raise
            self._conn = conn
        return self._conn

    async def write(self, records: list[tuple]) -> int:
        """Store ``records`` (tuples in ``COLUMNS`` order) and their rollups in one transaction; returns how many
        were new (a replayed record already stored is skipped). Raises when the store cannot be reached."""
        if not records:
            return 0
        try:
            conn = await self._writer()
            await self._ensure_partitions(conn, {int(r[1] // DAY_S) * DAY_S for r in records})
            async with conn.transaction():
                await conn.copy_records_to_table(
                    "log_staging", records=[(i, *r) for i, r in enumerate(records)], columns=("seq", *COLUMNS),
                    timeout=self.timeout_s)
                batch = await conn.fetchval("SELECT nextval('gateway.request_log_batches')")
                status = await conn.execute(_INSERT, batch)
                kept = len(records) - int(status.rsplit(" ", 1)[-1])
                if kept:
                    await conn.execute(_ROLLUP_COUNTS, list(RESOLUTIONS))
                    await conn.execute(_ROLLUP_HIST, list(RESOLUTIONS))
                    low = min(r[1] for r in records)
                    high = max(r[1] for r in records)
                    await conn.execute("SELECT pg_notify($1, $2)", CHANNEL, f"{batch} {low!r} {high!r} {kept}")
        except BaseException:
            self._drop_writer()
            raise
        await self._maybe_prune(conn)
        return kept

    def _drop_writer(self) -> None:
        if self._conn is not None:
            self._conn.terminate()
            self._conn = None

    async def _ensure_partitions(self, conn: Any, days: set[int]) -> None:
        missing = days - self._days
        if not missing:
            return
        for day in sorted(missing):
            name = partition_name(day)
            async with conn.transaction():  # instances starting a new day at once: one creates, the others wait
                await conn.execute("SELECT pg_advisory_xact_lock($1)", 0x6777_7061_7274)
                exists = await conn.fetchval("SELECT to_regclass($1)", f"gateway.{name}")
                if exists is None:
                    await conn.execute(f"CREATE TABLE gateway.{name} PARTITION OF gateway.request_logs"
                                       f" FOR VALUES FROM ({day}) TO ({day + DAY_S})")
            self._days.add(day)

    async def _maybe_prune(self, conn: Any, now: float | None = None) -> None:
        now = time.time() if now is None else now
        if now - self._last_prune < _PRUNE_EVERY_S:
            return
        self._last_prune = now
        try:
            await self.prune(now, conn)
        except UNREACHABLE:
            pass  # the next batch tries again

    async def prune(self, now: float | None = None, conn: Any = None) -> list[str]:
        """Drop the day partitions older than the retention and the rollup slots older than their window; returns
        the partitions dropped."""
        now = time.time() if now is None else now
        conn = conn or await self._writer()
        oldest_kept = (int(now // DAY_S) - self.retention_days + 1) * DAY_S
        dropped = []
        for (name,) in await conn.fetch(_PARTITIONS):
            if not name.startswith("request_logs_p"):
                continue
            day = int(datetime.strptime(name[14:], "%Y%m%d").replace(tzinfo=UTC).timestamp())
            if day < oldest_kept:
                await conn.execute(f"DROP TABLE IF EXISTS gateway.{name}")
                self._days.discard(day)
                dropped.append(name)
        for res, keep in _KEEP_S.items():
            for table in ("log_rollups", "log_hist"):
                await conn.execute(f"DELETE FROM gateway.{table} WHERE res = $1 AND slot < $2", res, int(now - keep))
        return dropped

    # -- reading -------------------------------------------------------------------------------------------------
    async def pool(self) -> Any:
        async with self._pool_lock:
            if self._pool is None:
                self._pool = await asyncpg.create_pool(self.url, min_size=0, max_size=4, timeout=self.timeout_s,
                                                       command_timeout=self.timeout_s,
                                                       server_settings={"application_name": "gateway"})
            return self._pool

    async def query(self, workspace: str | None, flt: LogFilter, every_workspace: bool = False
                    ) -> tuple[list[tuple[int, bytes]], bool]:
        """As ``LogStore.query``: the newest matching rows first, after the cursor; and whether more follow."""
        where: list[str] = []
        args: list[Any] = []

        def arg(value: Any) -> str:
            args.append(value)
            return f"${len(args)}"

        if not every_workspace:
            where.append("workspace IS NULL" if workspace is None else f"workspace = {arg(clean_text(workspace))}")
        if flt.status_class is not None:
            where.append(f"status >= {arg(flt.status_class * 100)} AND status < {arg(flt.status_class * 100 + 100)}")
        for column, op, value in (
            ("trace_id", "=", clean_text(flt.trace_id)), ("status", "=", flt.status),
            ("provider", "=", clean_text(flt.provider)), ("model", "=", clean_text(flt.model)),
            ("ts", ">=", flt.since), ("ts", "<=", flt.until), ("id", "<", flt.after),
        ):
            if value is not None:
                where.append(f"{column} {op} {arg(value)}")
        sql = ("SELECT id, doc FROM gateway.request_logs" + (" WHERE " + " AND ".join(where) if where else "")
               + f" ORDER BY id DESC LIMIT {arg(flt.limit + 1)}")
        try:
            pool = await self.pool()
            rows = [(row[0], row[1]) for row in await pool.fetch(sql, *args)]
        except UNREACHABLE:
            raise unreachable() from None
        return rows[: flt.limit], len(rows) > flt.limit

    async def batch_rows(self, batch: int, low: float, high: float) -> list[tuple]:
        """The rows one write stored, oldest first, as the live tail wants them."""
        pool = await self.pool()
        rows = await pool.fetch(_SELECT_ROW + " WHERE batch = $1 AND ts >= $2 AND ts <= $3 ORDER BY id",
                                batch, low, high)
        return [tuple(row) for row in rows]

    async def batches_after(self, batch: int, limit: int, delivered: list[int] | None = None, counted: int = 0
                            ) -> tuple[list[tuple[int, float, float, int]], int]:
        """The newest ``limit`` writes stored under a batch number above ``batch``, oldest first: (batch, lowest ts,
        highest ts, rows) each, as their notifications name them; and how many rows the older ones beyond
        ``limit`` hold, leaving out the ``delivered`` batches and those numbered ``counted`` or below (a live tail
        catching up after its listening connection was down counts those rows as skipped, once)."""
        pool = await self.pool()
        rows = await pool.fetch("SELECT batch, MIN(ts), MAX(ts), COUNT(*) FROM gateway.request_logs WHERE batch > $1"
                                " GROUP BY batch ORDER BY batch DESC LIMIT $2", batch, limit)
        found = [(row[0], row[1], row[2], row[3]) for row in reversed(rows)]
        older = 0
        if len(found) == limit:
            older = await pool.fetchval(
                "SELECT COUNT(*) FROM gateway.request_logs WHERE batch > $1 AND batch < $2"
                " AND batch <> ALL($3::bigint[])", max(batch, counted), found[0][0], delivered or [])
        return found, older

    async def read_window(self, res: int, since: int, workspace: str | None, provider: str | None = None,
                          model: str | None = None) -> WindowRows:
        """As ``RollupStore.read``, every instance's counts summed by the database in one snapshot."""
        where = ""
        args: list[Any] = [res, since]
        for column, value in (("workspace", workspace), ("provider", provider), ("model", model)):
            if value is not None:
                args.append(clean_text(value))
                where += f" AND {column} = ${len(args)}"
        try:
            pool = await self.pool()
            async with pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
                slot_counts = [tuple(r) for r in await conn.fetch(_SLOT_COUNTS.format(where=where), *args)]
                group_counts = [tuple(r) for r in await conn.fetch(_GROUP_COUNTS.format(where=where), *args)]
                slot_hist = await conn.fetch(_SLOT_HIST.format(where=where), *args)
                group_hist = await conn.fetch(_GROUP_HIST.format(where=where), *args)
        except UNREACHABLE:
            raise unreachable() from None
        return WindowRows(slot_counts, group_counts,
                          [(key, *pair) for key, pair in _histograms(slot_hist, 1).items()],
                          [(*key, *pair) for key, pair in _histograms(group_hist, 2).items()])

    async def close(self) -> None:
        self._drop_writer()
        if self._pool is not None:
            pool, self._pool = self._pool, None
            pool.terminate()


def _histograms(rows: list[Any], width: int) -> dict[Any, tuple[bytes, bytes]]:
    """Rows ``(*key, kind, bucket, n)`` (``width`` key columns) as encoded (latency, added) histograms per key."""
    hists: dict[Any, tuple[list[int], list[int]]] = {}
    for row in rows:
        key = row[0] if width == 1 else tuple(row[:width])
        pair = hists.get(key)
        if pair is None:
            pair = hists[key] = (new_hist(), new_hist())
        pair[row[width]][row[width + 1]] += row[width + 2]
    return {key: (encode_hist(pair[0]), encode_hist(pair[1])) for key, pair in hists.items()}
