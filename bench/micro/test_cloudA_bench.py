"""Micro benchmarks for cloudA: SigV4 signing, event-stream decoding, request and answer transforms.

Run with ``python -m pytest bench/micro/test_cloudA_bench.py --benchmark-enable`` (``-s`` prints the rates). There is
no compiled twin here: these numbers say whether one is worth writing.
"""

from __future__ import annotations

import msgspec

from gateway.providers.cloudA import converse, sigv4
from gateway.providers.cloudA import eventstream as es
from gateway.providers.cloudA.stream import ConverseStream
from gateway.schema.chat import parse_chat

CREDENTIALS = sigv4.Credentials("AKIDMOCKEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYMOCKEXAMPLEKEY", "token")
PATH = "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse-stream"
FRAMES = 200
CHUNK = 1024

CHAT = msgspec.json.encode({
    "model": "anthropic.claude-3-5-sonnet-20240620-v1:0",
    "messages": [
        {"role": "system", "content": "You are a helpful assistant. " * 10},
        {"role": "user", "content": "What is the weather in Paris and in Rome? " * 5},
        {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "get_weather", "arguments": '{"location":"Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18C and sunny"},
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
                                                "parameters": {"type": "object", "properties": {
                                                    "location": {"type": "string"}}}}}],
    "max_tokens": 512, "temperature": 0.2, "stream": True,
})
REQUEST = parse_chat(CHAT)
ANSWER = msgspec.json.encode({
    "output": {"message": {"role": "assistant", "content": [{"text": "The weather is fine. " * 20}]}},
    "stopReason": "end_turn", "usage": {"inputTokens": 120, "outputTokens": 80, "totalTokens": 200},
    "metrics": {"latencyMs": 300},
})


def stream_bytes() -> bytes:
    frames = [es.event_message("messageStart", b'{"role":"assistant","p":"abcdefgh"}')]
    for i in range(FRAMES):
        frames.append(es.event_message(
            "contentBlockDelta", b'{"contentBlockIndex":0,"delta":{"text":" token%03d"},"p":"abcdefghijkl"}' % i))
    frames.append(es.event_message("contentBlockStop", b'{"contentBlockIndex":0}'))
    frames.append(es.event_message("messageStop", b'{"stopReason":"end_turn"}'))
    frames.append(es.event_message("metadata", b'{"usage":{"inputTokens":9,"outputTokens":200,"totalTokens":209}}'))
    return b"".join(frames)


STREAM = stream_bytes()
CHUNKS = [STREAM[i:i + CHUNK] for i in range(0, len(STREAM), CHUNK)]


def report(benchmark, name: str, per_round: int, size: int = 0) -> None:
    stats = getattr(benchmark, "stats", None)
    if stats is None:  # benchmarks disabled: the function ran once, untimed
        return
    rate = per_round / stats.stats.mean
    if size:
        benchmark.extra_info["mib_per_s"] = round(size / stats.stats.mean / 2 ** 20, 1)
    benchmark.extra_info[name] = round(rate)
    print(f"\n{benchmark.name}: {rate:,.0f} {name.replace('_', ' ')}")


def test_sign_a_converse_request(benchmark):
    body = converse.build_body(REQUEST, False)
    headers = benchmark(sigv4.Signer().sign, "POST", "bedrock-runtime.us-east-1.amazonaws.com", PATH, body, CREDENTIALS,
                        "us-east-1", "bedrock", headers={"content-type": "application/json"})
    assert headers["authorization"].startswith("AWS4-HMAC-SHA256 ")
    report(benchmark, "signatures_per_s", 1)


def test_decode_an_event_stream_in_1kib_chunks(benchmark):
    def decode() -> int:
        decoder = es.EventStreamDecoder()
        return sum(len(decoder.feed(chunk)) for chunk in CHUNKS)

    assert benchmark(decode) == FRAMES + 4
    report(benchmark, "frames_per_s", FRAMES + 4, len(STREAM))


def test_transform_a_stream_to_sse_chunks(benchmark):
    def transform() -> int:
        stream = ConverseStream("cloudA", "m", True, False)
        return sum(len(stream.feed(chunk)) for chunk in CHUNKS) + len(stream.close())

    assert benchmark(transform) == FRAMES + 3
    report(benchmark, "frames_per_s", FRAMES + 4)


def test_build_a_converse_request_body(benchmark):
    body = benchmark(converse.build_body, REQUEST, False)
    assert b'"toolConfig"' in body
    report(benchmark, "requests_per_s", 1)


def test_turn_a_converse_answer_into_a_chat_completion(benchmark):
    body, usage = benchmark(converse.parse_response, "cloudA", ANSWER, "m", False)
    assert usage.total_tokens == 200
    report(benchmark, "answers_per_s", 1)
