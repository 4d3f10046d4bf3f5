"""The simple response cache through the real gateway: hits, misses, partitions, force refresh, expiry, streams
served from the cache, what is never cached, the status everywhere it shows, and one cache for every worker and
every instance."""

from __future__ import annotations

import json
import time

import pytest
import redis

from tests.support.headers import headers_for
from tests.support.http import post, request, stream_events
from tests.support.inprocess import start_in_process
from tests.support.poll import wait_for, wait_logs
from tests.support.redis_servers import random_prefix, test_redis_url
from tests.support.servers import ADMIN_KEY, start_gateway

CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "What is a gateway?"}]}


def config(base: str, **extra) -> dict:
    return {"provider": "vendorA", "api_key": "sk-test", "custom_host": base + "/v1",
            "cache": {"mode": "simple"}, **extra}


def chat(url: str, cfg: dict, body: dict = CHAT, **extra: str):
    return post(url + "/v1/chat/completions", body, headers_for(config=cfg, **extra))


def status_of(resp) -> str:
    return resp.headers["x-gateway-cache-status"]


def stream(url: str, cfg: dict, body: dict = CHAT, **extra: str) -> tuple[int, dict, list[dict]]:
    status, resp_headers, events = stream_events(url + "/v1/chat/completions", {**body, "stream": True},
                                                 headers_for(config=cfg, **extra))
    payloads = list(events)
    assert payloads[-1] == b"[DONE]"
    return status, resp_headers, [json.loads(p) for p in payloads[:-1]]


def streamed_text(events: list[dict]) -> str:
    return "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e["choices"])


def test_a_repeated_question_is_answered_from_the_cache(gateway, mock):
    base = mock.scenario()
    cfg = config(base)
    first = chat(gateway.url, cfg)
    assert first.status == 200 and status_of(first) == "MISS"
    again = chat(gateway.url, cfg, {**CHAT, "user": "someone-else", "stream": False})
    assert again.status == 200 and status_of(again) == "HIT"
    assert again.json() == first.json()  # the same answer, id included
    other = chat(gateway.url, cfg, {**CHAT, "temperature": 0.5})
    assert status_of(other) == "MISS"
    assert mock.calls(base)["calls"] == 2


def test_metadata_partitions_the_cache_and_a_namespace_replaces_it(gateway, mock):
    base = mock.scenario()
    cfg = config(base)
    team_a = {"x-gateway-metadata": json.dumps({"team": "a"})}
    team_b = {"x-gateway-metadata": json.dumps({"team": "b"})}
    assert status_of(chat(gateway.url, cfg, **team_a)) == "MISS"
    assert status_of(chat(gateway.url, cfg, **team_b)) == "MISS"
    assert status_of(chat(gateway.url, cfg, **team_a)) == "HIT"
    assert status_of(chat(gateway.url, cfg, **team_a, **{"x-gateway-cache-namespace": "shared"})) == "MISS"
    assert status_of(chat(gateway.url, cfg, **team_b, **{"x-gateway-cache-namespace": "shared"})) == "HIT"
    assert status_of(chat(gateway.url, cfg, **{"x-gateway-cache-namespace": "other"})) == "MISS"
    assert mock.calls(base)["calls"] == 4


def test_force_refresh_calls_again_and_stores_the_new_answer(gateway, mock):
    base = mock.scenario([{"reply": "first answer"}, {"reply": "second answer"}])
    cfg = config(base)
    assert chat(gateway.url, cfg).json()["choices"][0]["message"]["content"] == "first answer"
    refreshed = chat(gateway.url, cfg, **{"x-gateway-cache-force-refresh": "true"})
    assert status_of(refreshed) == "REFRESH"
    assert refreshed.json()["choices"][0]["message"]["content"] == "second answer"
    cached = chat(gateway.url, cfg)
    assert status_of(cached) == "HIT" and cached.json()["choices"][0]["message"]["content"] == "second answer"
    assert mock.calls(base)["calls"] == 2


def test_an_entry_expires_after_max_age(gateway, mock):
    base = mock.scenario()
    cfg = config(base, cache={"mode": "simple", "max_age": 1})
    assert status_of(chat(gateway.url, cfg)) == "MISS"
    assert status_of(chat(gateway.url, cfg)) == "HIT"
    time.sleep(1.3)
    assert status_of(chat(gateway.url, cfg)) == "MISS"
    assert mock.calls(base)["calls"] == 2


