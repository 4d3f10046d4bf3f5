"""Aggregates of the request logs: what the last 15 minutes / hour / day report (totals, series, per provider and
model) from the rollups written beside the logs, with percentiles within a bucket's width of the exact ones."""

from __future__ import annotations

import random

import pytest

from gateway.observability.aggregates import report
from gateway.observability.rollups import BUCKETS_PER_OCTAVE, RequestStats, RollupStore

NOW = 1_800_000_000.0  # a fixed clock, on a 15-minute boundary plus change
WIDTH = 2 ** (1 / BUCKETS_PER_OCTAVE)


def stats(ts: float, status: int = 200, latency: float = 10.0, added: float | None = 1.0, provider: str = "vendorA",
          model: str = "gpt-4o-mini", workspace: str = "default", tokens: tuple[int, int] = (10, 20),
          cost: float = 0.001) -> RequestStats:
    return RequestStats(ts, workspace, provider, model, status, latency, added, tokens[0], tokens[1], cost)


@pytest.fixture
def store(tmp_path):
    rollups = RollupStore(str(tmp_path / "logs.db"))
    yield rollups
    rollups.close()


def test_totals_count_every_request_with_rates_errors_tokens_and_cost(store):
    batch = [stats(NOW - 30 - i) for i in range(90)] + [stats(NOW - 20, status=500), stats(NOW - 20, status=429)]
    store.add(batch, now=NOW)
    got = report(store, "15m", None, now=NOW)
    t = got.totals
    assert t.requests == 92 and t.errors == 2
    assert t.by_status == {"200": 90, "429": 1, "500": 1}
    assert t.error_rate == pytest.approx(2 / 92, abs=1e-4)
    assert t.prompt_tokens == 920 and t.completion_tokens == 1840 and t.total_tokens == 2760
    assert t.cost_usd == pytest.approx(0.092)
    assert t.requests_per_second == pytest.approx(92 / (NOW - got.start), rel=0.01)
    assert t.latency_avg_ms == pytest.approx(10.0) and t.added_avg_ms == pytest.approx(1.0)
    assert got.window == "15m" and got.slot_seconds == 10 and len(got.series.t) == 90


def test_percentiles_are_within_a_bucket_of_the_exact_values(store):
    rng = random.Random(7)
    latencies = [rng.lognormvariate(3, 1) for _ in range(5000)]
    added = [rng.uniform(0.2, 3.0) for _ in range(5000)]
    store.add([stats(NOW - 100, latency=lat, added=a) for lat, a in zip(latencies, added)], now=NOW)
    t = report(store, "1h", None, now=NOW).totals
    ordered, ordered_added = sorted(latencies), sorted(added)
    for got, exact in ((t.latency_p50_ms, ordered[2499]), (t.latency_p99_ms, ordered[4949]),
                       (t.added_p50_ms, ordered_added[2499]), (t.added_p99_ms, ordered_added[4949])):
        assert exact / WIDTH <= got <= exact * WIDTH


def test_requests_without_an_added_latency_do_not_count_in_it(store):
    store.add([stats(NOW - 5, added=None, latency=50.0), stats(NOW - 5, added=2.0, latency=10.0)], now=NOW)
    t = report(store, "15m", None, now=NOW).totals
    assert t.requests == 2 and t.added_avg_ms == pytest.approx(2.0)
    assert 2.0 / WIDTH <= t.added_p99_ms <= 2.0 * WIDTH


def test_each_window_reads_its_own_span_and_slot_size(store):
    store.add([stats(NOW - 60), stats(NOW - 1800), stats(NOW - 20_000), stats(NOW - 90_000)], now=NOW)
    assert report(store, "15m", None, now=NOW).totals.requests == 1
    assert report(store, "1h", None, now=NOW).totals.requests == 2
    day = report(store, "1d", None, now=NOW)
    assert day.totals.requests == 3 and day.slot_seconds == 900 and len(day.series.t) == 96
    hour = report(store, "1h", None, now=NOW)
    assert hour.slot_seconds == 60 and len(hour.series.t) == 60
    assert sum(r * 60 for r in hour.series.requests_per_second[:-1]) == pytest.approx(2, abs=0.1)


