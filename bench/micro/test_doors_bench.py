"""Micro benchmarks for the front doors' translation: a Responses and a Messages request to unified chat, a unified
answer back, and a unified chat stream's events rewritten into each dialect (per event), plus the forwarded
stream's per-read cost (split to read usage, bytes relayed unchanged).

Run with ``python -m pytest bench/micro/test_doors_bench.py --benchmark-enable`` (add ``-s`` to see the rates).
"""

from __future__ import annotations

import msgspec

from gateway.pipeline.dialects.base import NativeStream, TranslatedStream
from gateway.pipeline.dialects.messages import MessagesDialect
from gateway.pipeline.dialects.responses import ResponsesDialect

DELTAS = 200
RESPONSES = ResponsesDialect()
MESSAGES = MessagesDialect()
TOOL = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
RESPONSES_BODY = msgspec.json.encode({
    "model": "claude-x", "instructions": "You are a concise assistant.", "max_output_tokens": 512,
    "temperature": 0.2, "tools": [{"type": "function", "name": "get_weather", "parameters": TOOL}],
    "input": [{"role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]},
              {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city":"Paris"}'},
              {"type": "function_call_output", "call_id": "call_1", "output": "sunny, 24C"},
              {"role": "user", "content": "Summarise, please."}]})
MESSAGES_BODY = msgspec.json.encode({
    "model": "gpt-x", "system": "You are a concise assistant.", "max_tokens": 512, "temperature": 0.2,
    "tools": [{"name": "get_weather", "input_schema": TOOL}],
    "messages": [{"role": "user", "content": "Weather in Paris?"},
                 {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                                                    "input": {"city": "Paris"}}]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                               "content": "sunny, 24C"}, {"type": "text", "text": "Summarise."}]}]})
ANSWER = msgspec.json.encode({
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "Sunny and warm in Paris today."},
         "finish_reason": "stop"}], "usage": {"prompt_tokens": 40, "completion_tokens": 8, "total_tokens": 48}})
HEAD = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
CHUNKS = [b"data: " + msgspec.json.encode({**HEAD, "choices": [{"index": 0, "delta": {"content": f" word{i}"},
                                                                  "finish_reason": None}]}) + b"\n\n"
          for i in range(DELTAS)]
CHUNKS.append(b"data: " + msgspec.json.encode({**HEAD, "choices": [{"index": 0, "delta": {},
                                                                     "finish_reason": "stop"}]}) + b"\n\n")


class _Unified:
    """A unified stream already split into events (what an adapter's transformer hands the door)."""

    usage = None

    def feed(self, chunk: bytes) -> list[bytes]:
        return [chunk]

    def close(self) -> list[bytes]:
        return []


def _translate(dialect, body: bytes) -> bytes:
    request = dialect.parse(body)
    return msgspec.json.encode(dialect.to_chat(request))


def test_responses_request_translation(benchmark):
    assert b'"tool_calls"' in benchmark(_translate, RESPONSES, RESPONSES_BODY)


def test_messages_request_translation(benchmark):
    assert b'"tool_calls"' in benchmark(_translate, MESSAGES, MESSAGES_BODY)


def test_answer_translation(benchmark):
    request = RESPONSES.parse(RESPONSES_BODY)
    assert b'"output_text"' in benchmark(RESPONSES.answer, request, ANSWER)


def _stream(dialect, body: bytes) -> int:
    stream = TranslatedStream(_Unified(), dialect.events(dialect.parse(body)))
    count = 0
    for chunk in CHUNKS:
        count += len(stream.feed(chunk))
    return count + len(stream.close())


def _per_event(benchmark, events: int) -> None:
    """Report the mean per event (when benchmarks are enabled: the suite runs them once, untimed)."""
    if benchmark.stats is not None:
        benchmark.extra_info["us_per_event"] = benchmark.stats.stats.mean / events * 1e6


def test_responses_stream_translation_per_event(benchmark):
    events = benchmark(_stream, RESPONSES, RESPONSES_BODY)
    assert events > DELTAS
    _per_event(benchmark, len(CHUNKS))


def test_messages_stream_translation_per_event(benchmark):
    events = benchmark(_stream, MESSAGES, MESSAGES_BODY)
    assert events > DELTAS
    _per_event(benchmark, len(CHUNKS))


FORWARDED = [b"event: response.output_text.delta\ndata: " + msgspec.json.encode(
    {"type": "response.output_text.delta", "sequence_number": i, "item_id": "msg_1", "output_index": 0,
     "content_index": 0, "delta": f" word{i}", "logprobs": []}) + b"\n\n" for i in range(DELTAS)]


def _forward() -> int:
    stream = NativeStream(RESPONSES, "vendorA")
    return sum(len(stream.feed(chunk)) for chunk in FORWARDED)


def test_forwarded_stream_per_event(benchmark):
    assert benchmark(_forward) == DELTAS
    _per_event(benchmark, DELTAS)
