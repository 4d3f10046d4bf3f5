"""Pure twin of ``gateway._speedups.recordrow``: a finished request record to everything the recorder keeps of it,
in one pass: the request-log row, its JSON line, the rollup stats, and the metric sums.

The recorder's background task (off the request path) calls ``RecordRows.build`` once per record. The metric sums
(requests, latency histograms, retries, tokens, cost) are kept here per label set until ``take_sums`` hands them to
``MetricsAggregator.flush`` about once a second, so a record costs a few dict updates and no prometheus_client call.
The compiled twin gives the same rows, lines, stats and sums (tests/observability/test_recordrow.py compares them
record by record); it does the common record (no error, no logged bodies, no hooks, the provider's usage or none) in
typed code and hands every other record's entry to ``entry.Derived`` and ``entry.build_entry``, as this twin does
for all of them.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

from gateway.observability.cost import Prices
from gateway.observability.entry import Derived, IsoClock, build_entry, encode_entry
from gateway.observability.masking import Masker
from gateway.observability.metrics import (
    ADDED_SECONDS,
    BREAKER_OPENS,
    COST,
    FALLBACKS,
    MAX_MODELS,
    RECORD_HISTOGRAM_BOUNDS,
    REQUEST_SECONDS,
    REQUESTS,
    RETRIES,
    TOKENS,
    TTFT_SECONDS,
    UPSTREAM_SECONDS,
)
from gateway.observability.rollups import RequestStats

__all__ = ["RecordRows"]

#: (metric, label values) -> amount
Counts = dict[tuple[Any, tuple[str, ...]], float]
#: (histogram, label values) -> (count per bucket of its bounds, sum of the values)
Hists = dict[tuple[Any, tuple[str, ...]], tuple[list[int], float]]
#: the log store's row: (ts, workspace, trace_id, status, provider, model, doc)
Row = tuple[float, Any, str, int, Any, Any, bytes]


class RecordRows:
    """Builds each record's row, line and stats, and sums its metrics until ``take_sums``."""

    __slots__ = ("_masker", "_prices", "_clock", "_max_models", "_models", "_counts", "_hists")

    def __init__(self, masker: Masker, prices: Prices, clock: IsoClock | None = None,
                 max_models: int = MAX_MODELS) -> None:
        self._masker = masker
        self._prices = prices
        self._clock = clock if clock is not None else IsoClock()
        #: distinct model labels the metrics carry (past this many, a new model is counted as "other")
        self._max_models = max_models
        self._models: set[str] = set()
        self._counts: Counts = {}
        self._hists: dict[tuple[Any, tuple[str, ...]], list[Any]] = {}

    def build(self, rec: Any, wall_offset: float) -> tuple[Row, bytes, RequestStats]:
        """The record's log row, its JSON line (the row's doc) and its rollup stats; its metrics are summed."""
        d = Derived(rec, wall_offset, self._masker, self._prices)
        doc = encode_entry(build_entry(rec, d, self._masker, self._clock.iso))
        added_ms = None if d.added_s is None else d.added_s * 1000
        stats = RequestStats(d.wall_start, rec.workspace, rec.provider, rec.model, rec.status, rec.total_s * 1000,
                             added_ms, d.tokens_in, d.tokens_out, d.cost)
        self._sum(rec, d.upstream_s, d.added_s, d.tokens_in, d.tokens_out, d.cost)
        model = rec.model if isinstance(rec.model, str) else None  # the row's column takes text alone
        return (d.wall_start, rec.workspace, rec.trace_id, rec.status, rec.provider, model, doc), doc, stats

    def take_sums(self) -> tuple[Counts, Hists]:
        """Hand over (and forget) the sums since the last call."""
        counts, self._counts = self._counts, {}
        hists, self._hists = self._hists, {}
        return counts, {key: (pair[0], pair[1]) for key, pair in hists.items()}

    # -- the metric sums ---------------------------------------------------------------------------------------
    def _model_label(self, model: str | None) -> str:
        if not model:
            return ""
        models = self._models
        if model in models:
            return model
        if len(models) >= self._max_models:
            return "other"
        models.add(model)
        return model

    def _add(self, metric: Any, labels: tuple[str, ...], amount: float) -> None:
        key = (metric, labels)
        counts = self._counts
        counts[key] = counts.get(key, 0.0) + amount

    def _observe(self, histogram: Any, labels: tuple[str, ...], value: float) -> None:
        key = (histogram, labels)
        pair = self._hists.get(key)
        bounds = RECORD_HISTOGRAM_BOUNDS[histogram]
        if pair is None:
            pair = self._hists[key] = [[0] * len(bounds), 0.0]
        pair[0][bisect_left(bounds, value)] += 1
        pair[1] += value

    def _sum(self, rec: Any, upstream_s: float | None, added_s: float | None, tokens_in: int, tokens_out: int,
             cost: float) -> None:
        endpoint = rec.endpoint
        provider = rec.provider or ""
        model = self._model_label(rec.model)
        self._add(REQUESTS, (endpoint, provider, model, str(rec.status), rec.cache_status or ""), 1.0)
        pair = (endpoint, provider)
        self._observe(REQUEST_SECONDS, pair, rec.total_s)
        if upstream_s is not None:
            self._observe(UPSTREAM_SECONDS, pair, upstream_s)
        if added_s is not None:
            self._observe(ADDED_SECONDS, (endpoint,), added_s)
        if rec.ttft_s is not None:
            self._observe(TTFT_SECONDS, pair, rec.ttft_s)
        if rec.retries:
            self._add(RETRIES, pair, rec.retries)
        if rec.fallbacks:
            self._add(FALLBACKS, (endpoint,), rec.fallbacks)
        if rec.breaker_opens:
            self._add(BREAKER_OPENS, (endpoint,), rec.breaker_opens)
        if tokens_in:
            self._add(TOKENS, (provider, model, "input", rec.usage_source), tokens_in)
        if tokens_out:
            self._add(TOKENS, (provider, model, "output", rec.usage_source), tokens_out)
        if cost:
            self._add(COST, (provider, model), cost)