def test_series_put_each_request_in_its_slot(store):
    store.add([stats(NOW - 25, status=503), stats(NOW - 25), stats(NOW - 125, status=404)], now=NOW)
    got = report(store, "15m", None, now=NOW)
    series = got.series
    by_slot = dict(zip(series.t, zip(series.errors_4xx, series.errors_5xx, series.tokens)))
    slot = int((NOW - 25) // 10 * 10)
    assert by_slot[slot] == (0, 1, 60)
    assert by_slot[int((NOW - 125) // 10 * 10)] == (1, 0, 30)
    assert sum(series.errors_4xx) == 1 and sum(series.errors_5xx) == 1
    i = series.t.index(slot)
    assert series.error_rate[i] == 0.5 and series.latency_p50_ms[i] is not None
    assert series.latency_p50_ms[0] is None  # an empty slot has no percentile


def test_groups_split_by_provider_and_model_busiest_first(store):
    batch = [stats(NOW - 10, provider="anthropic", model="claude") for _ in range(3)]
    batch += [stats(NOW - 10, provider="vendorA", model="gpt-4o") for _ in range(5)]
    batch += [stats(NOW - 10, provider="vendorA", model="gpt-4o", status=502)]
    store.add(batch, now=NOW)
    groups = report(store, "15m", None, now=NOW).groups
    assert [(g.provider, g.model, g.requests) for g in groups] == [("vendorA", "gpt-4o", 6),
                                                                   ("anthropic", "claude", 3)]
    assert groups[0].by_status == {"200": 5, "502": 1} and groups[0].errors == 1
    assert 10 / WIDTH <= groups[1].latency_p99_ms <= 10 * WIDTH and groups[1].added_p50_ms is not None


def test_a_workspace_sees_only_its_own_requests(store):
    store.add([stats(NOW - 10, workspace="a"), stats(NOW - 10, workspace="b"), stats(NOW - 10, workspace="b")],
              now=NOW)
    assert report(store, "15m", "a", now=NOW).totals.requests == 1
    assert report(store, "15m", "b", now=NOW).totals.requests == 2
    assert report(store, "15m", None, now=NOW).totals.requests == 3


def test_batches_add_up_and_histograms_merge(store):
    for i in range(10):
        store.add([stats(NOW - 10, latency=1.0 + i)], now=NOW)
    t = report(store, "15m", None, now=NOW).totals
    assert t.requests == 10
    assert 10.0 / WIDTH <= t.latency_p99_ms <= 10.0 * WIDTH and 5.0 / WIDTH <= t.latency_p50_ms <= 5.0 * WIDTH


def test_a_provider_or_model_narrows_totals_series_and_groups(store):
    batch = [stats(NOW - 25, provider="anthropic", model="claude", latency=100.0) for _ in range(3)]
    batch += [stats(NOW - 25, provider="vendorA", model="gpt-4o", latency=5.0, status=500)]
    batch += [stats(NOW - 25, provider="vendorA", model="gpt-4o-mini", latency=5.0)]
    store.add(batch, now=NOW)
    claude = report(store, "15m", None, now=NOW, provider="anthropic", model="claude")
    assert claude.totals.requests == 3 and [g.model for g in claude.groups] == ["claude"]
    assert 100 / WIDTH <= claude.totals.latency_p50_ms <= 100 * WIDTH
    i = claude.series.t.index(int((NOW - 25) // 10 * 10))
    assert 100 / WIDTH <= claude.series.latency_p50_ms[i] <= 100 * WIDTH and claude.series.tokens[i] == 90
    assert (claude.provider, claude.model) == ("anthropic", "claude")
    vendor = report(store, "15m", None, now=NOW, provider="vendorA")
    assert vendor.totals.requests == 2 and vendor.totals.errors == 1 and len(vendor.groups) == 2
    assert sum(vendor.series.errors_5xx) == 1
    assert report(store, "15m", None, now=NOW, model="gpt-4o").totals.requests == 1
