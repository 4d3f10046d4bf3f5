"""Micro benchmark of ConfigParser.parse: a 3-level fallback/loadbalance config, cold (a new parser, empty caches) and
hot (cached)."""

from __future__ import annotations

import msgspec

from gateway.config.validate import ConfigParser
from gateway.schema.config import Config

CONFIG = {
    "retry": {"attempts": 3, "on_status_codes": [429, 500, 502, 503]},
    "request_timeout": 30000,
    "cache": {"mode": "simple", "max_age": 300},
    "strategy": {"mode": "fallback", "on_status_codes": [500, 502, 503, 504]},
    "targets": [
        {
            "name": "primary-pool",
            "strategy": {"mode": "loadbalance"},
            "api_key": "sk-primary",
            "targets": [
                {"provider": "vendorA", "weight": 0.7, "override_params": {"model": "model-large"}},
                {
                    "provider": "vendorA",
                    "weight": 0.3,
                    "custom_host": "http://127.0.0.1:9000/v1",
                    "cb_config": {"failure_threshold": 5, "cooldown_interval": 60000},
                },
            ],
        },
        {
            "name": "backup",
            "strategy": {"mode": "fallback"},
            "targets": [
                {
                    "provider": "anthropic",
                    "api_key": "sk-backup",
                    "default_params": {"max_tokens": 512},
                    "drop_params": ["metadata.user", "logit_bias"],
                },
                {
                    "provider": "cloudA",
                    "cloudA_access_key_id": "AKIDEXAMPLE",
                    "cloudA_secret_access_key": "secret",
                    "cloudA_region": "us-east-1",
                    "input_guardrails": ["pg-pii", {"id": "pg-words", "default.contains": {"words": ["x"]}}],
                },
            ],
        },
    ],
}
TEXT = msgspec.json.encode(CONFIG)


def _fresh_parser() -> tuple[tuple[ConfigParser], dict]:
    return (ConfigParser(),), {}


def test_parse_config_cold(benchmark):
    """A new parser per round (built outside the timing): every cache is empty."""
    cfg = benchmark.pedantic(lambda parser: parser.parse(TEXT), setup=_fresh_parser, rounds=2000)
    assert cfg.targets[1].targets[1].cloudA_region == "us-east-1"


def test_parse_config_hot_same_object(benchmark):
    parser = ConfigParser()
    parser.parse(TEXT)
    cfg = benchmark(parser.parse, TEXT)
    assert cfg is parser.parse(TEXT)


def test_parse_config_hot_fresh_text(benchmark):
    """Each request brings a new bytes object, so its hash is computed anew (includes a ~450-byte copy)."""
    parse = ConfigParser().parse
    parse(TEXT)
    source = bytearray(TEXT)
    cfg = benchmark(lambda: parse(bytes(source)))
    assert cfg is parse(TEXT)


def test_decode_only(benchmark):
    """msgspec decoding alone, for comparison with the cold parse (the rest is validation)."""
    decoder = msgspec.json.Decoder(Config)
    benchmark(decoder.decode, TEXT)


def test_effective_cached(benchmark):
    parser = ConfigParser()
    cfg = parser.parse(TEXT)
    effective = parser.inheritance.effective
    pool = effective(cfg, cfg.targets[0])
    benchmark(effective, pool, cfg.targets[0].targets[1])