def test_a_streamed_answer_is_cached_once_complete_and_replayed_as_sse(gateway, mock, openai_client):
    base = mock.scenario()
    cfg = config(base)
    status, first_headers, first = stream(gateway.url, cfg)
    assert status == 200 and first_headers["x-gateway-cache-status"] == "MISS"
    status, replay_headers, replayed = stream(gateway.url, cfg)
    assert status == 200 and replay_headers["x-gateway-cache-status"] == "HIT"
    assert replay_headers["content-type"].startswith("text/event-stream")
    assert streamed_text(replayed) == streamed_text(first) and streamed_text(first)
    assert replayed[-1]["choices"][0]["finish_reason"] == "stop"
    assert all(e["object"] == "chat.completion.chunk" for e in replayed)
    as_json = chat(gateway.url, cfg)  # the same question without stream: the assembled answer
    assert status_of(as_json) == "HIT"
    assert as_json.json()["choices"][0]["message"]["content"] == streamed_text(first)
    # the SDK reads the replay, usage chunk included when asked for
    client = openai_client(None, **{"x-gateway-config": json.dumps(cfg)})
    chunks = list(client.chat.completions.create(model=CHAT["model"], messages=CHAT["messages"], stream=True,
                                                 stream_options={"include_usage": True}))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == streamed_text(first)
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0
    assert mock.calls(base)["calls"] == 1


def test_a_json_answer_is_replayed_to_a_streamed_request(gateway, mock):
    base = mock.scenario([{"reply": "cached words"}])
    cfg = config(base)
    assert status_of(chat(gateway.url, cfg)) == "MISS"
    status, resp_headers, events = stream(gateway.url, cfg)
    assert resp_headers["x-gateway-cache-status"] == "HIT" and streamed_text(events) == "cached words"
    assert events[0]["choices"][0]["delta"]["role"] == "assistant"
    assert mock.calls(base)["calls"] == 1


def test_errors_and_broken_streams_are_never_cached(gateway, mock):
    base = mock.scenario([{"status": 500, "message": "boom"}, {}])
    cfg = config(base)
    failed = chat(gateway.url, cfg)
    assert failed.status == 500 and status_of(failed) == "MISS"
    assert status_of(chat(gateway.url, cfg)) == "MISS"
    assert status_of(chat(gateway.url, cfg)) == "HIT"
    broken = mock.scenario([{"stream_error": "middle"}, {}])
    cfg = config(broken)
    _, _, events = stream(gateway.url, cfg)
    assert "error" in events[-1]  # the stream ended with an in-band error after some content
    _, resp_headers, events = stream(gateway.url, cfg)
    assert resp_headers["x-gateway-cache-status"] == "MISS" and "error" not in events[-1]
    _, resp_headers, _ = stream(gateway.url, cfg)
    assert resp_headers["x-gateway-cache-status"] == "HIT"
    assert mock.calls(broken)["calls"] == 2


def test_every_response_says_its_cache_status(gateway, mock):
    base = mock.scenario()
    plain = {"provider": "vendorA", "api_key": "sk-test", "custom_host": base + "/v1"}
    resp = chat(gateway.url, plain)
    assert resp.status == 200 and status_of(resp) == "DISABLED"
    resp = chat(gateway.url, plain, **{"x-gateway-cache-force-refresh": "true"})
    assert status_of(resp) == "DISABLED"
    bad = post(gateway.url + "/v1/chat/completions", {"model": "m"}, headers_for(config=config(base)))
    assert bad.status == 400 and status_of(bad) == "DISABLED"
    status, resp_headers, _ = stream(gateway.url, plain)
    assert resp_headers["x-gateway-cache-status"] == "DISABLED"


@pytest.mark.parametrize("header, value", [
    ("x-gateway-cache-force-refresh", "maybe"),
    ("x-gateway-metadata", "{"),
    ("x-gateway-request-timeout", "soon"),
])
def test_a_bad_gateway_header_is_a_400_that_still_says_its_cache_status(gateway, mock, header, value):
    resp = chat(gateway.url, config(mock.scenario()), **{header: value})
    assert resp.status == 400 and resp.json()["error"]["param"] == header
    assert status_of(resp) == "DISABLED"  # the lookup never ran


