"""The price table: known models cost their list price, dated snapshots price as their family, unknown ones 0."""

from __future__ import annotations

import pytest

from gateway.observability.cost import PRICES, Prices


def test_a_known_model_costs_its_list_price_per_million_tokens():
    cost_usd = Prices().cost_usd
    per_in, per_out = PRICES["vendorA"]["gpt-4o"]
    assert cost_usd("vendorA", "gpt-4o", 1_000_000, 0) == pytest.approx(per_in)
    assert cost_usd("vendorA", "gpt-4o", 2_000, 1_000) == pytest.approx((2_000 * per_in + 1_000 * per_out) / 1e6)


def test_dated_snapshots_price_as_their_family_and_the_longest_name_wins():
    price = Prices().price
    assert price("anthropic", "claude-3-5-sonnet-20241022") == PRICES["anthropic"]["claude-3-5-sonnet"]
    assert price("vendorA", "gpt-4o-mini-2024-07-18") == PRICES["vendorA"]["gpt-4o-mini"]
    assert price("vendorA", "gpt-4o-2024-08-06") == PRICES["vendorA"]["gpt-4o"]


def test_unknown_models_and_providers_cost_nothing():
    cost_usd = Prices().cost_usd
    assert cost_usd("vendorA", "my-fine-tune", 1000, 1000) == 0.0
    assert cost_usd("ollama", "llama3", 1000, 1000) == 0.0
    assert cost_usd(None, None, 1000, 1000) == 0.0
    assert cost_usd("vendorA", "gpt-4o", 0, 0) == 0.0


def test_the_table_is_the_shipped_data_file_with_its_source_and_date():
    from gateway.observability.cost import ABOUT, TABLE_PATH

    assert TABLE_PATH.name == "prices.json" and TABLE_PATH.exists()
    assert ABOUT["source"] and ABOUT["updated"][:2] == "20"
    assert PRICES["cloudB"]["gpt-4o"] == PRICES["vendorA"]["gpt-4o"]  # cloudB inherits the vendorA rows
    assert PRICES["cloudC"]["claude-3-haiku"] == PRICES["anthropic"]["claude-3-haiku"]


def test_budgets_count_micro_dollars_rounded_up():
    cost_micros = Prices().cost_micros
    per_in, per_out = PRICES["vendorA"]["gpt-4o-mini"]
    assert cost_micros("vendorA", "gpt-4o-mini", 1000, 100) == round(1000 * per_in + 100 * per_out)
    assert cost_micros("vendorA", "gpt-4o", 1, 0) == 3  # 2.5 micro-dollars, rounded up
    assert cost_micros("vendorA", "gpt-4o", 0, 0) == 0


def test_an_unknown_model_is_reported_once(caplog):
    from gateway.observability.metrics import UNKNOWN_MODELS, Metrics

    metrics = Metrics()
    prices = Prices(metrics=metrics)
    model = "never-priced-model-x1"
    with caplog.at_level("WARNING", logger="gateway.cost"):
        for _ in range(3):
            assert prices.price("vendorA", model) == (0.0, 0.0)
        prices.cost_usd("vendorA", model, 10, 10)
    assert sum(model in r.getMessage() for r in caplog.records) == 1
    assert metrics.pending(UNKNOWN_MODELS, ("vendorA",)) == 1
