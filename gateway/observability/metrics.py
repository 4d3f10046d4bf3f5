"""Prometheus metrics: the metric families, an in-process aggregator flushed off the request path, and exposition.

With ``PROMETHEUS_MULTIPROC_DIR`` set (``gateway serve`` always sets it), values live in per-process mmap files
and ``render`` merges every worker's; without it, one process's private registry is shown. Nothing here runs on
the request path: the recorder's background task sums finished records' metrics (``recordrow.RecordRows``, plain
dict arithmetic) and hands the sums to ``MetricsAggregator.flush`` about once a second, which is when
prometheus_client is touched.
Other objects count rare events and event-loop lag on the worker's ``Metrics`` (O(1)), which the runtime owns
and hands to them; the aggregator flushes it. The metric families and their registry are module-level on purpose:
prometheus_client's contract is one family per name per registry (and per process in multiprocess mode).
"""

from __future__ import annotations

import os
from bisect import bisect_left
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

from gateway.bounded_cache import BoundedCache
from gateway.observability import multiproc

MULTIPROC_DIR = multiproc.directory()
if MULTIPROC_DIR:
    os.makedirs(MULTIPROC_DIR, exist_ok=True)
#: where the metric families register: nowhere in multiprocess mode (the collector reads the files instead)
_REGISTRY: CollectorRegistry | None = None if MULTIPROC_DIR else CollectorRegistry(auto_describe=True)
CONTENT_TYPE = CONTENT_TYPE_LATEST

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
ADDED_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
#: distinct model label values kept per process; later ones are counted as "other" (bounded cardinality)
MAX_MODELS = 500


def _counter(name: str, doc: str, labels: tuple[str, ...]) -> Counter:
    return Counter(name, doc, labels, registry=_REGISTRY)


def _histogram(name: str, doc: str, labels: tuple[str, ...], buckets: tuple[float, ...]) -> Histogram:
    return Histogram(name, doc, labels, buckets=buckets, registry=_REGISTRY)


REQUESTS = _counter("gateway_requests", "Requests by endpoint, provider, model, status and cache status.",
                    ("endpoint", "provider", "model", "status", "cache_status"))
REQUEST_SECONDS = _histogram("gateway_request_duration_seconds", "Total request time, as the client saw it.",
                             ("endpoint", "provider"), LATENCY_BUCKETS)
UPSTREAM_SECONDS = _histogram("gateway_upstream_duration_seconds",
                              "Time inside the answering upstream exchange (to the last byte for streams).",
                              ("endpoint", "provider"), LATENCY_BUCKETS)
ADDED_SECONDS = _histogram("gateway_added_latency_seconds",
                           "The gateway's own time: total minus upstream, for requests answered in one attempt.",
                           ("endpoint",), ADDED_BUCKETS)
TTFT_SECONDS = _histogram("gateway_time_to_first_token_seconds", "Time to the first streamed event.",
                          ("endpoint", "provider"), LATENCY_BUCKETS)
#: the bucket upper bounds the record histograms' sums count into (the last one catches everything): one place for the
#: recorder's sums (``recordrow``, both twins) and the flush that writes them
LATENCY_BOUNDS: tuple[float, ...] = (*LATENCY_BUCKETS, float("inf"))
ADDED_BOUNDS: tuple[float, ...] = (*ADDED_BUCKETS, float("inf"))
RECORD_HISTOGRAM_BOUNDS: dict[Any, tuple[float, ...]] = {
    REQUEST_SECONDS: LATENCY_BOUNDS, UPSTREAM_SECONDS: LATENCY_BOUNDS, TTFT_SECONDS: LATENCY_BOUNDS,
    ADDED_SECONDS: ADDED_BOUNDS}
