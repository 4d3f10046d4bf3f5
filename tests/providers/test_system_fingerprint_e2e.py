"""Every chat and completion answer and chunk carries ``system_fingerprint``: null from the translated providers
(anthropic, cloudA, cloudC), the upstream's own value from the vendorA-format ones (vendorA, cloudB)."""

from __future__ import annotations

import msgspec
import pytest

from tests.providers import test_cloudA_e2e as cloudA
from tests.providers import test_cloudB_e2e as cloudB
from tests.providers import test_cloudC_e2e as cloudC
from tests.support.headers import headers_for
from tests.support.http import post, stream_events

HI = [{"role": "user", "content": "hi"}]


def route_for(provider: str, base: str) -> tuple[dict[str, str], str]:
    """(request headers, model) for a provider routed to a mock scenario."""
    if provider in ("anthropic", "vendorA"):
        return headers_for(base + "/v1", provider), "claude-test-1" if provider == "anthropic" else "gpt-4o-mini"
    if provider == "cloudA":
        return cloudA.config_headers(base), cloudA.MODEL
    if provider == "cloudB":
        return cloudB.headers(cloudB.config(base)), "gpt-4o"
    return cloudC.headers(cloudC.config(base)), cloudC.MODEL


EXPECTED = {"anthropic": None, "cloudA": None, "cloudC": None, "vendorA": "fp_mock", "cloudB": "fp_mock"}
PROVIDERS = list(EXPECTED)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_chat_answer_has_the_key(gateway, mock, provider):
    headers, model = route_for(provider, mock.scenario())
    resp = post(f"{gateway.url}/v1/chat/completions", {"model": model, "messages": HI}, headers)
    assert resp.status == 200, resp.text
    doc = resp.json()
    assert "system_fingerprint" in doc and doc["system_fingerprint"] == EXPECTED[provider]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_every_chunk_has_the_key(gateway, mock, provider):
    headers, model = route_for(provider, mock.scenario())
    body = {"model": model, "messages": HI, "stream": True, "stream_options": {"include_usage": True}}
    status, _, events = stream_events(f"{gateway.url}/v1/chat/completions", body, headers)
    chunks = [msgspec.json.decode(e) for e in events if e != b"[DONE]"]
    assert status == 200 and chunks and chunks[-1]["usage"] is not None
    for chunk in chunks:
        assert "system_fingerprint" in chunk, chunk
        assert chunk["system_fingerprint"] == EXPECTED[provider]


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_text_completions_have_the_key(gateway, mock, stream):
    headers, model = route_for("anthropic", mock.scenario())
    body = {"model": model, "prompt": "Say hi", "max_tokens": 50}
    if not stream:
        doc = post(f"{gateway.url}/v1/completions", body, headers).json()
        assert doc["object"] == "text_completion" and "system_fingerprint" in doc and doc["system_fingerprint"] is None
        return
    status, _, events = stream_events(f"{gateway.url}/v1/completions", {**body, "stream": True}, headers)
    chunks = [msgspec.json.decode(e) for e in events if e != b"[DONE]"]
    assert status == 200 and chunks
    assert all("system_fingerprint" in c and c["system_fingerprint"] is None for c in chunks)
