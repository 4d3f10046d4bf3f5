"""The guardrails' HTTP path: answers are size-bounded and JWKS fetches are shared and cached."""

from __future__ import annotations

import asyncio

import pytest

from gateway.guardrails import webhook
from gateway.guardrails.webhook import CheckIO, HttpCheckError


async def test_a_too_large_answer_is_refused(hook_server, loopback_client, monkeypatch):
    monkeypatch.setattr(webhook, "MAX_ANSWER_BYTES", 10)
    with pytest.raises(HttpCheckError) as info:
        await CheckIO(loopback_client).post_json(f"{hook_server.url}/verdict/true", {}, {"x": 1}, 2000)
    assert "larger than 10 bytes" in str(info.value)


async def test_concurrent_jwks_misses_share_one_fetch(hook_server, loopback_client):
    io = CheckIO(loopback_client)
    url = f"{hook_server.url}/jwks"
    docs = await asyncio.gather(*(io.cached_json(url, 60, 2000) for _ in range(5)))
    assert docs == [{"keys": []}] * 5
    assert hook_server.jwks_fetches == 1
    await io.cached_json(url, 60, 2000)
    assert hook_server.jwks_fetches == 1


async def test_without_a_client_every_call_fails():
    with pytest.raises(HttpCheckError):
        await CheckIO(None).post_json("https://example.com/hook", {}, {}, 100)