RETRIES = _counter("gateway_retries", "Retries of the answering target.", ("endpoint", "provider"))
FALLBACKS = _counter("gateway_fallbacks", "Moves to the next fallback target.", ("endpoint",))
BREAKER_OPENS = _counter("gateway_breaker_opens", "Circuit breakers opened by requests.", ("endpoint",))
TOKENS = _counter("gateway_tokens", "Tokens by provider, model, kind (input, output) and where the figures come "
                  "from (usage_source: reported by the provider, estimated by the gateway).",
                  ("provider", "model", "kind", "usage_source"))
COST = _counter("gateway_cost_usd", "Estimated cost in USD (see gateway/observability/cost.py).",
                ("provider", "model"))
POLICY_REJECTIONS = _counter("gateway_policy_rejections", "Requests refused by a policy: kind (rate_limit, "
                             "usage_limit, state_store) and the policy's id (empty for state_store).",
                             ("kind", "policy"))
UNKNOWN_MODELS = _counter("gateway_cost_unknown_models", "Models the price table does not know (each counted once per "
                          "worker; their requests cost 0).", ("provider",))
STATE_STORE_ERRORS = _counter("gateway_state_store_errors", "Failed state-store calls.", ("backend", "operation"))
LOGS_DROPPED = _counter("gateway_log_records_dropped", "Request records not logged (queue full, write failed).",
                        ("reason",))
LOGS_SPOOLED = _counter("gateway_log_records_spooled", "Request records written to the local spool file while the "
                        "PostgreSQL log store was away or slow (replayed when it is back).", ())
SPANS_EXPORTED = _counter("gateway_trace_spans_exported", "Spans accepted by the OTLP collector.", ())
SPANS_DROPPED = _counter("gateway_trace_spans_dropped", "Spans not exported (queue full, export failed).",
                         ("reason",))
REALTIME_SESSIONS = _counter("gateway_realtime_sessions", "WebSocket sessions by event (opened, ended; open now: "
                             "opened minus ended), api (realtime: the Realtime API; responses: the Responses API's "
                             "WebSocket mode) and provider.", ("event", "api", "provider"))
REALTIME_MESSAGES = _counter("gateway_realtime_messages", "Messages relayed by WebSocket sessions, by direction (in: "
                             "from the client, out: from the provider), api and provider.", ("direction", "api",
                                                                                               "provider"))
REALTIME_BYTES = _counter("gateway_realtime_bytes", "Bytes relayed by WebSocket sessions, by direction, api and "
                          "provider.", ("direction", "api", "provider"))
LOOP_LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
LOOP_LAG = _histogram("gateway_event_loop_lag_seconds",
                      "How late a periodic timer fires on each worker's event loop: the first sign of a saturated "
                      "worker.", ("worker",), LOOP_LAG_BUCKETS)

_LOOP_LAG_BOUNDS = LOOP_LAG_BUCKETS + (float("inf"),)


class Metrics:
    """One worker's rare-event counts (policy rejections, state-store errors, dropped logs and spans...) and
    event-loop lag observations, waiting for the recorder's next flush. The runtime owns one and hands it to the
    objects that count; each method is O(1) plain dict arithmetic, prometheus_client is touched only by ``flush``."""

    __slots__ = ("_counts", "_lag")

    def __init__(self) -> None:
        #: (metric, labels) -> amount
        self._counts: dict[tuple[Any, tuple[str, ...]], float] = {}
        #: labels -> bucket sums (fixed size)
        self._lag: dict[tuple[str, ...], _HistogramSum] = {}

    def count(self, metric: Counter, labels: tuple[str, ...] = (), amount: float = 1.0) -> None:
        """Add to any counter here (its label values in order)."""
        key = (metric, labels)
        counts = self._counts
        counts[key] = counts.get(key, 0.0) + amount

    def count_policy_rejection(self, kind: str, policy: str = "") -> None:
        """Count one request refused by a policy (kind ``rate_limit``, ``usage_limit``, or ``state_store`` when
        limits fail closed) and the policy's id."""
        self.count(POLICY_REJECTIONS, (kind, policy))

    def count_state_store_error(self, backend: str, operation: str) -> None:
        """Count one failed state-store call."""
        self.count(STATE_STORE_ERRORS, (backend, operation))

    def observe_loop_lag(self, seconds: float, worker: str) -> None:
        """Record one event-loop lag measurement of a worker."""
        agg = self._lag.get((worker,))
        if agg is None:
            agg = self._lag[(worker,)] = _HistogramSum(_LOOP_LAG_BOUNDS)
        agg.counts[bisect_left(agg.bounds, seconds)] += 1
        agg.total += seconds

    def pending(self, metric: Counter, labels: tuple[str, ...] = ()) -> float:
        """What ``metric`` with these labels has counted since the last flush."""
        return self._counts.get((metric, labels), 0.0)

    def take(self) -> tuple[dict[tuple[Any, tuple[str, ...]], float], dict[tuple[str, ...], _HistogramSum]]:
        """Hand over (and forget) the counts and lag sums waiting for a flush."""
        counts, self._counts = self._counts, {}
        lag, self._lag = self._lag, {}
        return counts, lag


