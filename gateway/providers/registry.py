"""Provider name -> adapter: the accepted names, the vendorA-compatible catalogue (a table) and the others.

Names are case-sensitive; an unknown name is a 400 that names it. Every adapter is built when the worker's runtime is
(so a provider module that fails to import fails the start, with its traceback).
"""

from __future__ import annotations

from gateway.http.errors import InvalidRequest
from gateway.providers.anthropic import AnthropicAdapter
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
from gateway.providers.cloudA import CloudAAdapter
from gateway.providers.cloudB import CloudBAdapter
from gateway.providers.cloudC import CloudCAdapter
from gateway.providers.cohere import CohereAdapter
from gateway.providers.jina import JinaAdapter
from gateway.providers.vendorA import VendorAAdapter
from gateway.providers.voyage import VoyageAdapter
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

#: providers with their own wire format: name -> adapter class
NATIVE: dict[str, type[ProviderAdapter]] = {
    "anthropic": AnthropicAdapter,
    "cloudA": CloudAAdapter,
    "cloudB": CloudBAdapter,
    "cloudC": CloudCAdapter,
    "cohere": CohereAdapter,
    "voyage": VoyageAdapter,
    "jina": JinaAdapter,
}


def provider_names() -> list[str]:
    """Every accepted provider name."""
    return sorted([*VENDOR_A_COMPATIBLE, *NATIVE])


def is_known(name: str) -> bool:
    """Whether ``name`` is an accepted provider name (case-sensitive)."""
    return name in VENDOR_A_COMPATIBLE or name in NATIVE


class ProviderRegistry:
    """Every provider's adapter, built once per worker runtime (``client`` is the runtime's upstream client, for
    adapters that make calls of their own, such as cloudC's token exchange)."""

    def __init__(self, client: UpstreamClient) -> None:
        self._adapters: dict[str, ProviderAdapter] = {
            name: VendorAAdapter(name, base, endpoints | MEDIA.get(name, frozenset()))
            for name, (base, endpoints) in VENDOR_A_COMPATIBLE.items()
        }
        for name, adapter_class in NATIVE.items():
            self._adapters[name] = adapter_class.create(client)

    def get(self, name: str) -> ProviderAdapter:
        """The adapter for ``name``; an unknown name is a 400 that names it."""
        adapter = self._adapters.get(name)
        if adapter is None:
            raise InvalidRequest(
                f"unknown provider '{name}'; accepted providers: {', '.join(provider_names())}", param="provider"
            )
        return adapter

    async def close(self) -> None:
        """Release what the adapters hold (token caches...)."""
        for adapter in self._adapters.values():
            await adapter.close()
