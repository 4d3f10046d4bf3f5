"""The semantic cache through the real gateway with the packaged model: paraphrases hit, different questions and
other numbers miss, streams replay a semantic hit, every worker and every instance finds what another stored,
and embeddings may come from a provider called through the gateway itself.

An entry reaches a worker's index within about a quarter of a second; to wait for it without storing anything,
``probe`` asks with an output guardrail that always denies: a 446 is never cached, and its
``x-gateway-cache-status`` still says whether the cache would have answered (its misses do reach the upstream,
so these tests compare answers rather than count upstream calls).
"""

from __future__ import annotations

import json
import time

import pytest
import redis

from tests.support.http import post, request, stream_events
from tests.support.inprocess import start_in_process
from tests.support.redis_servers import random_prefix, test_redis_url
from tests.support.servers import ADMIN_KEY, start_gateway

NEVER = {"deny": True, "default.contains": {"words": ["no answer has this"], "operator": "all"}}


def config(base: str) -> dict:
    return {"provider": "vendorA", "api_key": "sk-test", "custom_host": base + "/v1", "cache": {"mode": "semantic"}}


def headers(cfg: dict, namespace: str | None = None) -> dict[str, str]:
    found = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": json.dumps(cfg), "content-type": "application/json"}
    if namespace is not None:
        found["x-gateway-cache-namespace"] = namespace
    return found


def ask(url: str, cfg: dict, question: str, namespace: str | None = None, **extra):
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": question}], **extra}
    return post(url + "/v1/chat/completions", body, headers(cfg, namespace))


def status_of(resp) -> str:
    return resp.headers["x-gateway-cache-status"]


def probe(url: str, cfg: dict, question: str, timeout: float = 30.0, namespace: str | None = None) -> set[str]:
    """Ask (storing nothing) until the cache answers ``question``; the workers (trace-id prefixes) that did."""
    deadline = time.monotonic() + timeout
    while True:
        resp = ask(url, {**cfg, "output_guardrails": [NEVER]}, question, namespace)
        assert resp.status == 446, resp.text
        if status_of(resp) in ("HIT", "SEMANTIC_HIT"):
            return {resp.headers["x-gateway-trace-id"][:16]}
        assert time.monotonic() < deadline, f"the cache never answered {question!r}"
        time.sleep(0.1)


def test_paraphrases_hit_and_different_questions_miss(gateway, mock):
    base = mock.scenario([{"reply": "Use reversed() or list.reverse()."}, {}])
    cfg = config(base)
    first = ask(gateway.url, cfg, "How do I reverse a list in Python?")
    assert first.status == 200 and status_of(first) == "MISS"
    probe(gateway.url, cfg, "How can I reverse a Python list?")
    hit = ask(gateway.url, cfg, "How can I reverse a Python list?")
    assert status_of(hit) == "SEMANTIC_HIT"
    assert hit.json()["choices"][0]["message"]["content"] == "Use reversed() or list.reverse()."
    assert status_of(ask(gateway.url, cfg, "What is the capital of France?")) == "MISS"
    assert status_of(ask(gateway.url, cfg, "How do I reverse a list in Python?")) == "HIT"  # the exact entry
    other = ask(gateway.url, cfg, "How can I reverse a Python list?", temperature=0.7)
    assert status_of(other) == "MISS"  # other parameters: another partition


def test_the_literal_guard_keeps_other_numbers_apart(gateway, mock):
    base = mock.scenario()
    cfg = config(base)
    assert status_of(ask(gateway.url, cfg, "Convert 10 USD to EUR")) == "MISS"
    probe(gateway.url, cfg, "Please convert 10 USD to EUR")
    assert status_of(ask(gateway.url, cfg, "Convert 100 USD to EUR")) == "MISS"


def test_a_semantic_hit_is_replayed_to_a_stream(gateway, mock):
    base = mock.scenario([{"reply": "Paris is the capital."}])
    cfg = config(base)
    assert status_of(ask(gateway.url, cfg, "What is the capital of France?")) == "MISS"
    probe(gateway.url, cfg, "What's the capital city of France?")
    body = {"model": "gpt-4o-mini", "stream": True,
            "messages": [{"role": "user", "content": "What's the capital city of France?"}]}
    status, resp_headers, events = stream_events(gateway.url + "/v1/chat/completions", body, {
        "x-gateway-api-key": ADMIN_KEY, "x-gateway-config": json.dumps(cfg), "content-type": "application/json"})
    payloads = list(events)
    assert status == 200 and resp_headers["x-gateway-cache-status"] == "SEMANTIC_HIT"
    assert payloads[-1] == b"[DONE]"
    text = "".join(json.loads(p)["choices"][0]["delta"].get("content") or "" for p in payloads[:-1])
    assert text == "Paris is the capital."


