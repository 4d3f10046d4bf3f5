"""The price table: known models cost their list price, dated snapshots price as their family, unknown ones 0."""

from __future__ import annotations

import pytest

from gateway.observability.cost import PRICES, cost_usd, price


def test_a_known_model_costs_its_list_price_per_million_tokens():
    per_in, per_out = PRICES["vendorA"]["gpt-4o"]
    assert cost_usd("vendorA", "gpt-4o", 1_000_000, 0) == pytest.approx(per_in)
    assert cost_usd("vendorA", "gpt-4o", 2_000, 1_000) == pytest.approx((2_000 * per_in + 1_000 * per_out) / 1e6)


def test_dated_snapshots_price_as_their_family_and_the_longest_name_wins():
    assert price("anthropic", "claude-3-5-sonnet-20241022") == PRICES["anthropic"]["claude-3-5-sonnet"]
    assert price("vendorA", "gpt-4o-mini-2024-07-18") == PRICES["vendorA"]["gpt-4o-mini"]
    assert price("vendorA", "gpt-4o-2024-08-06") == PRICES["vendorA"]["gpt-4o"]


def test_unknown_models_and_providers_cost_nothing():
    assert cost_usd("vendorA", "my-fine-tune", 1000, 1000) == 0.0
    assert cost_usd("ollama", "llama3", 1000, 1000) == 0.0
    assert cost_usd(None, None, 1000, 1000) == 0.0
    assert cost_usd("vendorA", "gpt-4o", 0, 0) == 0.0
