"""What identifying the caller and the provider costs a request once the worker's caches are warm.

``python -m pytest bench/micro/test_resolve_bench.py --benchmark-enable``. Each benchmark runs the request-path
step the pipeline runs: the gateway-key lookup (one dict get), then ``ConfigResolver.resolve`` for a plain
provider header (the overhead benchmark's request), an inline JSON config, a provider slug
(``x-gateway-provider: @slug``), a config naming a slug, and a saved config's id. The plain cases must stay where
they were before slugs existed (one more dict lookup at most); the record cases should cost about the same as the
plain ones.
"""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from gateway.api.config_checks import config_checks
from gateway.config.resolve import ConfigResolver
from gateway.config.validate import ConfigParser
from gateway.controlplane import configs, providers
from gateway.controlplane.directory import RecordCache, RecordsNeeded
from gateway.controlplane.keys import KeyRecord, KeyStore
from gateway.controlplane.secrets import SecretBox
from gateway.http.context import build_context
from gateway.state.memory import MemoryStateStore

BOX = SecretBox.from_text("bench")
WORKSPACE = "ws"


def _records() -> tuple[RecordCache, str]:
    store = MemoryStateStore()
    cache = RecordCache(store, lambda: BOX)

    async def fill() -> str:
        slug = providers.build(BOX, WORKSPACE, "team", {"provider": "vendorA", "api_key": "sk-slug",
                                                        "custom_host": "http://127.0.0.1:9/v1"})
        await cache.slugs.create(slug)
        saved = configs.SavedConfig(name="c", workspace_id=WORKSPACE,
                                    config=msgspec.Raw(b'{"provider": "@team", "retry": {"attempts": 1}}'))
        return (await cache.configs.create(saved)).id

    config_id = asyncio.run(fill())
    return cache, config_id


def _headers(**values: str) -> list[tuple[bytes, bytes]]:
    return [(k.encode(), v.encode()) for k, v in values.items()]


CASES = {
    "provider_header": _headers(**{"x-gateway-provider": "vendorA", "authorization": "Bearer sk",
                                   "x-gateway-custom-host": "http://127.0.0.1:9/v1"}),
    "inline_config": _headers(**{"x-gateway-config": '{"provider": "vendorA", "api_key": "k", "retry": '
                                                     '{"attempts": 2}}'}),
    "slug_header": _headers(**{"x-gateway-provider": "@team"}),
    "config_with_slug": _headers(**{"x-gateway-config": '{"provider": "@team", "retry": {"attempts": 2}}'}),
    "saved_config": [],
}


@pytest.mark.parametrize("case", list(CASES))
def test_resolve_config_warm(benchmark, case: str) -> None:
    records, config_id = _records()
    resolver = ConfigResolver(ConfigParser(config_checks()))
    headers = CASES[case] or _headers(**{"x-gateway-config": config_id})
    ctx = build_context(headers)
    ctx.workspace = WORKSPACE
    for _ in range(3):  # load what the case needs, as the first request of a worker does
        try:
            resolver.resolve(ctx, records)
            break
        except RecordsNeeded as needed:
            asyncio.run(records.fetch(needed))
    config = benchmark(resolver.resolve, ctx, records)
    assert config.provider == "vendorA"


def test_gateway_key_lookup_warm(benchmark) -> None:
    keys = KeyStore(None, "gw-admin")  # type: ignore[arg-type]
    keys.known("gw-admin")  # remembered, as after a worker's first request with the key

    def lookup() -> KeyRecord | None:
        record = keys.known("gw-admin")
        return record if record is not None and record.can_infer else None

    assert benchmark(lookup) is not None
