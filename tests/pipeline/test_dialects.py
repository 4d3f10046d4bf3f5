"""The front doors' pure pieces: which header is which key, request translation and its 400s, and the event
sequences a unified stream becomes (sequence numbers, indexes, closing events)."""

from __future__ import annotations

import msgspec
import pytest

from gateway.http.errors import GatewayError, InvalidRequest, UpstreamError
from gateway.pipeline.dialects.base import TranslatedStream, dialect_error
from gateway.pipeline.dialects.door import door_headers
from gateway.pipeline.dialects.messages import MessagesDialect, error_type
from gateway.pipeline.dialects.responses import ResponsesDialect
from gateway.schema.common import Usage

RESPONSES = ResponsesDialect()
MESSAGES = MessagesDialect()


def test_one_token_is_the_gateway_key_and_is_not_kept():
    assert door_headers([(b"x-api-key", b"gw")]) == [(b"x-gateway-api-key", b"gw")]
    assert door_headers([(b"authorization", b"Bearer gw")]) == [(b"x-gateway-api-key", b"gw")]
    both = door_headers([(b"x-api-key", b"gw"), (b"authorization", b"Bearer other")])
    assert both == [(b"x-gateway-api-key", b"gw")]


def test_with_a_gateway_key_the_other_token_is_the_provider_key():
    headers = [(b"x-gateway-api-key", b"gw"), (b"x-api-key", b"sk-ant")]
    assert (b"authorization", b"Bearer sk-ant") in door_headers(headers)
    chat_like = [(b"x-gateway-api-key", b"gw"), (b"authorization", b"Bearer sk-provider")]
    assert door_headers(chat_like) == chat_like


def _events(data: list[bytes]) -> list[dict]:
    out = []
    for block in b"".join(data).split(b"\n\n"):
        if block:
            name, payload = block.split(b"\n", 1)
            doc = msgspec.json.decode(payload[6:])
            assert name[7:].decode() == doc["type"]  # the SSE event name is the data's type
            out.append(doc)
    return out


class _Unified:
    usage = Usage(11, 7, 18)

    def feed(self, chunk: bytes) -> list[bytes]:
        return [chunk]

    def close(self) -> list[bytes]:
        return []


def _chunk(delta: dict, finish: str | None = None) -> bytes:
    return b"data: " + msgspec.json.encode({"id": "chatcmpl-1", "model": "m", "choices": [
        {"index": 0, "delta": delta, "finish_reason": finish}]}) + b"\n\n"


UNIFIED = [_chunk({"role": "assistant", "content": "Hel"}), _chunk({"content": "lo"}),
           _chunk({"tool_calls": [{"index": 0, "id": "call_1", "function": {"name": "f", "arguments": "{\"a\""}}]}),
           _chunk({"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]}), _chunk({}, "tool_calls")]


def test_a_unified_stream_becomes_the_responses_event_sequence():
    stream = TranslatedStream(_Unified(), RESPONSES.events(RESPONSES.parse(b'{"model": "m", "input": "hi"}')))
    out = []
    for chunk in UNIFIED:
        out.extend(stream.feed(chunk))
    out.extend(stream.close())
    events = _events(out)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert [e["type"] for e in events] == [
        "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.delta", "response.output_item.added",
        "response.function_call_arguments.delta", "response.function_call_arguments.delta",
        "response.output_text.done", "response.content_part.done", "response.output_item.done",
        "response.function_call_arguments.done", "response.output_item.done", "response.completed"]
    final = events[-1]["response"]
    assert final["id"] == events[0]["response"]["id"] and final["status"] == "completed"
    assert final["output"][0]["content"][0]["text"] == "Hello"
    assert final["output"][1]["arguments"] == '{"a": 1}' and final["output"][1]["call_id"] == "call_1"
    assert final["usage"] == {"input_tokens": 11, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 7,
                              "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 18}


def test_a_unified_stream_becomes_the_messages_event_sequence():
    request = MESSAGES.parse(b'{"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}')
    stream = TranslatedStream(_Unified(), MESSAGES.events(request))
    out = []
    for chunk in UNIFIED:
        out.extend(stream.feed(chunk))
    out.extend(stream.close())
    events = _events(out)
    assert [e["type"] for e in events] == [
        "message_start", "ping", "content_block_start", "content_block_delta", "content_block_delta",
        "content_block_stop", "content_block_start", "content_block_delta", "content_block_delta",
        "content_block_stop", "message_delta", "message_stop"]
    assert [e.get("index") for e in events if e["type"].startswith("content_block")] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert events[6]["content_block"] == {"type": "tool_use", "id": "call_1", "name": "f", "input": {}}
    assert events[-2]["delta"]["stop_reason"] == "tool_use" and events[-2]["usage"]["output_tokens"] == 7


@pytest.mark.parametrize(("body", "param"), [
    ({"model": "m", "messages": [{"role": "user", "content": "hi"}]}, "max_tokens"),
    ({"model": "m", "max_tokens": 5, "messages": []}, "messages"),
    ({"model": "m", "max_tokens": 5, "messages": [{"role": "system", "content": "x"}]}, "messages[0].role"),
    ({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}],
      "tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "tools[0].type"),
    ({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "tool_choice": {"type": "x"}},
     "tool_choice.type"),
    ({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "metadata": {"user_id": 5}},
     "metadata.user_id"),
    ({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "metadata": "u-1"}, "metadata"),
])
def test_bad_messages_requests_name_the_field(body, param):
    with pytest.raises(InvalidRequest) as caught:
        MESSAGES.to_chat(MESSAGES.parse(msgspec.json.encode(body)))
    assert caught.value.param == param


@pytest.mark.parametrize(("body", "param"), [
    ({"model": "m"}, "input"),
    ({"model": "m", "input": [{"type": "computer_call"}]}, "input[0].type"),
    ({"model": "m", "input": "x", "text": {"format": {"type": "xml"}}}, "text.format.type"),
    ({"model": "m", "input": "x", "reasoning": {"effort": "max"}}, "reasoning.effort"),
    ({"model": "m", "input": "x", "tools": [{"type": "file_search"}]}, "tools[0].type"),
    ({"model": "m", "input": "x", "metadata": {f"k{i}": "v" for i in range(17)}}, "metadata"),
    ({"model": "m", "input": "x", "metadata": {"ticket": 42}}, "metadata.ticket"),
    ({"model": "m", "input": "x", "metadata": {"ticket": "x" * 513}}, "metadata.ticket"),
])
def test_bad_responses_requests_name_the_field(body, param):
    with pytest.raises(InvalidRequest) as caught:
        RESPONSES.to_chat(RESPONSES.parse(msgspec.json.encode(body)))
    assert caught.value.param == param


def test_messages_errors_carry_anthropic_types_by_status():
    assert [error_type(s) for s in (400, 401, 403, 404, 413, 429, 500, 529, 446, 503)] == [
        "invalid_request_error", "authentication_error", "permission_error", "not_found_error", "request_too_large",
        "rate_limit_error", "api_error", "overloaded_error", "invalid_request_error", "api_error"]
    error = dialect_error(UpstreamError("slow down", status=429), MESSAGES)
    assert error.status == 429
    assert msgspec.json.decode(error.body()) == {"type": "error", "error": {"type": "rate_limit_error",
                                                                           "message": "slow down"}}
    answer = dialect_error(GatewayError("x", status=400), RESPONSES).body()
    assert msgspec.json.decode(answer)["error"]["message"] == "x"
