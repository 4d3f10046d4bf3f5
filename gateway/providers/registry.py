"""Provider name -> adapter: the accepted names, the vendorA-compatible catalogue (a table) and the others.

Names are case-sensitive; an unknown name is a 400 that names it. Adapters are created once per process on first
use.
"""

from __future__ import annotations

import importlib

from gateway.http.errors import InvalidRequest
from gateway.providers.base import (
    BATCHES,
    CHAT,
    COMPLETIONS,
    EMBEDDINGS,
    FILES,
    MODERATIONS,
    RESOURCES,
    ProviderAdapter,
)
from gateway.providers.vendorA import VendorAAdapter

_ALL_VENDOR_A = frozenset({CHAT, COMPLETIONS, EMBEDDINGS, MODERATIONS})
_CHAT_ONLY = frozenset({CHAT, COMPLETIONS})
_CHAT_EMBED = frozenset({CHAT, COMPLETIONS, EMBEDDINGS})

#: Long-running resources (files, batches, fine-tuning jobs, stored responses) are forwarded only to providers that
#: serve them in the vendorA wire format under their vendorA-compatible base: vendorA (all four), groq (files and
#: batches), mistral-ai (files). cloudB serves all four on resource deployments (its own adapter). Every other
#: provider answers 400 naming the provider.

#: vendorA-compatible providers: name -> (default base URL, endpoints). Local servers (ollama, vllm, lm-studio)
#: listen on loopback: reach them with custom_host and GATEWAY_ALLOW_PRIVATE_HOSTS.
VENDOR_A_COMPATIBLE: dict[str, tuple[str, frozenset[str]]] = {
    "vendorA": ("https://api.openai.com/v1", _ALL_VENDOR_A | RESOURCES),
    "groq": ("https://api.groq.com/openai/v1", _CHAT_ONLY | {FILES, BATCHES}),
    "together-ai": ("https://api.together.xyz/v1", _CHAT_EMBED),
    "fireworks-ai": ("https://api.fireworks.ai/inference/v1", _CHAT_EMBED),
    "deepinfra": ("https://api.deepinfra.com/v1/openai", _CHAT_EMBED),
    "mistral-ai": ("https://api.mistral.ai/v1", _CHAT_EMBED | {FILES}),
    "deepseek": ("https://api.deepseek.com/v1", _CHAT_ONLY),
    "perplexity-ai": ("https://api.perplexity.ai", frozenset({CHAT})),
    "openrouter": ("https://openrouter.ai/api/v1", _CHAT_ONLY),
    "x-ai": ("https://api.x.ai/v1", _CHAT_EMBED),
    "cerebras": ("https://api.cerebras.ai/v1", _CHAT_ONLY),
    "sambanova": ("https://api.sambanova.ai/v1", _CHAT_ONLY),
    "nebius": ("https://api.studio.nebius.ai/v1", _CHAT_EMBED),
    "lambda": ("https://api.lambdalabs.com/v1", _CHAT_ONLY),
    "ollama": ("http://localhost:11434/v1", _CHAT_EMBED),
    "vllm": ("http://localhost:8000/v1", _CHAT_EMBED),
    "lm-studio": ("http://localhost:1234/v1", _CHAT_EMBED),
}

#: providers with their own wire format: name -> "module:Class"
NATIVE: dict[str, str] = {
    "anthropic": "gateway.providers.anthropic:AnthropicAdapter",
    "cloudA": "gateway.providers.cloudA:CloudAAdapter",
    "cloudB": "gateway.providers.cloudB:CloudBAdapter",
    "cloudC": "gateway.providers.cloudC:CloudCAdapter",
    "cohere": "gateway.providers.cohere:CohereAdapter",
    "voyage": "gateway.providers.voyage:VoyageAdapter",
    "jina": "gateway.providers.jina:JinaAdapter",
}

_adapters: dict[str, ProviderAdapter] = {}


def provider_names() -> list[str]:
    """Every accepted provider name."""
    return sorted([*VENDOR_A_COMPATIBLE, *NATIVE])


def is_known(name: str) -> bool:
    return name in VENDOR_A_COMPATIBLE or name in NATIVE


def get_adapter(name: str) -> ProviderAdapter:
    """The adapter for ``name``; an unknown name is a 400 that names it."""
    adapter = _adapters.get(name)
    if adapter is not None:
        return adapter
    row = VENDOR_A_COMPATIBLE.get(name)
    if row is not None:
        adapter = VendorAAdapter(name, row[0], row[1])
    elif name in NATIVE:
        module_name, _, class_name = NATIVE[name].partition(":")
        try:
            adapter = getattr(importlib.import_module(module_name), class_name)()
        except (ImportError, AttributeError):
            raise InvalidRequest(f"provider '{name}' is not available in this build", param="provider") from None
    else:
        raise InvalidRequest(
            f"unknown provider '{name}'; accepted providers: {', '.join(provider_names())}", param="provider"
        )
    _adapters[name] = adapter
    return adapter


async def close_all() -> None:
    for adapter in list(_adapters.values()):
        await adapter.close()
    _adapters.clear()
