"""Tests for gateway/observability/recordrow.py and its compiled twin: what the recorder keeps of each finished
request (the log row, its JSON line, the rollup stats, the metric sums), the same from both twins to the bit."""

from __future__ import annotations

import math
from types import ModuleType

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.observability import recordrow as pure_recordrow
from gateway.observability.cost import Prices
from gateway.observability.masking import Masker
from gateway.observability.metrics import ADDED_SECONDS, COST, REQUEST_SECONDS, REQUESTS, TOKENS, TTFT_SECONDS
from gateway.observability.record import RequestRecord
from gateway.schema.common import Usage
from tests.support.twins import compiled_twin

WALL = 1_795_785_000.0


@pytest.fixture(params=["pure", "compiled"])
def twin(request: pytest.FixtureRequest) -> ModuleType:
    return pure_recordrow if request.param == "pure" else compiled_twin("recordrow")


def rows(twin: ModuleType, max_models: int = 500) -> object:
    return twin.RecordRows(Masker(()), Prices(), max_models=max_models)


def chat(trace: str = "t-1", **fields: object) -> RequestRecord:
    rec = RequestRecord(trace, "chat.completions", 100.0)
    rec.workspace, rec.provider, rec.model, rec.status = "default", "vendorA", "gpt-4o-mini", 200
    rec.upstream_started, rec.upstream_s, rec.total_s = 100.0002, 0.0009, 0.0012
    rec.usage, rec.usage_source, rec.target_path = Usage(1000, 500, 1500), "reported", "targets[0]"
    for name, value in fields.items():
        setattr(rec, name, value)
    return rec


def test_a_successful_chat_becomes_its_row_line_and_stats(twin: ModuleType) -> None:
    row, line, stats = rows(twin).build(chat(), WALL - 100.0)
    entry = msgspec.json.decode(line)
    assert row == (WALL, "default", "t-1", 200, "vendorA", "gpt-4o-mini", line)
    assert entry["time"] == "2026-11-27T13:10:00.000Z" and entry["timestamp"] == WALL
    assert (entry["latency_ms"], entry["upstream_latency_ms"], entry["gateway_latency_ms"]) == (1.2, 0.9, 0.3)
    assert (entry["prompt_tokens"], entry["completion_tokens"], entry["total_tokens"]) == (1000, 500, 1500)
    assert entry["cost_usd"] == pytest.approx(0.00045)  # gpt-4o-mini: 0.15 / 0.60 USD per 1M tokens
    assert "request_headers" not in entry and "hook_results" not in entry
    assert (stats.ts, stats.model, stats.latency_ms, stats.tokens_in, stats.tokens_out) == (
        WALL, "gpt-4o-mini", 1.2, 1000, 500)
    assert stats.added_ms == pytest.approx(0.3)


def test_metric_sums_count_requests_latency_tokens_and_cost_until_taken(twin: ModuleType) -> None:
    builder = rows(twin)
    builder.build(chat(), 0.0)
    builder.build(chat("t-2", stream=True, ttft_s=0.3, total_s=2.0, upstream_s=1.9), 0.0)
    counts, hists = builder.take_sums()
    assert counts[(REQUESTS, ("chat.completions", "vendorA", "gpt-4o-mini", "200", "DISABLED"))] == 2.0
    assert counts[(TOKENS, ("vendorA", "gpt-4o-mini", "input", "reported"))] == 2000.0
    assert counts[(COST, ("vendorA", "gpt-4o-mini"))] == pytest.approx(0.0009)
    buckets, total = hists[(REQUEST_SECONDS, ("chat.completions", "vendorA"))]
    assert sum(buckets) == 2 and total == pytest.approx(2.0012)
    assert buckets[0] == 1 and buckets[8] == 1  # <= 5 ms, and <= 2.5 s
    assert sum(hists[(TTFT_SECONDS, ("chat.completions", "vendorA"))][0]) == 1
    assert sum(hists[(ADDED_SECONDS, ("chat.completions",))][0]) == 2
    assert builder.take_sums() == ({}, {})


def test_models_past_the_label_limit_are_counted_as_other(twin: ModuleType) -> None:
    builder = rows(twin, max_models=2)
    for model in ("a", "b", "c", "a"):
        builder.build(chat(model=model, usage=None), 0.0)
    counts, _ = builder.take_sums()
    models = {labels[2]: n for (metric, labels), n in counts.items() if metric is REQUESTS}
    assert models == {"a": 2.0, "b": 1.0, "other": 1.0}


