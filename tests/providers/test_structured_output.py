"""The output-tool decisions for response_format, and the anthropic / cloudA answers and streams that carry it."""

from __future__ import annotations

import msgspec
import pytest

from gateway.http.errors import InvalidRequest
from gateway.providers.anthropic.response import chat_completion, decode_message
from gateway.providers.anthropic.stream import AnthropicStream
from gateway.providers.cloudA import converse
from gateway.providers.cloudA.eventstream import event_message
from gateway.providers.cloudA.stream import ConverseStream
from gateway.providers.structured_output import PERMISSIVE_OBJECT, output_tool, output_tool_name
from gateway.schema.chat import parse_chat

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOL = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
JSON_SCHEMA = {"type": "json_schema", "json_schema": {"name": "City", "description": "A city.", "schema": SCHEMA}}


def request(**fields):
    return parse_chat(msgspec.json.encode({"model": "m", "messages": [{"role": "user", "content": "hi"}], **fields}))


def test_json_schema_is_a_forced_tool_with_the_schema():
    tool = output_tool(request(response_format=JSON_SCHEMA))
    assert (tool.name, tool.schema, tool.forced) == ("json_response", SCHEMA, True)
    assert "City" in tool.description and "A city." in tool.description


def test_json_object_takes_any_object_and_text_needs_no_tool():
    assert output_tool(request(response_format={"type": "json_object"})).schema == PERMISSIVE_OBJECT
    assert output_tool(request(response_format={"type": "text"})) is None
    assert output_tool(request()) is None
    typeless = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"properties": {}}}}
    assert output_tool(request(response_format=typeless)).schema == {"type": "object", "properties": {}}


@pytest.mark.parametrize("choice,forced,offered", [
    (None, False, True), ("auto", False, True), ("none", True, True),
    ("required", None, False), ({"type": "function", "function": {"name": "lookup"}}, None, False),
])
def test_client_tools_and_tool_choice_decide(choice, forced, offered):
    fields = {"response_format": JSON_SCHEMA, "tools": [TOOL]}
    if choice is not None:
        fields["tool_choice"] = choice
    tool = output_tool(request(**fields))
    assert (tool is not None) == offered
    if offered:
        assert tool.forced is forced


def test_the_name_never_clashes_with_a_client_tool():
    clash = [{"type": "function", "function": {"name": n}} for n in ("json_response", "json_response_1")]
    assert output_tool_name(request(response_format=JSON_SCHEMA, tools=clash)) == "json_response_2"


def test_a_root_schema_that_is_not_an_object_is_a_400_naming_the_schema():
    """A tool input is an object on both APIs; the shape of response_format itself is checked at decode time
    (tests/schema/test_chat.py)."""
    with pytest.raises(InvalidRequest) as info:
        output_tool(request(response_format={"type": "json_schema",
                                             "json_schema": {"name": "s", "schema": {"type": "string"}}}))
    assert info.value.param == "response_format.json_schema.schema"


# --- anthropic ------------------------------------------------------------------------------------------------

def anthropic_answer(blocks: list, stop_reason: str = "tool_use") -> bytes:
    return msgspec.json.encode({"type": "message", "id": "msg_1", "model": "claude", "role": "assistant",
                                "content": blocks, "stop_reason": stop_reason,
                                "usage": {"input_tokens": 5, "output_tokens": 7}})


def test_anthropic_output_tool_input_is_the_content():
    body = anthropic_answer([{"type": "text", "text": "Here you go:"},
                             {"type": "tool_use", "id": "t1", "name": "json_response", "input": {"city": "Oslo"}}])
    data, _ = chat_completion(decode_message(body), "claude", True, "json_response")
    choice = msgspec.json.decode(data)["choices"][0]
    assert msgspec.json.decode(choice["message"]["content"]) == {"city": "Oslo"}
    assert "tool_calls" not in choice["message"] and choice["finish_reason"] == "stop"


