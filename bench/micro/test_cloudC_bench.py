"""Micro benchmarks for the cloudC Gemini mapping: request and answer transforms, and stream rewriting.

Run with ``python -m pytest bench/micro/test_cloudC_bench.py --benchmark-enable`` (``-s`` prints the rates).
The stream benchmark (Gemini SSE in, vendorA chunks out) runs with the pure and the compiled SSE splitter and
records ``events_per_s`` in its extra info.
"""

from __future__ import annotations

from streams import chat_call, chunked, encode, report, rewrite, run

from gateway.providers.base import UpstreamCall
from gateway.providers.cloudC import CloudCAdapter
from gateway.schema.config import Config
from gateway.settings import Settings
from gateway.upstream.client import UpstreamClient

adapter = CloudCAdapter.create(UpstreamClient(Settings()))  # bearer tokens only: the client is never started
TEXT_EVENTS = 200
TARGET = Config(provider="cloudC", api_key="ya29.bench", cloudC_project_id="bench-proj", cloudC_region="us-central1")

REQUEST = {
    "model": "gemini-2.0-flash",
    "max_completion_tokens": 1024,
    "temperature": 0.3,
    "stop": ["END"],
    "messages": [
        {"role": "system", "content": "Answer in one short paragraph."},
        {"role": "user", "content": "Compare the weather in Lisbon and Bergen."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": '{"city":"Lisbon"}'}},
            {"id": "call_2", "type": "function", "function": {"name": "weather", "arguments": '{"city":"Bergen"}'}},
        ]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"sky":"clear","temp_c":26}'},
        {"role": "tool", "tool_call_id": "call_2", "content": "drizzle, 9C"},
        {"role": "user", "content": [{"type": "text", "text": "And this chart?"},
                                     {"type": "image_url", "image_url": {"url": "gs://bench-bucket/chart.png"}}]},
    ],
    "tools": [{"type": "function", "function": {
        "name": "weather", "description": "Current weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                       "additionalProperties": False}}}],
    "tool_choice": "auto",
}

ANSWER = encode({
    "candidates": [{"content": {"role": "model", "parts": [
        {"text": "Lisbon is clear and warm at 26C, while Bergen has drizzle at 9C. " * 4},
        {"functionCall": {"name": "weather", "args": {"city": "Oslo"}}}]},
        "finishReason": "STOP", "avgLogprobs": -0.2, "index": 0}],
    "usageMetadata": {"promptTokenCount": 412, "candidatesTokenCount": 96, "totalTokenCount": 508,
                      "cachedContentTokenCount": 128},
    "modelVersion": "gemini-2.0-flash-001", "createTime": "2025-01-01T00:00:00.000000Z", "responseId": "bench1",
})


def call_for(body: dict, stream: bool = False) -> UpstreamCall:
    return chat_call(TARGET, body, stream)


def stream_bytes() -> tuple[list[bytes], int]:
    """A Gemini SSE stream (CRLF, like the service) cut into network-sized chunks, and its event count."""
    events = [{"candidates": [{"content": {"role": "model", "parts": [{"text": f" word{i:03d}"}]}, "index": 0}],
               "modelVersion": "gemini-2.0-flash-001", "responseId": "bench1"} for i in range(TEXT_EVENTS)]
    events[-1]["candidates"][0]["finishReason"] = "STOP"
    events[-1]["usageMetadata"] = {"promptTokenCount": 25, "candidatesTokenCount": TEXT_EVENTS,
                                   "totalTokenCount": 25 + TEXT_EVENTS}
    raw = b"".join(b"data: " + encode(e) + b"\r\n\r\n" for e in events)
    return chunked(raw), len(events)


CHUNKS, EVENT_COUNT = stream_bytes()


def test_request_transform(benchmark):
    call = call_for(REQUEST)
    request = benchmark(lambda: run(adapter.build_request(call)))
    assert request.url.endswith(":generateContent") and b'"functionResponse"' in request.body


def test_response_transform(benchmark):
    call = call_for(REQUEST)
    result = benchmark(adapter.parse_response, call, 200, {}, ANSWER)
    assert b'"tool_calls"' in result.body and result.usage.total_tokens == 508


def test_stream_rewrite(benchmark, sse_in_use):
    call = call_for({**REQUEST, "stream": True, "stream_options": {"include_usage": True}}, stream=True)
    # one chunk per text event + finish chunk + usage chunk
    assert benchmark(rewrite, adapter, call, CHUNKS) == TEXT_EVENTS + 2
    report(benchmark, EVENT_COUNT)