def test_every_worker_finds_what_another_stored(mock):
    base = mock.scenario()
    cfg = config(base)
    server = start_gateway(workers=2)
    try:
        assert status_of(ask(server.url, cfg, "How do I open a file in Python?")) == "MISS"
        workers: set[str] = set()
        deadline = time.monotonic() + 60
        while len(workers) < 2:  # a new connection each time: both workers take some
            assert time.monotonic() < deadline, f"only {workers} answered from the cache"
            workers |= probe(server.url, cfg, "How can I open a file in Python?")
    finally:
        server.stop()


@pytest.fixture
def redis_env():
    url, prefix = test_redis_url(), random_prefix()
    yield {"GATEWAY_REDIS_URL": url, "GATEWAY_REDIS_KEY_PREFIX": prefix, "GATEWAY_STATE_TIMEOUT_MS": "5000"}
    client = redis.Redis.from_url(url)
    for key in client.scan_iter(match=prefix + "*"):
        client.delete(key)
    client.close()


def test_instances_sharing_redis_share_semantic_entries(redis_env, mock):
    base = mock.scenario()
    cfg = config(base)
    first, second = start_in_process(redis_env), start_in_process(redis_env)
    try:
        assert status_of(ask(first.url, cfg, "How do I install numpy?")) == "MISS"
        probe(second.url, cfg, "How can I install numpy?")
        assert status_of(ask(second.url, cfg, "How can I install numpy?")) == "SEMANTIC_HIT"
    finally:
        first.stop()
        second.stop()


def test_embeddings_from_a_provider_through_the_gateway(mock):
    embedder = mock.scenario()
    embeddings = {"provider": "vendorA", "api_key": "sk-embed", "custom_host": embedder + "/v1",
                  "override_params": {"dimensions": 64}}
    server = start_in_process({"GATEWAY_SEMANTIC_CACHE_EMBEDDINGS": json.dumps(embeddings),
                            "GATEWAY_SEMANTIC_CACHE_EMBEDDING_MODEL": "text-embedding-3-small"})
    base = mock.scenario()
    cfg = config(base)
    try:
        assert status_of(ask(server.url, cfg, "What is a gateway?")) == "MISS"
        # the mock's vectors hash the text: the same embedded text (the exact key differs) is a semantic hit
        probe(server.url, cfg, "What is a gateway?   ")
        assert status_of(ask(server.url, cfg, "What is a gateway?   ")) == "SEMANTIC_HIT"
        assert status_of(ask(server.url, cfg, "Something else entirely")) == "MISS"
    finally:
        server.stop()
    sent = [json.loads(r["body"]) for r in mock.calls(embedder)["requests"]]
    assert sent[0] == {"model": "text-embedding-3-small", "input": "What is a gateway?", "dimensions": 64}
    assert all(r["headers"].get("authorization") == "Bearer sk-embed" for r in mock.calls(embedder)["requests"])


def test_a_bad_embeddings_setting_stops_the_start():
    with pytest.raises(RuntimeError) as info:
        start_gateway({"GATEWAY_SEMANTIC_CACHE_EMBEDDINGS": '{"provider": "nope"}'})
    assert "GATEWAY_SEMANTIC_CACHE_EMBEDDINGS" in str(info.value)


def test_health_shows_the_compiled_similarity_kernel(gateway):
    assert "similarity" in request("GET", gateway.url + "/health").json()["speedups"]


QUESTION, PARAPHRASE = "What is the capital city of France?", "what's the capital city of France"


def warm_up(url: str, cfg: dict, workers: int = 1) -> None:
    """Until every worker has embedded a prompt: a worker loads the model at its first semantic lookup, which may
    take longer than an embedding may (that lookup is then a MISS, see docs/cache.md)."""
    namespace = f"warm-{time.monotonic_ns()}"
    ask(url, cfg, "How do I open a file in Python?", namespace)
    seen: set[str] = set()
    deadline = time.monotonic() + 60
    while len(seen) < workers:  # a new connection each time: every worker takes some
        assert time.monotonic() < deadline, f"only {seen} answered from the cache"
        seen |= probe(url, cfg, "How can I open a file in Python?", namespace=namespace)


