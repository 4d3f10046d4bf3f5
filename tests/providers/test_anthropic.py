"""The anthropic adapter's mapping, unit by unit: request bodies, answers, errors and stream rewriting."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway._speedups import NO_EXTENSIONS
from gateway.http import sse as pure_sse
from gateway.http.context import RequestContext
from gateway.http.errors import GatewayError
from gateway.providers.anthropic import AnthropicAdapter
from gateway.providers.anthropic import stream as anthropic_stream
from gateway.providers.base import CHAT, COMPLETIONS, EMBEDDINGS, MESSAGES, MESSAGES_COUNT, UpstreamCall
from gateway.schema.chat import parse_chat
from gateway.schema.completions import parse_completion
from gateway.schema.config import Config
from tests.support.twins import compiled_twin

decode = msgspec.json.decode
encode = msgspec.json.encode
adapter = AnthropicAdapter()
USER = {"role": "user", "content": "hi"}


def make_call(body: dict, endpoint: str = CHAT, **target) -> UpstreamCall:
    raw = encode(body)
    request = parse_chat(raw) if endpoint == CHAT else parse_completion(raw)
    config = Config(provider="anthropic", api_key=target.pop("api_key", "sk-ant-test"), **target)
    return UpstreamCall(endpoint, config, raw, request, bool(body.get("stream")), RequestContext(), "anthropic")


async def upstream(body: dict, endpoint: str = CHAT, **target) -> dict:
    request = await adapter.build_request(make_call({"model": "claude-x", **body}, endpoint, **target))
    return decode(request.body)


def answer(content: list, stop_reason: str = "end_turn", **usage) -> bytes:
    return encode({"id": "msg_01abc", "type": "message", "role": "assistant", "model": "claude-x-1",
                   "content": content, "stop_reason": stop_reason, "stop_sequence": None,
                   "usage": {"input_tokens": 10, "output_tokens": 5, **usage}})


def parse(body: dict, raw: bytes, endpoint: str = CHAT, **target) -> dict:
    call = make_call({"model": "claude-x", **body}, endpoint, **target)
    return decode(adapter.parse_response(call, 200, {}, raw).body)


# --- requests -------------------------------------------------------------------------------------------------

async def test_url_headers_and_auth():
    call = make_call({"model": "claude-x", "messages": [USER]})
    request = await adapter.build_request(call)
    assert request.url == "https://api.anthropic.com/v1/messages"
    assert request.headers == {"content-type": "application/json", "anthropic-version": "2023-06-01",
                               "x-api-key": "sk-ant-test"}
    custom = await adapter.build_request(make_call({"model": "m", "messages": [USER]},
                                                   custom_host="http://127.0.0.1:9/s/x/v1/"))
    assert custom.url == "http://127.0.0.1:9/s/x/v1/messages"
    assert "authorization" not in custom.headers


async def test_system_and_developer_become_top_level_system_and_turns_alternate():
    body = await upstream({"messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "developer", "content": [{"type": "text", "text": "Use French."}]},
        {"role": "user", "content": "a"},
        {"role": "user", "content": [{"type": "text", "text": "b"}]},
        {"role": "assistant", "content": "c"},
        {"role": "system", "content": "Late rule."},
        {"role": "assistant", "content": [{"type": "text", "text": "d"}]},
        {"role": "user", "content": "e"},
    ]})
    assert body["system"] == "Be brief.\nUse French.\nLate rule."
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "c"}, {"type": "text", "text": "d"}]},
        {"role": "user", "content": "e"},
    ]


async def test_system_with_cache_control_stays_a_list_of_blocks():
    part = {"type": "text", "text": "Long context", "cache_control": {"type": "ephemeral"}}
    body = await upstream({"messages": [{"role": "system", "content": [part]}, USER]})
    assert body["system"] == [part]


async def test_max_tokens_precedence_and_default():
    assert (await upstream({"messages": [USER]}))["max_tokens"] == 4096
    assert (await upstream({"messages": [USER], "max_tokens": 50}))["max_tokens"] == 50
    assert (await upstream({"messages": [USER], "max_tokens": 50, "max_completion_tokens": 70}))["max_tokens"] == 70


async def test_sampling_stop_user_thinking_and_stream():
    thinking = {"type": "enabled", "budget_tokens": 2048}
    body = await upstream({"messages": [USER], "temperature": 0.3, "top_p": 0.9, "stop": "END", "user": "u-1",
                           "thinking": thinking, "stream": True, "seed": 4, "presence_penalty": 1})
    assert body["temperature"] == 0.3 and body["top_p"] == 0.9
    assert body["stop_sequences"] == ["END"]
    assert body["metadata"] == {"user_id": "u-1"}
    assert body["thinking"] == thinking
    assert body["stream"] is True
    assert "seed" not in body and "presence_penalty" not in body
    assert (await upstream({"messages": [USER], "stop": ["a", "b"]}))["stop_sequences"] == ["a", "b"]
    plain = await upstream({"messages": [USER]})
    assert set(plain) == {"model", "max_tokens", "messages"}


async def test_n_greater_than_one_is_400_naming_n():
    with pytest.raises(GatewayError) as info:
        await upstream({"messages": [USER], "n": 2})
    assert info.value.status == 400 and info.value.param == "n"


async def test_images_data_url_and_http_url():
    body = await upstream({"messages": [{"role": "user", "content": [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg", "detail": "high"}},
    ]}]})
    assert body["messages"][0]["content"][1:] == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
    ]


@pytest.mark.parametrize("url", ["ftp://x/y.png", "data:image/png,notbase64"])
async def test_bad_image_urls_are_400_naming_the_field(url):
    with pytest.raises(GatewayError) as info:
        await upstream({"messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": url}}]}]})
    assert info.value.status == 400 and info.value.param == "messages[0].content[0].image_url.url"


async def test_tools_and_tool_choice_mapping():
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
                                               "parameters": {"type": "object", "properties": {"city": {}}}}},
             {"type": "function", "function": {"name": "now"}}]
    body = await upstream({"messages": [USER], "tools": tools})
    assert body["tools"] == [
        {"name": "get_weather", "description": "Weather",
         "input_schema": {"type": "object", "properties": {"city": {}}}},
        {"name": "now", "input_schema": {"type": "object", "properties": {}}},
    ]
    assert "tool_choice" not in body
    cases = [("auto", {"type": "auto"}), ("required", {"type": "any"}), ("none", {"type": "none"}),
             ({"type": "function", "function": {"name": "now"}}, {"type": "tool", "name": "now"})]
    for choice, expected in cases:
        assert (await upstream({"messages": [USER], "tools": tools, "tool_choice": choice}))["tool_choice"] == expected
    serial = await upstream({"messages": [USER], "tools": tools, "parallel_tool_calls": False})
    assert serial["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    forced = await upstream({"messages": [USER], "tools": tools, "tool_choice": "required",
                             "parallel_tool_calls": False})
    assert forced["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}


async def test_tool_calls_and_tool_results_round_trip():
    body = await upstream({"messages": [
        USER,
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            {"id": "toolu_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}},
            {"id": "toolu_2", "type": "function", "function": {"name": "now", "arguments": ""}}]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "18C"},
        {"role": "tool", "tool_call_id": "toolu_2", "content": [{"type": "text", "text": "noon"}]},
        {"role": "user", "content": "thanks"},
    ]})
    assert body["messages"][1] == {"role": "assistant", "content": [
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
        {"type": "tool_use", "id": "toolu_2", "name": "now", "input": {}},
    ]}
    assert body["messages"][2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"},
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": [{"type": "text", "text": "noon"}]},
        {"type": "text", "text": "thanks"},
    ]}


@pytest.mark.parametrize("arguments", ["{not json", "[1, 2]"])
async def test_bad_tool_call_arguments_are_400_naming_the_field(arguments):
    with pytest.raises(GatewayError) as info:
        await upstream({"messages": [USER, {"role": "assistant", "tool_calls": [
            {"id": "t", "type": "function", "function": {"name": "f", "arguments": arguments}}]}]})
    assert info.value.status == 400 and info.value.param == "messages[1].tool_calls[0].function.arguments"


async def test_assistant_thinking_blocks_are_sent_back_as_they_are():
    thinking = {"type": "thinking", "thinking": "hmm", "signature": "sig=="}
    body = await upstream({"messages": [USER, {"role": "assistant", "content": [thinking, {"type": "text",
                                                                                          "text": "ok"}]}]})
    assert body["messages"][1]["content"][0] == thinking


async def test_completions_prompt_is_one_user_message():
    body = await upstream({"prompt": "Say hi", "max_tokens": 20}, COMPLETIONS)
    assert body["messages"] == [{"role": "user", "content": "Say hi"}]
    assert body["max_tokens"] == 20
    with pytest.raises(GatewayError) as info:
        await upstream({"prompt": ["a", "b"]}, COMPLETIONS)
    assert info.value.param == "prompt"


async def test_endpoints_other_than_chat_and_completions_are_refused():
    # the Messages door forwards these as sent
    assert adapter.endpoints == {CHAT, COMPLETIONS, MESSAGES, MESSAGES_COUNT}
    with pytest.raises(GatewayError) as info:
        adapter.check_endpoint(EMBEDDINGS)
    assert info.value.status == 400 and "anthropic" in info.value.message


# --- answers --------------------------------------------------------------------------------------------------

def test_text_answer_becomes_a_chat_completion_with_usage():
    doc = parse({"messages": [USER]}, answer([{"type": "text", "text": "Hello "}, {"type": "text", "text": "there"}],
                                             cache_creation_input_tokens=3, cache_read_input_tokens=7))
    assert doc["id"] == "msg_01abc" and doc["object"] == "chat.completion" and doc["model"] == "claude-x-1"
    assert isinstance(doc["created"], int)
    choice = doc["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": "Hello there"}
    assert choice["finish_reason"] == "stop"
    assert doc["usage"] == {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25,
                            "prompt_tokens_details": {"cached_tokens": 7}}


def test_tool_use_answer_becomes_tool_calls_with_json_arguments():
    raw = (b'{"id":"msg_1","type":"message","role":"assistant","model":"m","stop_reason":"tool_use",'
           b'"content":[{"type":"text","text":"Let me look."},'
           b'{"type":"tool_use","id":"toolu_9","name":"get_weather","input":{"city": "Paris", "days": [1, 2]}}],'
           b'"usage":{"input_tokens":1,"output_tokens":2}}')
    message = parse({"messages": [USER]}, raw)["choices"][0]
    assert message["finish_reason"] == "tool_calls"
    assert message["message"]["content"] == "Let me look."
    call = message["message"]["tool_calls"][0]
    assert call["id"] == "toolu_9" and call["type"] == "function" and call["function"]["name"] == "get_weather"
    assert decode(call["function"]["arguments"]) == {"city": "Paris", "days": [1, 2]}


@pytest.mark.parametrize("stop_reason,finish", [("end_turn", "stop"), ("stop_sequence", "stop"),
                                                ("max_tokens", "length"), ("tool_use", "tool_calls")])
def test_stop_reasons(stop_reason, finish):
    doc = parse({"messages": [USER]}, answer([{"type": "text", "text": "x"}], stop_reason))
    assert doc["choices"][0]["finish_reason"] == finish


THINKING_ANSWER = answer([{"type": "thinking", "thinking": "Let me think.", "signature": "sig=="},
                          {"type": "text", "text": "42"}])


def test_thinking_is_dropped_unless_strict_compliance_is_false():
    for strict in (None, True):
        message = parse({"messages": [USER]}, THINKING_ANSWER, strict_vendorA_compliance=strict)["choices"][0]
        assert message["message"] == {"role": "assistant", "content": "42"}
    loose = parse({"messages": [USER]}, THINKING_ANSWER, strict_vendorA_compliance=False)["choices"][0]["message"]
    assert loose["content"] == "42"
    assert loose["content_blocks"] == [{"type": "thinking", "thinking": "Let me think.", "signature": "sig=="},
                                       {"type": "text", "text": "42"}]


def test_completion_answer_is_a_text_completion():
    doc = parse({"prompt": "hi"}, answer([{"type": "text", "text": "Hello"}], "max_tokens"), COMPLETIONS)
    assert doc["object"] == "text_completion"
    assert doc["choices"] == [{"index": 0, "text": "Hello", "logprobs": None, "finish_reason": "length"}]
    assert doc["usage"]["total_tokens"] == 15


@pytest.mark.parametrize("raw", [b"<html><body>Bad gateway</body></html>", b"", b'{"type":"completion"}'])
def test_malformed_answers_are_502_naming_anthropic(raw):
    with pytest.raises(GatewayError) as info:
        parse({"messages": [USER]}, raw)
    assert info.value.status == 502 and "anthropic" in info.value.message
    assert info.value.extra == {"provider": "anthropic"}


@pytest.mark.parametrize("status,type_", [(429, "rate_limit_error"), (529, "overloaded_error"),
                                          (400, "invalid_request_error")])
def test_errors_keep_status_message_and_type(status, type_):
    body = encode({"type": "error", "error": {"type": type_, "message": "Slow down"}, "request_id": "req_1"})
    error = adapter.parse_error(make_call({"model": "m", "messages": [USER]}), status,
                                {"retry-after": "3"}, body)
    assert error.status == status and error.message == "Slow down" and error.type == type_
    assert error.extra == {"provider": "anthropic"}
    assert error.headers == [(b"retry-after", b"3")]


def test_non_json_error_body_keeps_the_status_and_shows_the_body():
    error = adapter.parse_error(make_call({"model": "m", "messages": [USER]}), 503, {}, b"<h1>down</h1>")
    assert error.status == 503 and "<h1>down</h1>" in error.message


# --- streams --------------------------------------------------------------------------------------------------

@pytest.fixture(params=["pure", "compiled"])
def splitter(request, monkeypatch):
    module = pure_sse if request.param == "pure" else compiled_twin("sse")
    monkeypatch.setattr(anthropic_stream, "SseSplitter", module.SseSplitter)
    return module


def sse_event(doc: dict) -> bytes:
    return b"event: " + doc["type"].encode() + b"\ndata: " + encode(doc) + b"\n\n"


def text_stream(pieces=("Hel", "lo"), stop="end_turn", thinking=False) -> bytes:
    events = [{"type": "message_start", "message": {
        "id": "msg_s1", "type": "message", "role": "assistant", "model": "claude-x-2", "content": [],
        "stop_reason": None, "usage": {"input_tokens": 9, "cache_read_input_tokens": 4, "output_tokens": 1}}},
        {"type": "ping"}]
    index = 0
    if thinking:
        events += [{"type": "content_block_start", "index": 0,
                    "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
                   {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Hm."}},
                   {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "S"}},
                   {"type": "content_block_stop", "index": 0}]
        index = 1
    events.append({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})
    events += [{"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": p}}
               for p in pieces]
    events += [{"type": "content_block_stop", "index": index},
               {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 6}},
               {"type": "message_stop"}]
    return b"".join(sse_event(e) for e in events)


def run_stream(raw: bytes, body: dict | None = None, cuts: list[int] | None = None, endpoint: str = CHAT,
               **target) -> tuple[list[dict], object]:
    body = body or {"model": "claude-x", "messages": [USER], "stream": True}
    transformer = adapter.stream(make_call(body, endpoint, **target))
    bounds = [0, *(cuts or []), len(raw)]
    out = []
    for a, b in zip(bounds, bounds[1:]):
        out += transformer.feed(raw[a:b])
    out += transformer.close()
    chunks = []
    for event in out:
        assert event.startswith(b"data: ") and event.endswith(b"\n\n")
        chunks.append(decode(event[6:-2]))
    return chunks, transformer


def test_text_stream_chunks_share_one_id_and_end_with_finish_and_usage(splitter):
    body = {"model": "claude-x", "messages": [USER], "stream": True, "stream_options": {"include_usage": True}}
    chunks, transformer = run_stream(text_stream(), body)
    assert {c["id"] for c in chunks} == {"msg_s1"}
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == "claude-x-2" for c in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"]) == "Hello"
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"] == {"prompt_tokens": 13, "completion_tokens": 6, "total_tokens": 19,
                                   "prompt_tokens_details": {"cached_tokens": 4}}
    assert transformer.usage.total_tokens == 19


def test_no_usage_chunk_without_include_usage(splitter):
    chunks, transformer = run_stream(text_stream(stop="max_tokens"))
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert all(c["choices"] for c in chunks)
    assert transformer.usage.completion_tokens == 6  # the pipeline still records usage


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=len(text_stream()) - 1), max_size=8, unique=True))
def test_stream_output_does_not_depend_on_where_chunks_are_cut_or_on_the_splitter(cuts):
    raw = text_stream(thinking=True)
    modules = [pure_sse] if NO_EXTENSIONS else [pure_sse, compiled_twin("sse")]
    outputs = []
    for module in modules:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(anthropic_stream, "SseSplitter", module.SseSplitter)
            for where in ([], sorted(cuts)):
                chunks, _ = run_stream(raw, cuts=where, strict_vendorA_compliance=False)
                for chunk in chunks:
                    chunk.pop("created")
                outputs.append(chunks)
    assert all(out == outputs[0] for out in outputs)


def tool_stream() -> bytes:
    events = [
        {"type": "message_start", "message": {"id": "msg_t", "type": "message", "role": "assistant", "model": "m",
                                              "content": [], "usage": {"input_tokens": 3, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Sure."}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1,
         "content_block": {"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": {}}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": ""}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": '{"ci'}},
        {"type": "ping"},
        {"type": "content_block_delta", "index": 1,
         "delta": {"type": "input_json_delta", "partial_json": 'ty":"Oslo"}'}},
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_start", "index": 2,
         "content_block": {"type": "tool_use", "id": "toolu_b", "name": "now", "input": {}}},
        {"type": "content_block_stop", "index": 2},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 20}},
        {"type": "message_stop"},
    ]
    return b"".join(sse_event(e) for e in events)


def test_tool_stream_uses_a_tool_counter_and_sends_id_and_name_first(splitter):
    chunks, _ = run_stream(tool_stream())
    calls = [c["choices"][0]["delta"]["tool_calls"][0] for c in chunks
             if c["choices"] and "tool_calls" in c["choices"][0]["delta"]]
    first = [c for c in calls if "id" in c]
    assert [(c["index"], c["id"], c["function"]["name"]) for c in first] == [(0, "toolu_a", "get_weather"),
                                                                             (1, "toolu_b", "now")]
    arguments = {0: "", 1: ""}
    for call in calls:
        arguments[call["index"]] += call["function"]["arguments"]
    assert decode(arguments[0]) == {"city": "Oslo"}
    assert decode(arguments[1]) == {}
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_stream_thinking_dropped_by_default_and_sent_as_content_blocks_when_not_strict(splitter):
    strict, _ = run_stream(text_stream(thinking=True))
    assert not any("content_blocks" in c["choices"][0]["delta"] for c in strict)
    loose, _ = run_stream(text_stream(thinking=True), strict_vendorA_compliance=False)
    blocks = [b for c in loose for b in c["choices"][0]["delta"].get("content_blocks", [])]
    assert blocks[:2] == [{"index": 0, "delta": {"thinking": "Hm."}}, {"index": 0, "delta": {"signature": "S"}}]
    assert {"index": 1, "delta": {"text": "Hel"}} in blocks
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in loose) == "Hello"


def test_error_as_first_event_raises_with_the_status_its_type_stands_for(splitter):
    transformer = adapter.stream(make_call({"model": "m", "messages": [USER], "stream": True}))
    event = sse_event({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    with pytest.raises(GatewayError) as info:
        transformer.feed(event)
    assert info.value.status == 529 and info.value.message == "Overloaded"
    assert info.value.extra == {"provider": "anthropic"}


def test_error_midway_raises_after_content_went_out(splitter):
    raw = text_stream()
    cut = raw.index(b"event: content_block_stop")
    transformer = adapter.stream(make_call({"model": "m", "messages": [USER], "stream": True}))
    assert transformer.feed(raw[:cut])
    with pytest.raises(GatewayError) as info:
        transformer.feed(sse_event({"type": "error", "error": {"type": "api_error", "message": "boom"}}))
    assert info.value.status == 500 and info.value.message == "boom"


def test_unknown_events_are_ignored(splitter):
    raw = text_stream()
    extra = sse_event({"type": "brand_new_event", "payload": 1})
    at = raw.index(b"event: message_delta")
    chunks, _ = run_stream(raw[:at] + extra + raw[at:])
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == "Hello"


@pytest.mark.parametrize("raw,what", [
    (b"<html><body>502 Bad Gateway</body></html>", "not an event stream"),
    (b"", "before message_start"),
])
def test_non_sse_bodies_are_502(splitter, raw, what):
    transformer = adapter.stream(make_call({"model": "m", "messages": [USER], "stream": True}))
    with pytest.raises(GatewayError) as info:
        transformer.feed(raw)
        transformer.close()
    assert info.value.status == 502 and "anthropic" in info.value.message and what in info.value.message


def test_stream_cut_before_message_stop_is_502(splitter):
    raw = text_stream()
    transformer = adapter.stream(make_call({"model": "m", "messages": [USER], "stream": True}))
    transformer.feed(raw[: raw.index(b"event: message_stop")])
    with pytest.raises(GatewayError) as info:
        transformer.close()
    assert info.value.status == 502 and "message_stop" in info.value.message


def test_completion_stream_gives_text_completion_chunks(splitter):
    body = {"model": "m", "prompt": "hi", "stream": True, "stream_options": {"include_usage": True}}
    chunks, _ = run_stream(text_stream(), body, endpoint=COMPLETIONS)
    assert all(c["object"] == "text_completion" for c in chunks)
    assert "".join(c["choices"][0]["text"] for c in chunks if c["choices"]) == "Hello"
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["usage"]["total_tokens"] == 19
