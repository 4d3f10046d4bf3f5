"""Provider name -> adapter: the accepted names, the vendorA-compatible catalogue (a table) and the others.

Names are case-sensitive; an unknown name is a 400 that names it. The vendorA-compatible adapters are built with the
worker's runtime; a provider with its own wire format (``NATIVE``) has its module imported and its adapter built on
the first request that names it, so a worker that never serves anthropic, cloudA or cloudC does not hold their
translators and signers (tests/providers/test_registry.py imports every one, so a module that cannot import fails
the suite, not a request).
"""

from __future__ import annotations

import importlib
import logging

from gateway.http.errors import GatewayError, InvalidRequest
from gateway.providers.base import (
    AUDIO,
    AUDIO_SPEECH,
    AUDIO_TRANSCRIPTIONS,
    AUDIO_TRANSLATIONS,
    BATCHES,
    CHAT,
    COMPLETIONS,
    EMBEDDINGS,
    FILES,
    IMAGES,
    IMAGES_GENERATIONS,
    MODERATIONS,
    RESOURCES,
    ProviderAdapter,
)
from gateway.providers.vendorA import VendorAAdapter
from gateway.upstream.client import UpstreamClient

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

#: The images and audio column of the table above (docs/images-and-audio.md): the vendorA-compatible providers that
#: serve these routes in vendorA's wire format under the same base; a provider missing here answers 400 naming it.
MEDIA: dict[str, frozenset[str]] = {
    "vendorA": IMAGES | AUDIO,
    "groq": frozenset({AUDIO_TRANSCRIPTIONS, AUDIO_TRANSLATIONS, AUDIO_SPEECH}),
    "together-ai": frozenset({IMAGES_GENERATIONS, AUDIO_TRANSCRIPTIONS, AUDIO_SPEECH}),
    "deepinfra": frozenset({IMAGES_GENERATIONS, AUDIO_TRANSCRIPTIONS, AUDIO_SPEECH}),
    "x-ai": frozenset({IMAGES_GENERATIONS}),
    "vllm": frozenset({AUDIO_TRANSCRIPTIONS, AUDIO_TRANSLATIONS}),
}

#: providers with their own wire format: name -> (module, adapter class), imported on first use
NATIVE: dict[str, tuple[str, str]] = {
    "anthropic": ("gateway.providers.anthropic", "AnthropicAdapter"),
    "cloudA": ("gateway.providers.cloudA", "CloudAAdapter"),
    "cloudB": ("gateway.providers.cloudB", "CloudBAdapter"),
    "cloudC": ("gateway.providers.cloudC", "CloudCAdapter"),
    "cohere": ("gateway.providers.cohere", "CohereAdapter"),
    "voyage": ("gateway.providers.voyage", "VoyageAdapter"),
    "jina": ("gateway.providers.jina", "JinaAdapter"),
}


def native_adapter_class(name: str) -> type[ProviderAdapter]:
    """The adapter class of a provider in ``NATIVE`` (its module imported now if it was not yet)."""
    module, attr = NATIVE[name]
    adapter_class: type[ProviderAdapter] = getattr(importlib.import_module(module), attr)
    return adapter_class


def provider_names() -> list[str]:
    """Every accepted provider name."""
    return sorted([*VENDOR_A_COMPATIBLE, *NATIVE])


def is_known(name: str) -> bool:
    """Whether ``name`` is an accepted provider name (case-sensitive)."""
    return name in VENDOR_A_COMPATIBLE or name in NATIVE


class ProviderRegistry:
    """Every provider's adapter, built once per worker runtime, a ``NATIVE`` one on its first use (``client`` is the
    runtime's upstream client, for adapters that make calls of their own, such as cloudC's token exchange)."""

    def __init__(self, client: UpstreamClient) -> None:
        self._client = client
        self._adapters: dict[str, ProviderAdapter] = {
            name: VendorAAdapter(name, base, endpoints | MEDIA.get(name, frozenset()))
            for name, (base, endpoints) in VENDOR_A_COMPATIBLE.items()
        }

    def get(self, name: str) -> ProviderAdapter:
        """The adapter for ``name``; an unknown name is a 400 that names it."""
        adapter = self._adapters.get(name)
        if adapter is None:
            if name not in NATIVE:
                raise InvalidRequest(
                    f"unknown provider '{name}'; accepted providers: {', '.join(provider_names())}", param="provider"
                )
            try:
                adapter_class = native_adapter_class(name)
            except ImportError as exc:  # a broken install: this provider fails, the worker serves the others
                logging.getLogger("gateway").error("provider %s could not be loaded", name, exc_info=exc)
                raise GatewayError(f"provider '{name}' could not be loaded on this gateway (the server log has the "
                                   "details)", param="provider", code="provider_unavailable") from None
            adapter = self._adapters[name] = adapter_class.create(self._client)
        return adapter

    async def close(self) -> None:
        """Release what the adapters hold (token caches...)."""
        for adapter in self._adapters.values():
            await adapter.close()
