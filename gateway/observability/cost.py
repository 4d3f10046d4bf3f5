"""Estimated request cost: a small table of list prices (USD per 1M input/output tokens) for well-known models.

The prices are public list prices at the time of writing, for estimation only (no batch, cached-input or
long-context tiers). A model is matched exactly first, then by the longest table name it starts with, so dated
snapshots (``gpt-4o-2024-08-06``, ``claude-3-5-sonnet-20241022``) price as their family. A model the table does
not know, or a provider without a table, costs 0.
"""

from __future__ import annotations

# USD per 1M tokens: (input, output)
_VENDOR_A: dict[str, tuple[float, float]] = {
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4-turbo": (10.00, 30.00),
    "gpt-3.5-turbo": (0.50, 1.50),
    "o1": (15.00, 60.00),
    "o1-mini": (1.10, 4.40),
    "o3-mini": (1.10, 4.40),
    "text-embedding-3-small": (0.02, 0.0),
    "text-embedding-3-large": (0.13, 0.0),
    "text-embedding-ada-002": (0.10, 0.0),
}
_ANTHROPIC: dict[str, tuple[float, float]] = {
    "claude-opus-4": (15.00, 75.00),
    "claude-sonnet-4": (3.00, 15.00),
    "claude-3-7-sonnet": (3.00, 15.00),
    "claude-3-5-sonnet": (3.00, 15.00),
    "claude-3-5-haiku": (0.80, 4.00),
    "claude-3-opus": (15.00, 75.00),
    "claude-3-haiku": (0.25, 1.25),
}
_CLOUD_A: dict[str, tuple[float, float]] = {
    "anthropic.claude-3-5-sonnet": (3.00, 15.00),
    "anthropic.claude-3-5-haiku": (0.80, 4.00),
    "anthropic.claude-3-haiku": (0.25, 1.25),
    "amazon.nova-pro": (0.80, 3.20),
    "amazon.nova-lite": (0.06, 0.24),
    "amazon.nova-micro": (0.035, 0.14),
    "amazon.titan-embed-text-v2": (0.02, 0.0),
}
_CLOUD_C: dict[str, tuple[float, float]] = {
    "gemini-2.5-pro": (1.25, 10.00),
    "gemini-2.5-flash": (0.30, 2.50),
    "gemini-2.0-flash": (0.10, 0.40),
    "gemini-1.5-pro": (1.25, 5.00),
    "gemini-1.5-flash": (0.075, 0.30),
}
_GROQ: dict[str, tuple[float, float]] = {
    "llama-3.3-70b-versatile": (0.59, 0.79),
    "llama-3.1-8b-instant": (0.05, 0.08),
}
_MISTRAL: dict[str, tuple[float, float]] = {
    "mistral-large": (2.00, 6.00),
    "mistral-small": (0.20, 0.60),
}
_DEEPSEEK: dict[str, tuple[float, float]] = {
    "deepseek-chat": (0.27, 1.10),
    "deepseek-reasoner": (0.55, 2.19),
}
_COHERE: dict[str, tuple[float, float]] = {
    "command-r-plus": (2.50, 10.00),
    "command-r": (0.15, 0.60),
    "embed-english-v3.0": (0.10, 0.0),
}

#: provider -> model -> (USD per 1M input tokens, USD per 1M output tokens)
PRICES: dict[str, dict[str, tuple[float, float]]] = {
    "vendorA": _VENDOR_A,
    "cloudB": _VENDOR_A,  # the same models, deployed in the cloud
    "anthropic": _ANTHROPIC,
    "cloudA": _CLOUD_A,
    "cloudC": {**_CLOUD_C, **_ANTHROPIC},
    "groq": _GROQ,
    "mistral-ai": _MISTRAL,
    "deepseek": _DEEPSEEK,
    "cohere": _COHERE,
}

_ZERO = (0.0, 0.0)
_resolved: dict[tuple[str, str], tuple[float, float]] = {}
_by_length: dict[str, list[str]] = {p: sorted(t, key=len, reverse=True) for p, t in PRICES.items()}


def price(provider: str | None, model: str | None) -> tuple[float, float]:
    """(input, output) USD per 1M tokens for this model at this provider; (0, 0) when unknown."""
    if not provider or not model:
        return _ZERO
    key = (provider, model)
    hit = _resolved.get(key)
    if hit is not None:
        return hit
    table = PRICES.get(provider)
    found = _ZERO
    if table is not None:
        found = table.get(model) or next((table[n] for n in _by_length[provider] if model.startswith(n)), _ZERO)
    if len(_resolved) > 4096:
        _resolved.clear()
    _resolved[key] = found
    return found


def cost_usd(provider: str | None, model: str | None, input_tokens: int, output_tokens: int) -> float:
    """The estimated cost in USD of one request's tokens."""
    if not input_tokens and not output_tokens:
        return 0.0
    per_in, per_out = price(provider, model)
    return (input_tokens * per_in + output_tokens * per_out) / 1_000_000
