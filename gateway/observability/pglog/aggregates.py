"""``/v1/logs/aggregates`` from the shared store: the window's rows summed by PostgreSQL over every instance's
rollups (``PgLogStore.read_window``), shaped by the same ``report`` as the embedded store's."""

from __future__ import annotations

import time

from gateway.observability.aggregates import AggregateReport, report
from gateway.observability.pglog.store import PgLogStore
from gateway.observability.rollups import WINDOWS, WindowRows


class _ReadRows:
    """The rows already read, answering ``report``'s one ``read`` call."""

    def __init__(self, rows: WindowRows) -> None:
        self.rows = rows

    def read(self, *_: object) -> WindowRows:
        return self.rows


async def shared_report(store: PgLogStore, window: str, workspace: str | None, provider: str | None = None,
                        model: str | None = None, now: float | None = None) -> AggregateReport:
    seconds, res = WINDOWS[window]
    now = time.time() if now is None else now
    first = int(now // res) * res - (seconds // res - 1) * res  # as ``report`` works it out
    rows = await store.read_window(res, first, workspace, provider, model)
    return report(_ReadRows(rows), window, workspace, now, provider, model)  # type: ignore[arg-type]
