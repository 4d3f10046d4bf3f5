"""Micro benchmark of the response cache's own work on a hit: the exact key of a typical chat request, reading and
decoding an entry (memory store, on a running loop), and a stream's assembly and replay (20 content chunks).

Run: ``python -m pytest bench/micro/test_cache_bench.py --benchmark-enable``. Semantic lookups at 1k/10k/100k
entries, compiled vs pure, are in ``test_similarity_bench.py``; embedding cost in ``test_embedding_bench.py``.
"""

from __future__ import annotations

import asyncio
import json

from gateway.cache.answers import ResponseCache
from gateway.cache.keys import partition, simple_key
from gateway.cache.stream import StreamAssembler, replay
from gateway.schema.config import Config
from gateway.state.memory import MemoryStateStore

BODY = {"model": "gpt-x-mini", "max_tokens": 256, "temperature": 0.2, "user": "u-123",
        "messages": [{"role": "system", "content": "You are a helpful assistant for our billing team."},
                     {"role": "user", "content": "I was charged twice for my subscription last month and would "
                                                 "like a refund for the duplicate charge. What should I do?"}]}
TARGET = Config(provider="vendorA", api_key="sk", custom_host="https://api.example.com/v1")
HEAD = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-x-mini"}
WORDS = ["Sorry", " about", " the", " duplicate", " charge:", " a", " refund", " was", " issued", " today", " and",
         " should", " arrive", " within", " five", " to", " seven", " business", " days", "."]
STREAM = [b"data: " + json.dumps({**HEAD, "choices": [{"index": 0, "delta": {"content": w}, "logprobs": None,
                                                       "finish_reason": None}]}).encode() + b"\n\n" for w in WORDS]
ANSWER = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-x-mini",
          "choices": [{"index": 0, "message": {"role": "assistant", "content": "".join(WORDS)}, "logprobs": None,
                       "finish_reason": "stop"}], "usage": {"prompt_tokens": 40, "completion_tokens": 20,
                                                            "total_tokens": 60}}


def test_exact_key(benchmark):
    part = partition("default", None, {"team": "billing"})
    benchmark(simple_key, part, TARGET, "chat", BODY)


def test_hit_read_and_decode(benchmark):
    loop = asyncio.new_event_loop()
    cache = ResponseCache(MemoryStateStore())
    body = json.dumps(ANSWER).encode()
    loop.run_until_complete(cache.put("k", cache.entry(body, "vendorA", "gpt-x-mini", 3600)))
    found = benchmark(lambda: loop.run_until_complete(cache.get("k", 3600)))
    loop.close()
    assert found is not None and found.body == body


def test_assemble_a_20_chunk_stream(benchmark):
    def assemble():
        assembler = StreamAssembler("chat")
        for event in STREAM:
            assembler.feed(event)
        return assembler.answer()

    assert benchmark(assemble)["choices"][0]["message"]["content"] == "".join(WORDS)


def test_replay_an_answer_as_a_stream(benchmark):
    events = benchmark(replay, ANSWER, "chat", True)
    assert len(events) == 4