def test_other_endpoints_are_cached_too(gateway, mock):
    base = mock.scenario()
    body = {"model": "text-embedding-3-small", "input": ["a gateway"]}
    first = post(gateway.url + "/v1/embeddings", body, headers_for(config=config(base)))
    again = post(gateway.url + "/v1/embeddings", body, headers_for(config=config(base)))
    assert (status_of(first), status_of(again)) == ("MISS", "HIT") and again.json() == first.json()
    assert mock.calls(base)["calls"] == 1


def test_metrics_and_logs_carry_the_cache_status(gateway, mock):
    base = mock.scenario()
    cfg = config(base)
    chat(gateway.url, cfg)
    hit = chat(gateway.url, cfg)
    trace = hit.headers["x-gateway-trace-id"]
    admin = {"x-gateway-api-key": ADMIN_KEY}
    line = wait_logs(gateway, trace, timeout=10)[0]
    assert line["cache_status"] == "HIT" and line["usage_source"] == "none" and line["total_tokens"] == 0

    def counted() -> bool:  # metrics are written about once a second, not with each log batch
        metrics = request("GET", gateway.url + "/metrics", headers=admin).text
        return 'cache_status="HIT"' in metrics and 'cache_status="MISS"' in metrics

    assert wait_for(counted, timeout=10)


def test_every_worker_shares_one_cache(mock):
    base = mock.scenario()
    server = start_gateway(workers=2)
    try:
        assert status_of(chat(server.url, config(base))) == "MISS"
        workers: set[str] = set()
        for _ in range(200):  # a new connection each time: both workers take some (trace ids start per worker)
            resp = chat(server.url, config(base))
            assert status_of(resp) == "HIT"
            workers.add(resp.headers["x-gateway-trace-id"][:16])
            if len(workers) == 2:
                break
    finally:
        server.stop()
    assert len(workers) == 2
    assert mock.calls(base)["calls"] == 1


@pytest.fixture
def redis_pair():
    url, prefix = test_redis_url(), random_prefix()
    env = {"GATEWAY_REDIS_URL": url, "GATEWAY_REDIS_KEY_PREFIX": prefix, "GATEWAY_STATE_TIMEOUT_MS": "5000"}
    first, second = start_in_process(env), start_in_process(env)
    try:
        yield first, second
    finally:
        first.stop()
        second.stop()
        client = redis.Redis.from_url(url)
        for key in client.scan_iter(match=prefix + "*"):
            client.delete(key)
        client.close()


def test_instances_sharing_redis_share_one_cache(redis_pair, mock):
    first, second = redis_pair
    assert request("GET", first.url + "/health").json()["state"]["backend"] == "redis"
    base = mock.scenario()
    cfg = config(base)
    assert status_of(chat(first.url, cfg)) == "MISS"
    assert status_of(chat(second.url, cfg)) == "HIT"
    _, resp_headers, events = stream(second.url, cfg)
    assert resp_headers["x-gateway-cache-status"] == "HIT" and streamed_text(events)
    assert mock.calls(base)["calls"] == 1


@pytest.fixture(params=["embedded", "redis"])
def any_store(request):
    """The session gateway (embedded store), or a gateway on the test Redis."""
    if request.param == "embedded":
        yield request.getfixturevalue("gateway")
        return
    server = start_in_process(request.getfixturevalue("shared_redis"))
    try:
        assert request_json(server.url + "/health")["state"]["backend"] == "redis"
        yield server
    finally:
        server.stop()


def request_json(url: str) -> dict:
    return request("GET", url).json()


def test_a_reader_is_never_served_an_answer_older_than_its_own_max_age(any_store, mock):
    url = any_store.url
    base = mock.scenario()
    long, short, never = (config(base, cache={"mode": "simple", "max_age": age}) for age in (60, 1, 0))
    first = chat(url, long)
    assert status_of(first) == "MISS"  # stored for 60 s
    assert status_of(chat(url, short)) == "HIT"  # younger than 1 s
    assert status_of(chat(url, never)) == "MISS"  # max_age 0: never answered from the cache...
    assert chat(url, long).json() == first.json()  # ...and stores nothing
    time.sleep(1.3)
    assert status_of(chat(url, long)) == "HIT"
    assert status_of(chat(url, short)) == "MISS"  # stored 1.3 s ago: too old for this reader
    assert status_of(chat(url, short)) == "HIT"  # its own answer, stored now
    assert status_of(chat(url, never, **{"x-gateway-cache-force-refresh": "true"})) == "REFRESH"
    _, resp_headers, _ = stream(url, never)
    assert resp_headers["x-gateway-cache-status"] == "MISS"
    assert mock.calls(base)["calls"] == 5
