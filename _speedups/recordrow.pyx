# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled twin of gateway.observability.recordrow: a finished request record to its log row, JSON line, rollup
stats and metric sums, in one pass.

The common record (no error, no logged bodies, no hooks, and the provider's ``Usage`` or no usage to estimate) is
worked out here in typed code: timings as C doubles, the log timestamp from a per-second cache and a table of
millisecond suffixes, the entry built positionally. Every other record's entry is made by ``entry.Derived`` and
``entry.build_entry`` exactly as the pure twin makes it. The latency histograms are summed in C arrays per
(endpoint, provider), one dict lookup for the three of them; ``take_sums`` hands them over in the pure twin's shape.
Python's own ``round`` and the price table's ``cost_usd`` are called, so every figure is the pure twin's to the bit.
"""

from datetime import UTC, datetime

import msgspec

from gateway.observability.entry import Derived, IsoClock, LogEntry, build_entry, encode_entry
from gateway.observability.metrics import (
    ADDED_BOUNDS,
    ADDED_SECONDS,
    BREAKER_OPENS,
    COST,
    FALLBACKS,
    LATENCY_BOUNDS,
    MAX_MODELS,
    REQUEST_SECONDS,
    REQUESTS,
    RETRIES,
    TOKENS,
    TTFT_SECONDS,
    UPSTREAM_SECONDS,
)
from gateway.observability.rollups import RequestStats
from gateway.schema.common import Usage

__all__ = ["RecordRows"]

# A build from older sources must not pass for this twin: its public names must be the pure module's.
from gateway.observability import recordrow as _pure

if __all__ != getattr(_pure, "__all__", None):
    raise ImportError("gateway._speedups.recordrow is stale: __all__ differs from the pure module")
del _pure

cdef enum:
    MAX_BOUNDS = 32

cdef object UNSET = msgspec.UNSET
cdef object _round = round
cdef tuple _MILLIS = tuple([".%03dZ" % i for i in range(1000)])
cdef object _ZERO = 0.0

if len(LATENCY_BOUNDS) > MAX_BOUNDS or len(ADDED_BOUNDS) > MAX_BOUNDS:
    raise ImportError("gateway._speedups.recordrow: a histogram has more buckets than it holds")


cdef class _Hist:
    """One histogram's bucket counts and sum, bisected as ``bisect.bisect_left`` does."""
    cdef double bounds[MAX_BOUNDS]
    cdef long long counts[MAX_BOUNDS]
    cdef int size
    cdef long long seen
    cdef double total

    def __cinit__(self, tuple bounds):
        cdef int i
        self.size = len(bounds)
        for i in range(self.size):
            self.bounds[i] = bounds[i]
            self.counts[i] = 0
        self.seen = 0
        self.total = 0.0

    cdef inline void observe(self, double value) noexcept:
        cdef int lo = 0, hi = self.size, mid
        while lo < hi:
            mid = (lo + hi) // 2
            if self.bounds[mid] < value:
                lo = mid + 1
            else:
                hi = mid
        self.counts[lo] += 1
        self.seen += 1
        self.total += value

    cdef tuple taken(self):
        return ([self.counts[i] for i in range(self.size)], self.total)


cdef class _PairHists:
    """The three latency histograms one (endpoint, provider) pair is summed in."""
    cdef _Hist request, upstream, ttft

    def __cinit__(self):
        self.request = _Hist(LATENCY_BOUNDS)
        self.upstream = _Hist(LATENCY_BOUNDS)
        self.ttft = _Hist(LATENCY_BOUNDS)


cdef extern from "math.h":
    double floor(double x) nogil
    double fabs(double x) nogil
    double nextafter(double x, double y) nogil
    int isfinite(double x) nogil


cdef inline object _rounded(double x, int ndigits, double scale):
    """``round(x, ndigits)`` as Python gives it (``scale`` is ``10.0 ** ndigits``), without its decimal conversion.

    Python rounds the exact value of ``x`` half-to-even at ``ndigits`` decimals and reads the decimal back to the
    nearest double. Here ``y = x * scale`` is off the exact ``x * 10**ndigits`` by at most half an ulp of ``y``, so
    unless ``y`` lies within a few ulps of a half, its floor plus 0 or 1 is the integer Python rounds to, and the
    correctly rounded division by the exact ``scale`` is the nearest double to that decimal, as Python reads it.
    Near a half, negative, huge or not finite: Python's own ``round`` decides.
    """
    cdef double y, k, frac, slack
    if not isfinite(x) or x < 0.0:
        return _round(x, ndigits)
    y = x * scale
    if y >= 4503599627370496.0:  # 2**52: no fraction left to round
        return _round(x, ndigits)
    k = floor(y)
    frac = y - k
    slack = 4.0 * (nextafter(y, 1.0e300) - y)
    if fabs(frac - 0.5) <= slack:
        return _round(x, ndigits)
    if frac > 0.5:
        k += 1.0
    return k / scale


cdef inline object _ms(object seconds):
    return None if seconds is None else _rounded(<double>seconds * 1000.0, 3, 1000.0)


cdef class RecordRows:
    """Builds each record's row, line and stats, and sums its metrics until ``take_sums``."""
    cdef object _masker, _prices, _clock
    cdef Py_ssize_t _max_models
    cdef set _models
    cdef dict _counts, _pairs, _added
    cdef long long _second
    cdef object _second_text

    def __init__(self, masker, prices, clock=None, max_models=MAX_MODELS):
        self._masker = masker
        self._prices = prices
        self._clock = clock if clock is not None else IsoClock()
        self._max_models = max_models
        self._models = set()
        self._counts = {}
        self._pairs = {}
        self._added = {}
        self._second = -1
        self._second_text = ""

    cpdef tuple build(self, object rec, double wall_offset):
        """The record's log row, its JSON line (the row's doc) and its rollup stats; its metrics are summed."""
        cdef object usage = rec.usage
        if (rec.error is not None or rec.request_body is not None or rec.response_body is not None
                or rec.hooks is not None):
            return self._general(rec, wall_offset)
        if usage is None:
            if rec.usage_source == "estimated":
                return self._general(rec, wall_offset)
        elif type(usage) is not Usage:
            return self._general(rec, wall_offset)
        cdef double started = rec.started
        cdef double total_s = rec.total_s
        cdef double upstream_started = rec.upstream_started
        cdef double wall = started + wall_offset
        cdef double v
        cdef object upstream = None, added = None, up
        if upstream_started != 0.0:
            up = rec.upstream_s
            if up:
                upstream = up
            elif rec.stream and rec.ttft_s is not None:
                v = started + total_s - upstream_started
                upstream = v if v > 0.0 else _ZERO
        if not rec.retries and not rec.fallbacks:
            if upstream is not None:
                v = total_s - <double>upstream
                added = v if v > 0.0 else _ZERO
            elif upstream_started == 0.0:
                added = rec.total_s
        cdef object tin = 0, tout = 0, ttotal = 0
        if usage is not None:
            tin = usage.prompt_tokens or 0
            tout = usage.completion_tokens or 0
            ttotal = usage.total_tokens or 0
            if not isinstance(tin, int):
                tin = 0
            if not isinstance(tout, int):
                tout = 0
            if not isinstance(ttotal, int):
                ttotal = 0
            ttotal = ttotal or tin + tout
        cdef object provider = rec.provider, model = rec.model
        cdef object cost = self._prices.cost_usd(provider, model, tin, tout)
        entry = LogEntry(
            self._iso(wall), _rounded(wall, 6, 1000000.0), rec.trace_id, rec.span_id, rec.parent_span_id, rec.span_name,
            rec.workspace, rec.endpoint, provider, model, rec.status, rec.stream, _rounded(total_s * 1000.0, 3, 1000.0),
            _ms(upstream), _ms(added), _ms(rec.ttft_s), tin, tout, ttotal, rec.usage_source,
            _rounded(cost, 8, 100000000.0), rec.cache_status, rec.retries, rec.fallbacks, rec.breaker_opens, rec.target_path,
            rec.metadata, None, UNSET, UNSET, UNSET, UNSET, UNSET,
        )
        doc = encode_entry(entry)
        stats = RequestStats(wall, rec.workspace, provider, model, rec.status, rec.total_s * 1000,
                             None if added is None else added * 1000, tin, tout, cost)
        self._sum(rec, upstream, added, tin, tout, cost)
        return (wall, rec.workspace, rec.trace_id, rec.status, provider, model if isinstance(model, str) else None,
                doc), doc, stats

    cdef tuple _general(self, object rec, double wall_offset):
        d = Derived(rec, wall_offset, self._masker, self._prices)
        doc = encode_entry(build_entry(rec, d, self._masker, self._clock.iso))
        added_ms = None if d.added_s is None else d.added_s * 1000
        stats = RequestStats(d.wall_start, rec.workspace, rec.provider, rec.model, rec.status, rec.total_s * 1000,
                             added_ms, d.tokens_in, d.tokens_out, d.cost)
        self._sum(rec, d.upstream_s, d.added_s, d.tokens_in, d.tokens_out, d.cost)
        model = rec.model if isinstance(rec.model, str) else None
        return (d.wall_start, rec.workspace, rec.trace_id, rec.status, rec.provider, model, doc), doc, stats

    cdef object _iso(self, double ts):
        cdef long long second = <long long>ts
        if second != self._second:
            self._second = second
            self._second_text = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        return self._second_text + <str>_MILLIS[<int>((ts - second) * 1000)]

    def take_sums(self):
        """Hand over (and forget) the sums since the last call."""
        counts, self._counts = self._counts, {}
        cdef dict hists = {}
        cdef _PairHists ph
        cdef _Hist h
        for pair, ph in self._pairs.items():
            if ph.request.seen:
                hists[(REQUEST_SECONDS, pair)] = ph.request.taken()
            if ph.upstream.seen:
                hists[(UPSTREAM_SECONDS, pair)] = ph.upstream.taken()
            if ph.ttft.seen:
                hists[(TTFT_SECONDS, pair)] = ph.ttft.taken()
        for endpoint, h in self._added.items():
            hists[(ADDED_SECONDS, (endpoint,))] = h.taken()
        self._pairs = {}
        self._added = {}
        return counts, hists

    # -- the metric sums ---------------------------------------------------------------------------------------
    cdef object _model_label(self, object model):
        if not model:
            return ""
        if model in self._models:
            return model
        if len(self._models) >= self._max_models:
            return "other"
        self._models.add(model)
        return model

    cdef inline void _add(self, object metric, tuple labels, object amount) except *:
        key = (metric, labels)
        counts = self._counts
        counts[key] = counts.get(key, 0.0) + amount

    cdef void _sum(self, object rec, object upstream, object added, object tin, object tout, object cost) except *:
        endpoint = rec.endpoint
        provider = rec.provider or ""
        model = self._model_label(rec.model)
        self._add(REQUESTS, (endpoint, provider, model, str(rec.status), rec.cache_status or ""), 1.0)
        pair = (endpoint, provider)
        cdef _PairHists ph = self._pairs.get(pair)
        if ph is None:
            ph = self._pairs[pair] = _PairHists()
        ph.request.observe(rec.total_s)
        if upstream is not None:
            ph.upstream.observe(upstream)
        cdef _Hist h
        if added is not None:
            h = self._added.get(endpoint)
            if h is None:
                h = self._added[endpoint] = _Hist(ADDED_BOUNDS)
            h.observe(added)
        ttft = rec.ttft_s
        if ttft is not None:
            ph.ttft.observe(ttft)
        if rec.retries:
            self._add(RETRIES, pair, rec.retries)
        if rec.fallbacks:
            self._add(FALLBACKS, (endpoint,), rec.fallbacks)
        if rec.breaker_opens:
            self._add(BREAKER_OPENS, (endpoint,), rec.breaker_opens)
        if tin:
            self._add(TOKENS, (provider, model, "input", rec.usage_source), tin)
        if tout:
            self._add(TOKENS, (provider, model, "output", rec.usage_source), tout)
        if cost:
            self._add(COST, (provider, model), cost)
