"""The log store's schema, owned by the gateway: numbered migrations applied in order, each once.

``migrate`` runs at every worker's start (and from ``gateway logs migrate``). It holds a session advisory lock while it
looks and applies, so instances starting at once wait for each other instead of racing; applied versions are rows of
``gateway.schema_migrations``. A migration is never edited once released: a change is a new one at the end.

Tables (schema ``gateway``):
- ``request_logs``: one row per request, partitioned by day on ``ts`` (unix seconds; partitions
  ``request_logs_pYYYYMMDD`` are created as records arrive, and dropped whole by retention). ``id`` comes from one
  sequence (the ``/v1/logs`` cursor); ``(ts, rid)`` is the primary key, ``rid`` the record's idempotent key, so a
  replayed record is written once. ``batch`` names the write that stored it (the live stream reads a batch at once).
- ``log_rollups`` and ``log_hist``: per-slot sums (10 s, 1 min, 15 min) and latency histograms as one row per bucket,
  added to by every instance with upserts in the transaction that stores the records.
"""

from __future__ import annotations

from typing import Any

SCHEMA = "gateway"
#: an arbitrary constant: the advisory lock migrations hold
LOCK_ID = 0x6777_6C6F_6773  # "gwlogs"

MIGRATIONS: tuple[tuple[int, str, tuple[str, ...]], ...] = (
    (1, "request logs partitioned by day, rollups and latency histograms", (
        "CREATE SEQUENCE gateway.request_logs_id_seq",
        "CREATE SEQUENCE gateway.request_log_batches",
        "CREATE TABLE gateway.request_logs ("
        " id bigint NOT NULL DEFAULT nextval('gateway.request_logs_id_seq'), ts double precision NOT NULL,"
        " rid text NOT NULL, batch bigint NOT NULL, workspace text, trace_id text, status integer NOT NULL,"
        " provider text, model text, doc bytea NOT NULL, PRIMARY KEY (ts, rid)) PARTITION BY RANGE (ts)",
        "CREATE INDEX request_logs_id ON gateway.request_logs (id)",
        "CREATE INDEX request_logs_workspace ON gateway.request_logs (workspace, id)",
        "CREATE INDEX request_logs_trace ON gateway.request_logs (trace_id)",
        "CREATE INDEX request_logs_status ON gateway.request_logs (status, id)",
        "CREATE INDEX request_logs_provider ON gateway.request_logs (provider, id)",
        "CREATE INDEX request_logs_model ON gateway.request_logs (model, id)",
        "CREATE INDEX request_logs_batch ON gateway.request_logs (batch)",
        "CREATE TABLE gateway.log_rollups ("
        " res integer NOT NULL, slot bigint NOT NULL, workspace text NOT NULL, provider text NOT NULL,"
        " model text NOT NULL, status integer NOT NULL, requests bigint NOT NULL,"
        " latency_sum double precision NOT NULL,"
        " added_n bigint NOT NULL, added_sum double precision NOT NULL, tokens_in bigint NOT NULL,"
        " tokens_out bigint NOT NULL, cost double precision NOT NULL,"
        " PRIMARY KEY (res, slot, workspace, provider, model, status))",
        "CREATE TABLE gateway.log_hist ("
        " res integer NOT NULL, slot bigint NOT NULL, workspace text NOT NULL, provider text NOT NULL,"
        " model text NOT NULL, kind smallint NOT NULL, bucket smallint NOT NULL, n bigint NOT NULL,"
        " PRIMARY KEY (res, slot, workspace, provider, model, kind, bucket))",
    )),
)
LATEST = MIGRATIONS[-1][0]


async def migrate(conn: Any) -> list[int]:
    """Apply the migrations ``conn``'s database lacks (under the advisory lock); returns the versions applied."""
    applied: list[int] = []
    await conn.execute("SELECT pg_advisory_lock($1)", LOCK_ID)
    try:
        await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
        await conn.execute(f"CREATE TABLE IF NOT EXISTS {SCHEMA}.schema_migrations (version integer PRIMARY KEY,"
                           " description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())")
        done = {row[0] for row in await conn.fetch(f"SELECT version FROM {SCHEMA}.schema_migrations")}
        if done and max(done) > LATEST:
            raise RuntimeError(f"the log store's schema is version {max(done)}, newer than this gateway's "
                               f"({LATEST}): upgrade the gateway")
        for version, description, statements in MIGRATIONS:
            if version in done:
                continue
            async with conn.transaction():
                for statement in statements:
                    await conn.execute(statement)
                await conn.execute(f"INSERT INTO {SCHEMA}.schema_migrations (version, description) VALUES ($1, $2)",
                                   version, description)
            applied.append(version)
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", LOCK_ID)
    return applied