def test_anthropic_client_tool_call_beside_the_output_tool_stays_a_tool_call():
    body = anthropic_answer([{"type": "tool_use", "id": "t1", "name": "lookup", "input": {}}])
    data, _ = chat_completion(decode_message(body), "claude", True, "json_response")
    choice = msgspec.json.decode(data)["choices"][0]
    assert choice["message"]["content"] is None and choice["finish_reason"] == "tool_calls"
    assert choice["message"]["tool_calls"][0]["function"] == {"name": "lookup", "arguments": "{}"}


def sse(event: dict) -> bytes:
    return b"event: " + event["type"].encode() + b"\ndata: " + msgspec.json.encode(event) + b"\n\n"


def chunks(events: list[bytes]) -> list[dict]:
    return [msgspec.json.decode(e[6:]) for e in events]


def test_anthropic_stream_sends_the_output_tool_input_as_content():
    stream = AnthropicStream(True, True, False, "claude", "json_response")
    upstream = [
        {"type": "message_start", "message": {"id": "msg_1", "model": "claude", "usage": {"input_tokens": 3}}},
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "tool_use", "id": "t1", "name": "json_response", "input": {}}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": '{"ci'}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": 'ty": 1}'}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 4}},
        {"type": "message_stop"},
    ]
    out = chunks(stream.feed(b"".join(sse(e) for e in upstream)) + stream.close())
    deltas = [c["choices"][0]["delta"] for c in out]
    assert "".join(d.get("content") or "" for d in deltas) == '{"city": 1}'
    assert not any("tool_calls" in d for d in deltas)
    assert out[-1]["choices"][0]["finish_reason"] == "stop"
    assert all(c["system_fingerprint"] is None for c in out)


def test_anthropic_stream_output_tool_without_input_is_an_empty_object():
    stream = AnthropicStream(True, True, False, "claude", "json_response")
    upstream = [
        {"type": "message_start", "message": {"id": "msg_1", "model": "claude"}},
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "tool_use", "id": "t1", "name": "json_response", "input": {}}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}},
        {"type": "message_stop"},
    ]
    out = chunks(stream.feed(b"".join(sse(e) for e in upstream)))
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in out) == "{}"


# --- cloudA ---------------------------------------------------------------------------------------------------

def test_cloudA_output_tool_input_is_the_content():
    body = msgspec.json.encode({"output": {"message": {"role": "assistant", "content": [
        {"toolUse": {"toolUseId": "t1", "name": "json_response", "input": {"city": "Oslo"}}}]}},
        "stopReason": "tool_use", "usage": {"inputTokens": 3, "outputTokens": 4}})
    data, _ = converse.parse_response("cloudA", body, "m", False, "json_response")
    doc = msgspec.json.decode(data)
    message = doc["choices"][0]["message"]
    assert msgspec.json.decode(message["content"]) == {"city": "Oslo"} and "tool_calls" not in message
    assert doc["choices"][0]["finish_reason"] == "stop" and doc["system_fingerprint"] is None


def frame(event_type: str, doc: dict) -> bytes:
    return event_message(event_type, msgspec.json.encode(doc))


def test_cloudA_stream_sends_the_output_tool_input_as_content():
    stream = ConverseStream("cloudA", "m", False, False, "json_response")
    body = b"".join([
        frame("messageStart", {"role": "assistant"}),
        frame("contentBlockStart", {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "t", "name":
                                                                                   "json_response"}}}),
        frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"toolUse": {"input": '{"city"'}}}),
        frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"toolUse": {"input": ': "Oslo"}'}}}),
        frame("contentBlockStop", {"contentBlockIndex": 0}),
        frame("messageStop", {"stopReason": "tool_use"}),
    ])
    out = chunks(stream.feed(body) + stream.close())
    deltas = [c["choices"][0]["delta"] for c in out]
    assert "".join(d.get("content") or "" for d in deltas) == '{"city": "Oslo"}'
    assert not any("tool_calls" in d for d in deltas)
    assert out[-1]["choices"][0]["finish_reason"] == "stop"
