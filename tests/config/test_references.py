"""Slug references in configs: found once per config, loaded on a miss, expanded per workspace, cached until the
records change."""

from __future__ import annotations

import pytest

from gateway.api.config_checks import config_checks
from gateway.config.references import ConfigReferences
from gateway.config.validate import ConfigParser
from gateway.controlplane import providers
from gateway.controlplane.directory import RecordCache, RecordsNeeded
from gateway.controlplane.secrets import SecretBox
from gateway.http.errors import InvalidRequest
from gateway.schema.config import Config, Strategy
from gateway.state.memory import MemoryStateStore

BOX = SecretBox.from_text("test key")
PARSER = ConfigParser(config_checks())
parse_config = PARSER.parse


@pytest.fixture
async def records():
    store = MemoryStateStore()
    cache = RecordCache(store, lambda: BOX)
    for workspace, slug, key in (("ws", "a", "sk-a"), ("ws", "b", "sk-b"), ("other", "a", "sk-other")):
        record = providers.build(BOX, workspace, slug, {"provider": "vendorA", "api_key": key,
                                                        "custom_host": f"http://{slug}.example/v1"})
        await cache.slugs.create(record)
    return cache


@pytest.fixture
def refs():
    return ConfigReferences()


async def expanded(refs: ConfigReferences, config, workspace: str, cache: RecordCache):
    try:
        return refs.expand(config, workspace, cache)
    except RecordsNeeded as needed:
        await cache.fetch(needed)
        return refs.expand(config, workspace, cache)


def test_a_config_without_slugs_has_no_references(refs):
    config = parse_config('{"provider": "vendorA", "api_key": "k"}')
    assert refs.refs_of(config) is None and refs.plain(config)


async def test_slugs_anywhere_in_the_tree_are_expanded_and_own_keys_win(records, refs):
    config = parse_config('{"strategy": {"mode": "fallback"}, "targets": ['
                          '{"provider": "@a"}, {"virtual_key": "b", "api_key": "sk-own", "custom_host": "http://own.example/v1"},'
                          '{"provider": "anthropic", "api_key": "x"}]}')
    assert refs.refs_of(config).slugs == ["a", "b"] and not refs.plain(config)
    with pytest.raises(RecordsNeeded) as needed:
        refs.expand(config, "ws", records)
    assert [want[2] for want in needed.value.wants] == ["a", "b"]
    result = await expanded(refs, config, "ws", records)
    first, second, third = result.targets
    assert (first.provider, first.api_key, first.custom_host) == ("vendorA", "sk-a", "http://a.example/v1")
    assert (second.provider, second.api_key, second.custom_host, second.virtual_key) == (
        "vendorA", "sk-own", "http://own.example/v1", None)
    assert third is config.targets[2]
    assert refs.expand(config, "ws", records) is result  # cached until the records change
    records.invalidate()
    assert (await expanded(refs, config, "ws", records)) is not result


async def test_the_same_slug_name_belongs_to_each_workspace(records, refs):
    config = parse_config('{"provider": "@a"}')
    assert (await expanded(refs, config, "ws", records)).api_key == "sk-a"
    assert (await expanded(refs, config, "other", records)).api_key == "sk-other"
    with pytest.raises(InvalidRequest) as error:
        await expanded(refs, config, "nobody", records)
    assert error.value.param == "provider"


async def test_a_slugs_secret_keeps_to_the_slugs_host_down_the_tree(records, refs):
    record = providers.build(BOX, "ws", "default-host", {"provider": "vendorA", "api_key": "sk-d"})
    await records.slugs.create(record)
    records.invalidate()
    cases = [
        # another provider is another default host
        (Config(provider="@default-host", strategy=Strategy(mode="fallback"), targets=[Config(provider="groq")]),
         "targets[0].provider"),
        # a host set above a slug without one flows down to it
        (Config(custom_host="http://x.example/v1", strategy=Strategy(mode="fallback"),
                targets=[Config(provider="@default-host")]), "custom_host"),
        # a target's own slug brings its own secret and host in place of the parent's
        (Config(provider="@default-host", strategy=Strategy(mode="fallback"), targets=[Config(provider="@a")]), None),
    ]
    for config, param in cases:
        if param is None:
            await expanded(refs, config, "ws", records)
            continue
        with pytest.raises(InvalidRequest) as error:
            await expanded(refs, config, "ws", records)
        assert error.value.param == param
    # the same provider and host as the slug's: fine, at any depth
    fine = Config(provider="@default-host", strategy=Strategy(mode="fallback"),
                  targets=[Config(provider="vendorA", strategy=Strategy(mode="single"), targets=[Config()])])
    assert (await expanded(refs, fine, "ws", records)).api_key == "sk-d"


def test_prompt_id_is_honoured_only_at_the_root(refs):
    assert refs.refs_of(parse_config('{"prompt_id": "pp-1"}')) is None
    with pytest.raises(InvalidRequest) as error:
        refs.refs_of(parse_config('{"strategy": {"mode": "single"}, "targets": [{"prompt_id": "pp-1"}]}'))
    assert error.value.param == "targets[0].prompt_id"
