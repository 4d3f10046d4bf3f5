"""Micro benchmarks for the anthropic adapter: request and answer transforms, and stream rewriting throughput.

Run with ``python -m pytest bench/micro/test_anthropic_bench.py --benchmark-enable`` (add ``-s`` to see the
rates). Stream rewriting (anthropic SSE in, vendorA chunks out) is measured with the compiled and the pure SSE
splitter; each stream benchmark records ``events_per_s`` in its extra info.
"""

from __future__ import annotations

from streams import chat_call, chunked, encode, report, rewrite, run

from gateway.providers.anthropic import AnthropicAdapter
from gateway.providers.base import UpstreamCall
from gateway.schema.config import Config

adapter = AnthropicAdapter()
TEXT_DELTAS = 200
TARGET = Config(provider="anthropic", api_key="sk-ant")

REQUEST = {
    "model": "claude-x",
    "max_completion_tokens": 1024,
    "temperature": 0.2,
    "stop": "END",
    "messages": [
        {"role": "system", "content": "You are a concise assistant that answers in one paragraph."},
        {"role": "user", "content": "What is the weather in Paris and in Oslo?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "toolu_01", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}},
            {"id": "toolu_02", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'}},
        ]},
        {"role": "tool", "tool_call_id": "toolu_01", "content": "sunny, 24C"},
        {"role": "tool", "tool_call_id": "toolu_02", "content": "rain, 11C"},
        {"role": "user", "content": [{"type": "text", "text": "Summarise, please."},
                                     {"type": "image_url", "image_url": {"url": "https://example.com/map.png"}}]},
    ],
    "tools": [{"type": "function", "function": {
        "name": "get_weather", "description": "Current weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
    "tool_choice": "auto",
}

ANSWER = encode({
    "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant", "model": "claude-x",
    "content": [{"type": "text", "text": "Paris is sunny at 24C while Oslo is rainy at 11C. " * 4},
                {"type": "tool_use", "id": "toolu_03", "name": "get_weather", "input": {"city": "Rome"}}],
    "stop_reason": "tool_use", "stop_sequence": None,
    "usage": {"input_tokens": 412, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 128,
              "output_tokens": 96},
})


def call_for(body: dict, stream: bool = False) -> UpstreamCall:
    return chat_call(TARGET, body, stream)


def sse_event(doc: dict) -> bytes:
    return b"event: " + doc["type"].encode() + b"\ndata: " + encode(doc) + b"\n\n"


def stream_bytes() -> tuple[list[bytes], int]:
    """A realistic anthropic stream cut into network-sized chunks, and its event count."""
    events = [{"type": "message_start", "message": {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant", "model": "claude-x",
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 25, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
                  "output_tokens": 1}}},
        {"type": "ping"},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}]
    events += [{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": f" word{i:03d}"}}
               for i in range(TEXT_DELTAS)]
    events += [{"type": "content_block_stop", "index": 0},
               {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": TEXT_DELTAS}},
               {"type": "message_stop"}]
    raw = b"".join(sse_event(e) for e in events)
    return chunked(raw), len(events)


CHUNKS, EVENT_COUNT = stream_bytes()


def test_request_transform(benchmark):
    call = call_for(REQUEST)
    request = benchmark(lambda: run(adapter.build_request(call)))
    assert request.url.endswith("/messages") and b'"tool_result"' in request.body


def test_response_transform(benchmark):
    call = call_for(REQUEST)
    result = benchmark(adapter.parse_response, call, 200, {}, ANSWER)
    assert b'"tool_calls"' in result.body and result.usage.prompt_tokens == 540


def test_stream_rewrite(benchmark, sse_in_use):
    call = call_for({**REQUEST, "stream": True, "stream_options": {"include_usage": True}}, stream=True)
    # role chunk + one chunk per text delta + finish chunk + usage chunk
    assert benchmark(rewrite, adapter, call, CHUNKS) == TEXT_DELTAS + 3
    report(benchmark, EVENT_COUNT)


STRUCTURED = {**REQUEST, "tools": None, "tool_choice": None, "stream": True,
              "response_format": {"type": "json_schema", "json_schema": {"name": "Summary", "schema": {
                  "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}}}


def structured_stream_bytes() -> tuple[list[bytes], int]:
    """A forced output tool's stream: its input arrives as input_json_delta pieces (they go out as content)."""
    events = [{"type": "message_start", "message": {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant", "model": "claude-x",
        "content": [], "usage": {"input_tokens": 25, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {
            "type": "tool_use", "id": "toolu_01", "name": "json_response", "input": {}}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta",
                                                              "partial_json": '{"text": "'}}]
    events += [{"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta",
                                                                     "partial_json": f" word{i:03d}"}}
               for i in range(TEXT_DELTAS)]
    events += [{"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": '"}'}},
               {"type": "content_block_stop", "index": 0},
               {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 200}},
               {"type": "message_stop"}]
    return chunked(b"".join(sse_event(e) for e in events)), len(events)


STRUCTURED_CHUNKS, STRUCTURED_EVENT_COUNT = structured_stream_bytes()


def test_structured_output_stream_rewrite(benchmark, sse_in_use):
    call = call_for(STRUCTURED, stream=True)
    # role chunk + one content chunk per input_json piece + finish chunk
    assert benchmark(rewrite, adapter, call, STRUCTURED_CHUNKS) == TEXT_DELTAS + 4
    report(benchmark, STRUCTURED_EVENT_COUNT)
