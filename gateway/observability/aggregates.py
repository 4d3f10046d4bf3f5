"""The aggregates of a window (last 15 minutes, hour or day) read from the rollups (``rollups.py``): totals, one
value per time slot for the charts, and figures per provider and model, each with requests per second, error rate
and counts by status, p50/p99 of total and gateway-added latency, tokens and cost. ``read_report`` reads them
through a ``LogReader`` (either backend), ``report`` from an embedded ``RollupStore`` directly."""

from __future__ import annotations

import time
from typing import Any

import msgspec

from gateway.observability.logbackend import LogReader
from gateway.observability.rollups import WINDOWS, RollupStore, WindowRows, add_into, decode_hist, new_hist, quantile


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
    provider: str | None = None
    model: str | None = None
    object: str = "logs.aggregates"


class _Acc:
    """Sums of one provider and model (or of the whole window)."""

    __slots__ = ("requests", "errors", "by_status", "latency_sum", "added_n", "added_sum", "tokens_in", "tokens_out",
                 "cost", "latency_hist", "added_hist")

    def __init__(self) -> None:
        self.requests = self.errors = self.added_n = self.tokens_in = self.tokens_out = 0
        self.by_status: dict[str, int] = {}
        self.latency_sum = self.added_sum = self.cost = 0.0
        self.latency_hist = new_hist()
        self.added_hist = new_hist()

    def count(self, status: int, requests: int, latency_sum: float, added_n: int, added_sum: float, tokens_in: int,
              tokens_out: int, cost: float) -> None:
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


def _series(rows: WindowRows, slots: list[int], res: int, now: float, total: _Acc) -> Series:
    """One value per slot (adding every slot's histograms into ``total``'s)."""
    last = len(slots) - 1
    index = {slot: i for i, slot in enumerate(slots)}
    counts: list[list[Any]] = [[0, 0, 0, 0, 0.0] for _ in slots]  # requests, 5xx, 4xx, tokens, cost
    for slot, *values in rows.slot_counts:
        into = counts[index.get(slot, last)]  # a slot ahead of this clock (another worker's) counts in the last
        for j, value in enumerate(values):
            into[j] += value
    hists = [(new_hist(), new_hist()) for _ in slots]
    for slot, latency_blob, added_blob in rows.slot_latency:
        latency, added = hists[index.get(slot, last)]
        add_into(latency, *decode_hist(latency_blob))
        add_into(added, *decode_hist(added_blob))
    for latency, added in hists:
        add_into(total.latency_hist, 0, latency)
        add_into(total.added_hist, 0, added)
    last_span = max(1.0, now - slots[-1])
    return Series(
        t=slots,
        requests_per_second=[round(c[0] / (last_span if i == last else res), 3) for i, c in enumerate(counts)],
        errors_4xx=[c[2] for c in counts],
        errors_5xx=[c[1] for c in counts],
        error_rate=[round((c[1] + c[2]) / c[0], 4) if c[0] else 0.0 for c in counts],
        latency_p50_ms=[quantile(h[0], 0.5) for h in hists],
        latency_p99_ms=[quantile(h[0], 0.99) for h in hists],
        added_p50_ms=[quantile(h[1], 0.5) for h in hists],
        added_p99_ms=[quantile(h[1], 0.99) for h in hists],
        tokens=[c[3] for c in counts],
        cost_usd=[round(c[4], 8) for c in counts],
    )


def first_slot(window: str, now: float) -> tuple[int, int]:
    """(slot seconds, start of the first slot) of the last ``window`` at ``now``."""
    seconds, res = WINDOWS[window]
    return res, int(now // res) * res - (seconds // res - 1) * res


def report(store: RollupStore, window: str, workspace: str | None, now: float | None = None,
           provider: str | None = None, model: str | None = None) -> AggregateReport:
    """The aggregates of the last ``window`` (a key of WINDOWS) for one workspace (None: every workspace), of one
    provider and/or model when given."""
    now = time.time() if now is None else now
    res, first = first_slot(window, now)
    return report_of(store.read(res, first, workspace, provider, model), window, now, provider, model)


async def read_report(logs: LogReader, window: str, workspace: str | None, provider: str | None = None,
                      model: str | None = None, now: float | None = None) -> AggregateReport:
    """``report`` of the rollups a log store reads (every writer's, summed)."""
    now = time.time() if now is None else now
    res, first = first_slot(window, now)
    return report_of(await logs.window(res, first, workspace, provider, model), window, now, provider, model)


def report_of(rows: WindowRows, window: str, now: float, provider: str | None = None, model: str | None = None
              ) -> AggregateReport:
    """The report of a window's rollup rows, read at ``now``."""
    res, first = first_slot(window, now)
    slots = list(range(first, int(now // res) * res + 1, res))
    total = _Acc()
    per_group: dict[tuple[str, str], _Acc] = {}
    for group_provider, group_model, status, *values in rows.group_counts:
        group = per_group.get((group_provider, group_model))
        if group is None:
            group = per_group[(group_provider, group_model)] = _Acc()
        group.count(status, *values)
        total.count(status, *values)
    for group_provider, group_model, latency_blob, added_blob in rows.group_latency:
        group = per_group.get((group_provider, group_model))
        if group is not None:
            add_into(group.latency_hist, *decode_hist(latency_blob))
            add_into(group.added_hist, *decode_hist(added_blob))
    series = _series(rows, slots, res, now, total)
    span = max(1.0, now - first)
    groups = [acc.figures(span, provider=provider or None, model=model or None)
              for (provider, model), acc in sorted(per_group.items(), key=lambda kv: -kv[1].requests)]
    return AggregateReport(window, res, float(first), now, total.figures(span), series, groups, provider, model)
