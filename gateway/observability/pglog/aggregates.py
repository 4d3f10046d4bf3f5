"""``/v1/logs/aggregates`` from the shared store: the window's rows summed by PostgreSQL over every instance's
rollups (``PgLogStore.read_window``), shaped by the same ``report_of`` as the embedded store's."""

from __future__ import annotations

import time

from gateway.observability.aggregates import AggregateReport, first_slot, report_of
from gateway.observability.pglog.store import PgLogStore


async def shared_report(store: PgLogStore, window: str, workspace: str | None, provider: str | None = None,
                        model: str | None = None, now: float | None = None) -> AggregateReport:
    now = time.time() if now is None else now
    res, first = first_slot(window, now)
    rows = await store.read_window(res, first, workspace, provider, model)
    return report_of(rows, window, now, provider, model)