class _HistogramSum:
    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * len(bounds)
        self.total = 0.0


class MetricsAggregator:
    """Writes summed counters and histogram buckets to prometheus_client in ``flush``: the records' sums
    (``recordrow.RecordRows.take_sums``) and the rare-event counts of ``metrics``."""

    def __init__(self, metrics: Metrics | None = None) -> None:
        #: the rare-event counts flushed with the record sums (a private one when none is given)
        self.metrics = metrics if metrics is not None else Metrics()
        self._children: BoundedCache[tuple[Any, tuple[str, ...]], Any] = BoundedCache(20_000)

    def _child(self, metric: Any, labels: tuple[str, ...]) -> Any:
        key = (metric, labels)
        child = self._children.get(key)
        if child is None:
            child = self._children.put(key, metric.labels(*labels) if labels else metric)
        return child

    def flush(self, counts: dict[tuple[Any, tuple[str, ...]], float] | None = None,
              hists: dict[tuple[Any, tuple[str, ...]], tuple[list[int], float]] | None = None) -> None:
        """Write ``counts`` (``(metric, labels) -> amount``) and ``hists`` (``(histogram, labels) -> (bucket
        counts, sum)``), the records' sums since the last flush, and the rare-event counts to prometheus_client."""
        counts = dict(counts) if counts else {}
        pending, lags = self.metrics.take()
        for key, amount in pending.items():
            counts[key] = counts.get(key, 0.0) + amount
        for (metric, labels), amount in counts.items():
            self._child(metric, labels).inc(amount)
        for (metric, labels), (buckets, total) in (hists or {}).items():
            _add_to_histogram(self._child(metric, labels), RECORD_HISTOGRAM_BOUNDS[metric], buckets, total)
        for labels, agg in lags.items():
            _add_to_histogram(self._child(LOOP_LAG, labels), _LOOP_LAG_BOUNDS, agg.counts, agg.total)


def _add_to_histogram(child: Any, bounds: tuple[float, ...], counts: list[int], total: float) -> None:
    """Add summed bucket counts to a histogram child. prometheus_client keeps non-cumulative bucket values and the
    sum as ``_buckets`` / ``_sum`` (what ``observe`` increments one value at a time); should a release rename
    them, fall back to observing each bucket's bound (the sum is then approximate)."""
    buckets = getattr(child, "_buckets", None)
    child_sum = getattr(child, "_sum", None)
    if buckets is None or child_sum is None or len(buckets) != len(bounds):
        for bound, n in zip(bounds, counts):
            for _ in range(n):
                child.observe(bound if bound != float("inf") else bounds[-2])
        return
    child_sum.inc(total)
    for i, n in enumerate(counts):
        if n:
            buckets[i].inc(n)


def render() -> bytes:
    """The text exposition of every metric (all workers' in multiprocess mode). Reads files: call off the loop."""
    if MULTIPROC_DIR:
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=MULTIPROC_DIR)  # type: ignore[no-untyped-call]
        return generate_latest(registry)
    assert _REGISTRY is not None
    return generate_latest(_REGISTRY)
