"""cloudA Converse mapping: request bodies, answers, stream frames to chunks, AWS errors to statuses."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.http.errors import BadUpstreamResponse, GatewayError, InvalidRequest
from gateway.providers.cloudA import converse
from gateway.providers.cloudA import eventstream as es
from gateway.providers.cloudA.stream import ConverseStream
from gateway.schema.chat import parse_chat

decode = msgspec.json.decode
encode = msgspec.json.encode
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
                                            "parameters": {"type": "object",
                                                           "properties": {"location": {"type": "string"}}}}}


def body_for(doc: dict, reasoning: bool = False) -> dict:
    return decode(converse.build_body(parse_chat(encode({"model": "m", **doc})), reasoning))


# --- request --------------------------------------------------------------------------------------------------

def test_system_and_developer_become_system_blocks_and_roles_alternate():
    body = body_for({"messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "developer", "content": [{"type": "text", "text": "Use French."}]},
        {"role": "user", "content": "Hi"},
        {"role": "user", "content": [{"type": "text", "text": "there"}]},
        {"role": "assistant", "content": "Salut"},
    ]})
    assert body["system"] == [{"text": "Be brief."}, {"text": "Use French."}]
    assert body["messages"] == [
        {"role": "user", "content": [{"text": "Hi"}, {"text": "there"}]},
        {"role": "assistant", "content": [{"text": "Salut"}]},
    ]
    assert "inferenceConfig" not in body and "toolConfig" not in body


def test_inference_settings_map_to_inference_config():
    body = body_for({"messages": [{"role": "user", "content": "x"}], "max_tokens": 50,
                     "max_completion_tokens": 77, "temperature": 0.3, "top_p": 0.9, "stop": "END"})
    assert body["inferenceConfig"] == {"maxTokens": 77, "temperature": 0.3, "topP": 0.9, "stopSequences": ["END"]}
    assert body_for({"messages": [{"role": "user", "content": "x"}], "max_tokens": 5, "stop": ["a", "b"]})[
        "inferenceConfig"] == {"maxTokens": 5, "stopSequences": ["a", "b"]}


def test_data_url_images_become_image_blocks_with_their_format():
    body = body_for({"messages": [{"role": "user", "content": [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": f"data:image/jpg;base64,{PNG}"}},
    ]}]})
    assert body["messages"][0]["content"][1] == {"image": {"format": "jpeg", "source": {"bytes": PNG}}}


def test_remote_image_urls_are_a_400_naming_the_field():
    with pytest.raises(InvalidRequest) as info:
        body_for({"messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]}]})
    assert info.value.param == "messages[0].content[0].image_url.url"


def test_tool_round_trip_becomes_tool_use_and_a_user_tool_result():
    body = body_for({"tools": [WEATHER], "messages": [
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"location":"Paris"}'}},
            {"id": "call_2", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"location":"Rome"}'}},
        ]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18C"},
        {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "21C"}]},
    ]})
    assert body["messages"][1] == {"role": "assistant", "content": [
        {"toolUse": {"toolUseId": "call_1", "name": "get_weather", "input": {"location": "Paris"}}},
        {"toolUse": {"toolUseId": "call_2", "name": "get_weather", "input": {"location": "Rome"}}},
    ]}
    assert body["messages"][2] == {"role": "user", "content": [
        {"toolResult": {"toolUseId": "call_1", "content": [{"text": "18C"}]}},
        {"toolResult": {"toolUseId": "call_2", "content": [{"text": "21C"}]}},
    ]}
    assert body["toolConfig"] == {"tools": [{"toolSpec": {
        "name": "get_weather", "description": "Weather for a city",
        "inputSchema": {"json": WEATHER["function"]["parameters"]}}}]}


@pytest.mark.parametrize(("choice", "expected"), [
    ("auto", {"auto": {}}),
    ("required", {"any": {}}),
    ({"type": "function", "function": {"name": "get_weather"}}, {"tool": {"name": "get_weather"}}),
])
def test_tool_choice_maps_to_converse_tool_choice(choice, expected):
    body = body_for({"messages": [{"role": "user", "content": "x"}], "tools": [WEATHER], "tool_choice": choice})
    assert body["toolConfig"]["toolChoice"] == expected


def test_tool_choice_none_sends_no_tools_unless_the_history_needs_them():
    plain = body_for({"messages": [{"role": "user", "content": "x"}], "tools": [WEATHER], "tool_choice": "none"})
    assert "toolConfig" not in plain
    history = body_for({"tools": [WEATHER], "tool_choice": "none", "messages": [
        {"role": "user", "content": "x"},
        {"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
                                              "function": {"name": "get_weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c", "content": "ok"}]})
    assert history["toolConfig"] == {"tools": plain_tools()} and "toolChoice" not in history["toolConfig"]


def plain_tools() -> list:
    return [{"toolSpec": {"name": "get_weather", "description": "Weather for a city",
                          "inputSchema": {"json": WEATHER["function"]["parameters"]}}}]


def test_bad_tool_arguments_and_missing_tool_ids_are_400s_naming_the_field():
    with pytest.raises(InvalidRequest) as info:
        body_for({"tools": [WEATHER], "messages": [{"role": "user", "content": "x"}, {
            "role": "assistant", "tool_calls": [{"id": "c", "type": "function",
                                                 "function": {"name": "get_weather", "arguments": "{oops"}}]}]})
    assert info.value.param == "messages[1].tool_calls[0].function.arguments"
    with pytest.raises(InvalidRequest) as info:
        body_for({"messages": [{"role": "user", "content": "x"}, {"role": "tool", "content": "r"}]})
    assert info.value.param == "messages[1].tool_call_id"


def test_thinking_goes_to_additional_fields_only_when_not_strict():
    doc = {"messages": [{"role": "user", "content": "x"}], "thinking": {"type": "enabled", "budget_tokens": 1024}}
    assert "additionalModelRequestFields" not in body_for(doc)
    assert body_for(doc, reasoning=True)["additionalModelRequestFields"] == {
        "thinking": {"type": "enabled", "budget_tokens": 1024}}


# --- response -------------------------------------------------------------------------------------------------

def answer(content: list, stop: str = "end_turn", usage: dict | None = None) -> bytes:
    return encode({"output": {"message": {"role": "assistant", "content": content}}, "stopReason": stop,
                   "usage": usage or {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15},
                   "metrics": {"latencyMs": 100}})


def test_text_answer_becomes_a_chat_completion_with_usage():
    body, usage = converse.parse_response("cloudA", answer([{"text": "Hello"}, {"text": " world"}]), "m", False)
    doc = decode(body)
    assert doc["id"].startswith("chatcmpl-") and doc["object"] == "chat.completion" and doc["model"] == "m"
    assert doc["choices"] == [{"message": {"content": "Hello world", "role": "assistant", "refusal": None},
                               "finish_reason": "stop", "index": 0, "logprobs": None}]
    assert doc["usage"] == {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (10, 5, 15)


def test_tool_use_answer_becomes_tool_calls_with_json_arguments():
    body, _ = converse.parse_response("cloudA", answer([
        {"toolUse": {"toolUseId": "tooluse_1", "name": "get_weather", "input": {"location": "Paris"}}}],
        "tool_use"), "m", False)
    choice = decode(body)["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    assert choice["message"]["tool_calls"] == [{"id": "tooluse_1", "type": "function", "function": {
        "name": "get_weather", "arguments": '{"location":"Paris"}'}}]


@pytest.mark.parametrize(("stop", "finish"), [
    ("end_turn", "stop"), ("stop_sequence", "stop"), ("max_tokens", "length"), ("tool_use", "tool_calls"),
    ("content_filtered", "content_filter"), ("guardrail_intervened", "content_filter"),
])
def test_stop_reasons_map_to_finish_reasons(stop, finish):
    body, _ = converse.parse_response("cloudA", answer([{"text": "x"}], stop), "m", False)
    assert decode(body)["choices"][0]["finish_reason"] == finish


def test_cache_reads_are_reported_as_cached_prompt_tokens():
    body, _ = converse.parse_response("cloudA", answer([{"text": "x"}], usage={
        "inputTokens": 20, "outputTokens": 2, "totalTokens": 822, "cacheReadInputTokens": 800}), "m", False)
    assert decode(body)["usage"] == {"prompt_tokens": 20, "completion_tokens": 2, "total_tokens": 822,
                                     "prompt_tokens_details": {"cached_tokens": 800}}


def test_reasoning_is_returned_only_when_not_strict():
    content = [{"reasoningContent": {"reasoningText": {"text": "Think.", "signature": "sig"}}}, {"text": "Answer"}]
    strict = decode(converse.parse_response("cloudA", answer(content), "m", False)[0])["choices"][0]["message"]
    loose = decode(converse.parse_response("cloudA", answer(content), "m", True)[0])["choices"][0]["message"]
    assert "reasoning_content" not in strict and strict["content"] == "Answer"
    assert loose["reasoning_content"] == "Think."


@pytest.mark.parametrize("raw", [b"<html>nginx</html>", b'{"foo": 1}', b"[]"])
def test_answers_that_are_not_converse_are_502s_naming_the_provider(raw):
    with pytest.raises(BadUpstreamResponse) as info:
        converse.parse_response("cloudA", raw, "m", False)
    assert info.value.status == 502 and "cloudA" in info.value.message


# --- errors ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("error_type", "status"), [
    ("ThrottlingException", 429), ("ValidationException", 400), ("AccessDeniedException", 403),
    ("ResourceNotFoundException", 404), ("ModelTimeoutException", 408), ("ServiceUnavailableException", 503),
    ("InternalServerException", 500), ("ModelNotReadyException", 429), ("ModelErrorException", 424),
    ("UnrecognizedClientException", 403),
])
def test_aws_error_types_map_to_statuses_with_the_message(error_type, status):
    headers = {"x-amzn-ErrorType": f"{error_type}:http://internal.amazon.com/coral/com.amazon.bedrock/"}
    error = converse.aws_error("cloudA", 500, headers, b'{"message":"it broke"}')
    assert (error.status, error.message, error.type) == (status, "it broke", error_type)
    assert decode(error.body())["provider"] == "cloudA"


def test_error_type_and_message_may_come_from_the_body():
    error = converse.aws_error("cloudA", 400, {}, b'{"__type":"com.amazon.coral.validate#ValidationException",'
                                                  b'"Message":"bad field"}')
    assert (error.status, error.type, error.message) == (400, "ValidationException", "bad field")


def test_retry_after_is_relayed_and_unknown_bodies_keep_the_status():
    error = converse.aws_error("cloudA", 429, {"x-amzn-ErrorType": "ThrottlingException", "retry-after": "3"},
                               b'{"message":"slow"}')
    assert (b"retry-after", b"3") in error.headers
    unknown = converse.aws_error("cloudA", 502, {}, b"<html>bad gateway</html>")
    assert unknown.status == 502 and "bad gateway" in unknown.message


# --- stream ---------------------------------------------------------------------------------------------------

def frames(*events: tuple[str, dict]) -> bytes:
    return b"".join(es.event_message(name, encode({**doc, "p": "abc"})) for name, doc in events)


TEXT_STREAM = frames(
    ("messageStart", {"role": "assistant"}),
    ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hel"}}),
    ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "lo"}}),
    ("contentBlockStop", {"contentBlockIndex": 0}),
    ("messageStop", {"stopReason": "end_turn"}),
    ("metadata", {"usage": {"inputTokens": 3, "outputTokens": 2, "totalTokens": 5}, "metrics": {"latencyMs": 9}}),
)
TOOL_STREAM = frames(
    ("messageStart", {"role": "assistant"}),
    ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Checking."}}),
    ("contentBlockStop", {"contentBlockIndex": 0}),
    ("contentBlockStart", {"contentBlockIndex": 1, "start": {"toolUse": {"toolUseId": "t1", "name": "get_weather"}}}),
    ("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"toolUse": {"input": '{"location"'}}}),
    ("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"toolUse": {"input": ': "Paris"}'}}}),
    ("contentBlockStop", {"contentBlockIndex": 1}),
    ("contentBlockStart", {"contentBlockIndex": 2, "start": {"toolUse": {"toolUseId": "t2", "name": "get_time"}}}),
    ("contentBlockDelta", {"contentBlockIndex": 2, "delta": {"toolUse": {"input": "{}"}}}),
    ("messageStop", {"stopReason": "tool_use"}),
)


def run(data: bytes, sizes: list[int] | None = None, include_usage: bool = False, reasoning: bool = False):
    stream = ConverseStream("cloudA", "m", include_usage, reasoning)
    events: list[bytes] = []
    pos = 0
    sizes = sizes or [len(data)]
    i = 0
    while pos < len(data):
        size = sizes[i % len(sizes)]
        events.extend(stream.feed(data[pos:pos + size]))
        pos += size
        i += 1
    events.extend(stream.close())
    chunks = []
    for event in events:
        assert event.startswith(b"data: ") and event.endswith(b"\n\n")
        chunks.append(decode(event[6:-2]))
    return stream, chunks


def test_text_stream_becomes_chunks_with_one_id_a_finish_and_usage():
    stream, chunks = run(TEXT_STREAM, include_usage=True)
    assert {c["id"] for c in chunks} == {stream.id} and all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"]) == "Hello"
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == {
        "prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    assert stream.usage.total_tokens == 5


def test_without_include_usage_there_is_no_usage_chunk_but_usage_is_recorded():
    stream, chunks = run(TEXT_STREAM)
    assert all(c["choices"] for c in chunks) and stream.usage.prompt_tokens == 3


def test_tool_blocks_become_indexed_tool_call_deltas():
    _, chunks = run(TOOL_STREAM)
    calls = [c["choices"][0]["delta"]["tool_calls"][0] for c in chunks if "tool_calls" in c["choices"][0]["delta"]]
    assert calls[0] == {"index": 0, "id": "t1", "type": "function",
                        "function": {"name": "get_weather", "arguments": ""}}
    assert "".join(c["function"]["arguments"] for c in calls if c["index"] == 0) == '{"location": "Paris"}'
    assert calls[-2]["id"] == "t2" and calls[-1] == {"index": 1, "function": {"arguments": "{}"}}
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 97), min_size=1, max_size=20))
def test_any_chunking_of_the_upstream_bytes_gives_the_same_chunks(sizes):
    _, whole = run(TOOL_STREAM, include_usage=True)
    _, cut = run(TOOL_STREAM, sizes, include_usage=True)
    strip = [{k: v for k, v in c.items() if k != "id"} for c in whole]
    assert [{k: v for k, v in c.items() if k != "id"} for c in cut] == strip


def test_reasoning_deltas_are_relayed_only_when_not_strict():
    data = frames(("messageStart", {"role": "assistant"}),
                  ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "Hmm"}}}),
                  ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {"signature": "s"}}}),
                  ("messageStop", {"stopReason": "end_turn"}))
    _, strict = run(data)
    _, loose = run(data, reasoning=True)
    assert not any("reasoning_content" in c["choices"][0]["delta"] for c in strict)
    assert [c["choices"][0]["delta"]["reasoning_content"] for c in loose
            if "reasoning_content" in c["choices"][0]["delta"]] == ["Hmm"]


@pytest.mark.parametrize(("member", "status"), [
    ("throttlingException", 429), ("validationException", 400), ("modelStreamErrorException", 424),
    ("internalServerException", 500), ("serviceUnavailableException", 503),
])
def test_exception_frames_raise_the_mapped_error(member, status):
    stream = ConverseStream("cloudA", "m", False, False)
    assert stream.feed(frames(("messageStart", {"role": "assistant"}))) == []  # the role waits for content
    with pytest.raises(GatewayError) as info:
        stream.feed(es.exception_message(member, b'{"message":"Too many tokens"}'))
    assert info.value.status == status and info.value.message == "Too many tokens"
    assert info.value.type == member[0].upper() + member[1:]


def test_events_read_together_with_a_later_exception_go_out_before_it():
    stream = ConverseStream("cloudA", "m", False, False)
    data = frames(("messageStart", {"role": "assistant"}),
                  ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hi"}}))
    events = stream.feed(data + es.exception_message("modelStreamErrorException", b'{"message":"broke"}'))
    deltas = [decode(e[6:-2])["choices"][0]["delta"] for e in events]
    assert deltas == [{"role": "assistant", "content": ""}, {"content": "Hi"}]
    with pytest.raises(GatewayError, match="broke") as info:
        stream.close()
    assert info.value.status == 424


def test_error_frames_raise_with_their_code_and_message():
    with pytest.raises(GatewayError) as info:
        ConverseStream("cloudA", "m", False, False).feed(es.error_message("ThrottlingException", "slow down"))
    assert (info.value.status, info.value.message) == (429, "slow down")


@pytest.mark.parametrize(("data", "reason"), [
    (TEXT_STREAM[:-10], "inside an event"),
    (frames(("messageStart", {"role": "assistant"})), "before messageStop"),
])
def test_truncated_streams_are_502s(data, reason):
    stream = ConverseStream("cloudA", "m", False, False)
    stream.feed(data)
    with pytest.raises(BadUpstreamResponse, match=reason):
        stream.close()


def test_corrupt_frames_and_non_eventstream_bodies_are_502s():
    corrupt = bytearray(TEXT_STREAM)
    corrupt[40] ^= 0xFF
    with pytest.raises(BadUpstreamResponse, match="event stream"):
        ConverseStream("cloudA", "m", False, False).feed(bytes(corrupt))
    with pytest.raises(BadUpstreamResponse):
        ConverseStream("cloudA", "m", False, False).feed(b"<html><body>Welcome to nginx!</body></html>")