def ask_stream(url: str, cfg: dict, question: str, namespace: str) -> tuple[str, str, str]:
    """A streamed question: its cache status, the worker that answered (trace-id prefix) and the text."""
    body = {"model": "gpt-4o-mini", "stream": True, "messages": [{"role": "user", "content": question}]}
    status, resp_headers, events = stream_events(url + "/v1/chat/completions", body, headers(cfg, namespace))
    payloads = list(events)
    assert status == 200 and payloads[-1] == b"[DONE]"
    text = "".join(json.loads(p)["choices"][0]["delta"].get("content") or "" for p in payloads[:-1]
                   if json.loads(p)["choices"])
    return resp_headers["x-gateway-cache-status"], resp_headers["x-gateway-trace-id"][:16], text


def back_to_back(first_url: str, second_url: str, cfg: dict, namespace: str, streamed: bool) -> tuple[str, str]:
    """Ask the question, then its paraphrase as soon as the answer has arrived: the second's cache status and
    whether the two were answered by the same worker ("same" / "other")."""
    if streamed:
        first_status, first_worker, text = ask_stream(first_url, cfg, QUESTION, namespace)
        second_status, second_worker, again = ask_stream(second_url, cfg, PARAPHRASE, namespace)
        assert again == text
    else:
        first = ask(first_url, cfg, QUESTION, namespace)
        second = ask(second_url, cfg, PARAPHRASE, namespace)
        assert first.status == second.status == 200
        assert second.json()["choices"] == first.json()["choices"]
        first_status, second_status = status_of(first), status_of(second)
        first_worker, second_worker = (r.headers["x-gateway-trace-id"][:16] for r in (first, second))
    assert first_status == "MISS"
    return second_status, "same" if first_worker == second_worker else "other"


@pytest.mark.parametrize("streamed", [False, True], ids=["json", "stream"])
def test_a_sequential_client_finds_its_own_answer_at_once(gateway, mock, streamed):
    cfg = config(mock.scenario())
    warm_up(gateway.url, cfg)
    for n in range(3):  # a fresh namespace each time: nothing stored before the pair
        assert back_to_back(gateway.url, gateway.url, cfg, f"seq-{streamed}-{n}-{time.monotonic_ns()}",
                            streamed) == ("SEMANTIC_HIT", "same")


@pytest.mark.parametrize("streamed", [False, True], ids=["json", "stream"])
def test_a_sequential_client_finds_its_own_answer_on_the_other_worker(mock, streamed):
    cfg = config(mock.scenario())
    server = start_gateway(workers=2)
    try:
        warm_up(server.url, cfg, workers=2)
        seen: set[str] = set()
        for n in range(40):  # a new connection each time: the pair lands on either worker
            status, where = back_to_back(server.url, server.url, cfg, f"w2-{streamed}-{n}-{time.monotonic_ns()}",
                                         streamed)
            assert status == "SEMANTIC_HIT", (n, where)
            seen.add(where)
            if len(seen) == 2:
                break
        assert seen == {"same", "other"}
    finally:
        server.stop()


@pytest.mark.parametrize("streamed", [False, True], ids=["json", "stream"])
def test_a_sequential_client_finds_its_own_answer_on_another_instance(shared_redis, mock, streamed):
    cfg = config(mock.scenario())
    first, second = start_gateway(shared_redis), start_gateway(shared_redis)
    try:
        warm_up(first.url, cfg)
        warm_up(second.url, cfg)
        for n in range(3):
            namespace = f"i2-{streamed}-{n}-{time.monotonic_ns()}"
            assert back_to_back(first.url, second.url, cfg, namespace, streamed) == ("SEMANTIC_HIT", "other")
    finally:
        first.stop()
        second.stop()


def test_a_reader_is_never_served_a_semantic_answer_older_than_its_own_max_age(gateway, mock):
    base = mock.scenario()
    cfg = config(base)
    warm_up(gateway.url, cfg)
    long, short, never = ({**cfg, "cache": {"mode": "semantic", "max_age": age}} for age in (60, 1, 0))
    namespace = f"age-{time.monotonic_ns()}"
    assert status_of(ask(gateway.url, long, QUESTION, namespace)) == "MISS"
    assert status_of(ask(gateway.url, short, PARAPHRASE, namespace)) == "SEMANTIC_HIT"
    assert status_of(ask(gateway.url, never, PARAPHRASE, namespace)) == "MISS"
    time.sleep(1.3)
    assert status_of(ask(gateway.url, long, PARAPHRASE, namespace)) == "SEMANTIC_HIT"
    assert status_of(ask(gateway.url, short, PARAPHRASE, namespace)) == "MISS"  # stored 1.3 s ago
