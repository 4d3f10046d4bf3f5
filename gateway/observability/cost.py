"""Request cost from the price table shipped with the package (``prices.json``: USD per 1M input/output tokens).

The table holds public list prices (standard tier: no batch, cached-input or long-context prices); its ``_about``
member says where they come from and when they were last checked. A model is matched exactly first, then by the
longest listed name it starts with, so dated snapshots (``gpt-4o-2024-08-06``, ``claude-3-5-sonnet-20241022``)
price as their family. A provider may inherit another's rows (``cloudB`` serves the vendorA models). A model the
table does not know, or a provider without a table, costs 0; each such (provider, model) is reported once per
worker (``Prices``, owned by its runtime): a warning log line and one count of
``gateway_cost_unknown_models_total{provider}``.

Budgets count cost in micro-dollars (integers): a price in USD per 1M tokens is exactly micro-dollars per token.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import TYPE_CHECKING

from gateway.bounded_cache import BoundedCache

if TYPE_CHECKING:
    from gateway.observability.metrics import Metrics

log = logging.getLogger("gateway.cost")

TABLE_PATH = Path(__file__).with_name("prices.json")
MICROS_PER_USD = 1_000_000


def _load(path: Path) -> tuple[dict[str, dict[str, tuple[float, float]]], dict]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    own = {provider: {model: (float(p[0]), float(p[1])) for model, p in rows.items()}
           for provider, rows in doc["providers"].items()}
    prices: dict[str, dict[str, tuple[float, float]]] = {}
    for provider, rows in own.items():
        merged: dict[str, tuple[float, float]] = {}
        for parent in doc.get("inherits", {}).get(provider, ()):
            merged.update(own.get(parent, {}))
        merged.update(rows)
        prices[provider] = merged
    return prices, doc.get("_about", {})


#: provider -> model -> (USD per 1M input tokens, USD per 1M output tokens)
PRICES, ABOUT = _load(TABLE_PATH)

_ZERO = (0.0, 0.0)
_BY_LENGTH: dict[str, list[str]] = {p: sorted(t, key=len, reverse=True) for p, t in PRICES.items()}
#: (provider, model) answers remembered per Prices
CACHE_MAX = 4096
#: unknown (provider, model) pairs reported per Prices; later ones are not reported
REPORTED_MAX = 10_000


class Prices:
    """The price table's answers, remembered per (provider, model); an unknown model reported once. One per worker
    runtime, shared by the recorder (request costs) and the policy gate (cost limits)."""

    def __init__(self, max_entries: int = CACHE_MAX, metrics: Metrics | None = None) -> None:
        #: where unknown models are counted (made on the first one when none is given)
        self.metrics = metrics
        self._resolved: BoundedCache[tuple[str, str], tuple[float, float]] = BoundedCache(max_entries)
        self._reported: set[tuple[str, str]] = set()

    def price(self, provider: str | None, model: str | None) -> tuple[float, float]:
        """(input, output) USD per 1M tokens for this model at this provider; (0, 0) when unknown (reported once)."""
        if not provider or not model:
            return _ZERO
        key = (provider, model)
        hit = self._resolved.get(key)
        if hit is not None:
            return hit
        table = PRICES.get(provider)
        found = _ZERO
        if table is not None:
            found = table.get(model) or next((table[n] for n in _BY_LENGTH[provider] if model.startswith(n)), _ZERO)
        if found is _ZERO:
            self._report_unknown(key)
        return self._resolved.put(key, found)

    def _report_unknown(self, key: tuple[str, str]) -> None:
        if key in self._reported or len(self._reported) >= REPORTED_MAX:
            return
        self._reported.add(key)
        provider, model = key
        log.warning("no price for model %r of provider %r in the price table: its requests cost 0", model, provider)
        from gateway.observability.metrics import UNKNOWN_MODELS, Metrics

        if self.metrics is None:
            self.metrics = Metrics()
        self.metrics.count(UNKNOWN_MODELS, (provider,))

    def cost_usd(self, provider: str | None, model: str | None, input_tokens: int, output_tokens: int) -> float:
        """The estimated cost in USD of one request's tokens."""
        if not input_tokens and not output_tokens:
            return 0.0
        per_in, per_out = self.price(provider, model)
        return (input_tokens * per_in + output_tokens * per_out) / 1_000_000

    def cost_micros(self, provider: str | None, model: str | None, input_tokens: int, output_tokens: int) -> int:
        """The cost in micro-dollars (rounded up) of one request's tokens: what cost budgets count."""
        if not input_tokens and not output_tokens:
            return 0
        per_in, per_out = self.price(provider, model)
        return max(0, math.ceil(input_tokens * per_in + output_tokens * per_out - 1e-9))