def test_a_failed_request_logs_its_masked_headers_and_scrubs_the_secret_from_the_error(twin: ModuleType) -> None:
    rec = chat(status=502, error="upstream refused key sk-secret-0123456789abcdef", usage=None,
               request_headers=[(b"authorization", b"Bearer sk-secret-0123456789abcdef")])
    _, line, _ = rows(twin).build(rec, 0.0)
    entry = msgspec.json.decode(line)
    assert "sk-secret-0123456789abcdef" not in line.decode()
    assert entry["status"] == 502 and "authorization" in entry["request_headers"]


# --- the twins agree on any record -----------------------------------------------------------------------------

_seconds = st.one_of(st.floats(0, 400, allow_nan=False), st.floats(0, 1e-3), st.sampled_from([0.0, 0.0005, 1.0]))
_optional = st.one_of(st.none(), _seconds)
_usage = st.one_of(
    st.none(),
    st.builds(Usage, st.integers(0, 10**7), st.integers(0, 10**7), st.integers(0, 10**7)),
    st.fixed_dictionaries({"input_tokens": st.integers(0, 9999), "output_tokens": st.integers(0, 9999)}),
    st.fixed_dictionaries({"images": st.integers(1, 4)}),
)
_text = st.one_of(st.none(), st.text(max_size=12))


@st.composite
def records(draw: st.DrawFn) -> RequestRecord:
    rec = RequestRecord(draw(st.text(min_size=1, max_size=8)), draw(st.sampled_from(["chat.completions",
                                                                                     "embeddings"])),
                        draw(st.floats(0, 1e5, allow_nan=False)))
    rec.workspace, rec.provider, rec.span_id = draw(_text), draw(st.sampled_from([None, "vendorA", "anthropic"])), \
        draw(_text)
    rec.model = draw(st.sampled_from([None, "", "gpt-4o-mini", "claude-3-5-sonnet-20241022", "unknown-model", 7]))
    rec.status, rec.stream = draw(st.sampled_from([200, 429, 502])), draw(st.booleans())
    rec.upstream_started = draw(st.sampled_from([0.0, rec.started + 0.0001]))
    rec.upstream_s, rec.total_s, rec.ttft_s = draw(_seconds), draw(_seconds), draw(_optional)
    rec.usage = draw(_usage)
    rec.usage_source = draw(st.sampled_from(["reported", "none", "estimated"]))
    rec.retries, rec.fallbacks, rec.breaker_opens = (draw(st.integers(0, 2)) for _ in range(3))
    rec.cache_status = draw(st.sampled_from(["DISABLED", "HIT", "MISS", ""]))
    rec.metadata = draw(st.one_of(st.none(), st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=2)))
    rec.error = draw(st.sampled_from([None, None, None, "upstream said no"]))
    rec.response_body = draw(st.sampled_from([None, None, None, b'{"id": "x"}']))
    if rec.usage_source == "estimated" and rec.usage is None:
        rec.request = {"messages": [{"role": "user", "content": "hello there"}]}
        rec.answer = draw(st.one_of(st.none(), st.just(b'{"choices":[{"message":{"content":"hi you"}}]}')))
    return rec


@settings(max_examples=300, deadline=None)
@given(st.lists(records(), min_size=1, max_size=6), st.floats(0, 2e9, allow_nan=False))
def test_the_twins_build_the_same_rows_lines_stats_and_sums(batch: list[RequestRecord], offset: float) -> None:
    compiled = compiled_twin("recordrow")
    pure_rows, compiled_rows = rows(pure_recordrow, max_models=2), rows(compiled, max_models=2)
    for rec in batch:
        assert _outcome(compiled_rows, rec, offset) == _outcome(pure_rows, rec, offset)
    assert compiled_rows.take_sums() == pure_rows.take_sums()


def _outcome(builder: object, rec: RequestRecord, offset: float) -> object:
    """What ``build`` gives, or the error it raises (a record the recorder then counts as not logged)."""
    try:
        return builder.build(rec, offset)  # type: ignore[attr-defined]
    except Exception as exc:  # noqa: BLE001 - compared, not handled
        return type(exc), str(exc)


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.floats(0, 1e4, allow_nan=False), st.integers(0, 10**9).map(lambda n: (n + 0.5) / 10**6),
                 st.floats(min_value=0, max_value=1e-6)))
def test_the_compiled_figures_round_as_python_does(seconds: float) -> None:
    """The compiled twin rounds latencies and timestamps without Python's decimal conversion: same result."""
    rec = chat(total_s=seconds, upstream_started=0.0, usage=None)
    _, line, _ = rows(compiled_twin("recordrow")).build(rec, seconds)
    entry = msgspec.json.decode(line)
    assert entry["latency_ms"] == round(seconds * 1000, 3) == entry["gateway_latency_ms"]
    assert entry["timestamp"] == round(100.0 + seconds, 6)
    assert not math.isnan(entry["latency_ms"])
