"""Settings read from GATEWAY_* variables: the guardrail pool settings and their bounds."""

from __future__ import annotations

import pytest

from gateway.settings import load


def test_guardrail_settings_are_read_with_defaults():
    defaults = load({})
    assert (defaults.guardrail_workers, defaults.guardrail_queue, defaults.guardrail_async_max) == (2, 64, 256)
    chosen = load({"GATEWAY_GUARDRAIL_WORKERS": "4", "GATEWAY_GUARDRAIL_QUEUE": "8",
                   "GATEWAY_GUARDRAIL_ASYNC_MAX": "16"})
    assert (chosen.guardrail_workers, chosen.guardrail_queue, chosen.guardrail_async_max) == (4, 8, 16)


@pytest.mark.parametrize("var", ["GATEWAY_GUARDRAIL_WORKERS", "GATEWAY_GUARDRAIL_QUEUE", "GATEWAY_GUARDRAIL_ASYNC_MAX"])
def test_guardrail_settings_below_one_are_refused(var):
    with pytest.raises(ValueError) as info:
        load({var: "0"})
    assert var in str(info.value)
