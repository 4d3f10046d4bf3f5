"""cloudC Gemini mapping: request bodies, answers, stream events, errors and the adapter's URLs and headers."""

from __future__ import annotations

import asyncio

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.http.context import RequestContext
from gateway.http.errors import GatewayError, InvalidRequest, UpstreamError
from gateway.providers.base import CHAT, EMBEDDINGS, UpstreamCall
from gateway.providers.cloudC import CloudCAdapter, gemini
from gateway.providers.cloudC.stream import GeminiStream
from gateway.schema.chat import parse_chat
from gateway.schema.config import Config
from gateway.settings import Settings
from gateway.upstream.client import UpstreamClient

dec = msgspec.json.decode
enc = msgspec.json.encode


def body_for(**chat) -> dict:
    chat.setdefault("model", "gemini-2.0-flash")
    chat.setdefault("messages", [{"role": "user", "content": "hi"}])
    return dec(gemini.build_request(parse_chat(enc(chat))))


# --- request -------------------------------------------------------------------------------------------------

def test_roles_system_assistant_tool_calls_and_results():
    body = body_for(messages=[
        {"role": "system", "content": "Be brief."},
        {"role": "developer", "content": [{"type": "text", "text": "Use metric units."}]},
        {"role": "user", "content": "Weather and time in Paris?"},
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Paris"}'}},
            {"id": "call_b", "type": "function", "function": {"name": "clock", "arguments": ""}}]},
        {"role": "tool", "tool_call_id": "call_a", "content": '{"temp_c": 21}'},
        {"role": "tool", "tool_call_id": "call_b", "content": "12:00"},
        {"role": "user", "content": "Thanks"},
    ])
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}, {"text": "Use metric units."}]}
    user, model, results, last = body["contents"]
    assert user == {"role": "user", "parts": [{"text": "Weather and time in Paris?"}]}
    assert model["role"] == "model"
    assert model["parts"] == [{"text": "Checking."}, {"functionCall": {"name": "weather", "args": {"city": "Paris"}}},
                              {"functionCall": {"name": "clock", "args": {}}}]
    assert results == {"role": "user", "parts": [
        {"functionResponse": {"name": "weather", "response": {"temp_c": 21}}},
        {"functionResponse": {"name": "clock", "response": {"content": "12:00"}}}]}
    assert last["parts"] == [{"text": "Thanks"}]
    assert "generationConfig" not in body and "tools" not in body


def test_tool_result_without_matching_call_names_the_field():
    with pytest.raises(InvalidRequest) as info:
        body_for(messages=[{"role": "user", "content": "x"},
                           {"role": "tool", "tool_call_id": "nope", "content": "1"}])
    assert info.value.param == "messages[1].tool_call_id"


def test_bad_tool_arguments_name_the_field():
    with pytest.raises(InvalidRequest) as info:
        body_for(messages=[{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": "[1"}}]}])
    assert info.value.param == "messages[1].tool_calls[0].function.arguments"


def test_images_become_inline_or_file_data():
    body = body_for(messages=[{"role": "user", "content": [
        {"type": "text", "text": "Compare"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        {"type": "image_url", "image_url": {"url": "gs://bucket/photo.JPG"}},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.webp?x=1"}},
        {"type": "image_url", "image_url": {"url": "https://example.com/render", "mime_type": "image/gif"}},
    ]}])
    parts = body["contents"][0]["parts"]
    assert parts[1] == {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}
    assert parts[2] == {"fileData": {"mimeType": "image/jpeg", "fileUri": "gs://bucket/photo.JPG"}}
    assert parts[3] == {"fileData": {"mimeType": "image/webp", "fileUri": "https://example.com/a.webp?x=1"}}
    assert parts[4]["fileData"]["mimeType"] == "image/gif"


def test_image_of_unknown_type_is_a_400_naming_the_part():
    with pytest.raises(InvalidRequest) as info:
        body_for(messages=[{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "https://example.com/render"}}]}])
    assert info.value.param == "messages[0].content[0].image_url.url"


def test_generation_config_from_sampling_fields():
    body = body_for(temperature=0.2, top_p=0.9, max_tokens=10, max_completion_tokens=64, stop=["END", "STOP"],
                    n=3, seed=42, presence_penalty=0.5, frequency_penalty=-0.5,
                    thinking={"type": "enabled", "budget_tokens": 1024})
    assert body["generationConfig"] == {
        "temperature": 0.2, "topP": 0.9, "maxOutputTokens": 64, "stopSequences": ["END", "STOP"],
        "candidateCount": 3, "seed": 42, "presencePenalty": 0.5, "frequencyPenalty": -0.5,
        "thinkingConfig": {"includeThoughts": True, "thinkingBudget": 1024},
    }


def test_response_format_json_schema_and_json_object():
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "additionalProperties": False,
              "properties": {"additionalProperties": {"type": "string"},
                             "tags": {"type": "array", "items": {"type": "object", "additionalProperties": False}}},
              "required": ["tags"]}
    body = body_for(stop="END", response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema}})
    config = body["generationConfig"]
    assert config["stopSequences"] == ["END"]
    assert config["responseMimeType"] == "application/json"
    assert config["responseSchema"] == {
        "type": "object", "required": ["tags"],
        "properties": {"additionalProperties": {"type": "string"},
                       "tags": {"type": "array", "items": {"type": "object"}}}}
    assert body_for(response_format={"type": "json_object"})["generationConfig"] == {
        "responseMimeType": "application/json"}


TOOLS = [{"type": "function", "function": {"name": "weather", "description": "Weather now",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                          "additionalProperties": False}}},
         {"type": "function", "function": {"name": "clock"}}]


@pytest.mark.parametrize(("choice", "expected"), [
    ("auto", {"mode": "AUTO"}),
    ("none", {"mode": "NONE"}),
    ("required", {"mode": "ANY"}),
    ({"type": "function", "function": {"name": "clock"}}, {"mode": "ANY", "allowedFunctionNames": ["clock"]}),
])
def test_tools_and_tool_choice(choice, expected):
    body = body_for(tools=TOOLS, tool_choice=choice)
    assert body["tools"] == [{"functionDeclarations": [
        {"name": "weather", "description": "Weather now",
         "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
        {"name": "clock"}]}]
    assert body["toolConfig"] == {"functionCallingConfig": expected}


def test_legacy_functions_and_function_call():
    body = body_for(functions=[{"name": "f", "parameters": {"type": "object"}}], function_call={"name": "f"})
    assert body["tools"] == [{"functionDeclarations": [{"name": "f", "parameters": {"type": "object"}}]}]
    assert body["toolConfig"]["functionCallingConfig"] == {"mode": "ANY", "allowedFunctionNames": ["f"]}


# --- response ------------------------------------------------------------------------------------------------

def answer(*candidates, usage=None, **extra) -> bytes:
    doc = {"candidates": list(candidates), "modelVersion": "gemini-2.0-flash-001", "responseId": "r123", **extra}
    if usage is not None:
        doc["usageMetadata"] = usage
    return enc(doc)


def cand(parts, finish="STOP", index=0) -> dict:
    return {"content": {"role": "model", "parts": parts}, "finishReason": finish, "index": index}


def test_answer_text_usage_and_ids():
    body = answer(cand([{"text": "Hello, "}, {"text": "world"}]),
                  usage={"promptTokenCount": 10, "candidatesTokenCount": 4, "totalTokenCount": 20,
                         "cachedContentTokenCount": 6, "thoughtsTokenCount": 6})
    out, usage, model = gemini.parse_response(body, "gemini-2.0-flash", False)
    doc = dec(out)
    assert doc["object"] == "chat.completion" and doc["id"] == "chatcmpl-r123"
    assert model == doc["model"] == "gemini-2.0-flash-001"
    assert doc["choices"] == [{"index": 0, "message": {"role": "assistant", "content": "Hello, world"},
                               "logprobs": None, "finish_reason": "stop"}]
    assert doc["usage"] == {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20,
                            "prompt_tokens_details": {"cached_tokens": 6},
                            "completion_tokens_details": {"reasoning_tokens": 6}}
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (10, 10, 20)


@pytest.mark.parametrize(("reason", "expected"), [
    ("STOP", "stop"), ("MAX_TOKENS", "length"), ("SAFETY", "content_filter"), ("RECITATION", "content_filter"),
    ("BLOCKLIST", "content_filter"), ("PROHIBITED_CONTENT", "content_filter"), ("SPII", "content_filter"),
    ("OTHER", "stop"), (None, "stop"),
])
def test_finish_reasons(reason, expected):
    doc = dec(gemini.parse_response(answer(cand([{"text": "x"}], reason)), "m", False)[0])
    assert doc["choices"][0]["finish_reason"] == expected


def test_function_calls_become_tool_calls_with_json_arguments():
    body = answer(cand([{"functionCall": {"name": "weather", "args": {"city": "Paris", "days": [1, 2]}}},
                        {"functionCall": {"name": "clock"}}]))
    message = dec(gemini.parse_response(body, "m", False)[0])["choices"][0]
    assert message["finish_reason"] == "tool_calls"
    calls = message["message"]["tool_calls"]
    assert message["message"]["content"] is None
    assert [c["function"]["name"] for c in calls] == ["weather", "clock"]
    assert dec(calls[0]["function"]["arguments"]) == {"city": "Paris", "days": [1, 2]}
    assert calls[1]["function"]["arguments"] == "{}"
    assert len({c["id"] for c in calls}) == 2 and all(c["id"].startswith("call_") for c in calls)


def test_thought_signature_of_a_function_call_comes_back_in_the_next_turn():
    body = answer(cand([{"functionCall": {"name": "weather", "args": {"city": "Rome"}},
                         "thoughtSignature": "c2lnLTE="}]))
    call = dec(gemini.parse_response(body, "m", False)[0])["choices"][0]["message"]["tool_calls"][0]
    assert call["id"].endswith("__thought__c2lnLTE=")
    follow_up = body_for(messages=[
        {"role": "user", "content": "Weather in Rome?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": "sunny"}])
    assert follow_up["contents"][1]["parts"] == [
        {"functionCall": {"name": "weather", "args": {"city": "Rome"}}, "thoughtSignature": "c2lnLTE="}]
    assert follow_up["contents"][2]["parts"][0]["functionResponse"]["name"] == "weather"


def test_several_candidates_are_several_choices():
    doc = dec(gemini.parse_response(answer(cand([{"text": "a"}]), cand([{"text": "b"}], "MAX_TOKENS", 1)), "m",
                                    False)[0])
    assert [(c["index"], c["message"]["content"], c["finish_reason"]) for c in doc["choices"]] == [
        (0, "a", "stop"), (1, "b", "length")]


def test_blocked_prompt_is_a_content_filter_choice():
    body = enc({"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 3}})
    doc = dec(gemini.parse_response(body, "m", False)[0])
    assert doc["choices"][0]["finish_reason"] == "content_filter"
    assert doc["usage"]["prompt_tokens"] == 3


THOUGHTFUL = answer(cand([{"text": "Let me think.", "thought": True, "thoughtSignature": "sig1"}, {"text": "42"}]),
                    usage={"promptTokenCount": 1, "candidatesTokenCount": 1, "thoughtsTokenCount": 3,
                           "totalTokenCount": 5})


def test_thoughts_are_content_blocks_only_when_strict_is_false():
    message = dec(gemini.parse_response(THOUGHTFUL, "m", True)[0])["choices"][0]["message"]
    assert message["content"] == "42"
    assert message["content_blocks"] == [{"type": "thinking", "thinking": "Let me think.", "signature": "sig1"},
                                         {"type": "text", "text": "42"}]
    hidden = dec(gemini.parse_response(THOUGHTFUL, "m", False)[0])["choices"][0]["message"]
    assert hidden == {"role": "assistant", "content": "42"}


def test_answer_that_is_not_gemini_is_a_502_naming_the_provider():
    with pytest.raises(GatewayError) as info:
        gemini.parse_response(b"<html>busy</html>", "m", False)
    assert info.value.status == 502 and "cloudC" in info.value.message


# --- errors --------------------------------------------------------------------------------------------------

def test_google_error_keeps_status_message_and_code():
    body = enc({"error": {"code": 404, "message": "Publisher Model `x` not found.", "status": "NOT_FOUND"}})
    error = gemini.google_error(404, body)
    assert isinstance(error, UpstreamError)
    assert (error.status, error.message, error.code) == (404, "Publisher Model `x` not found.", "NOT_FOUND")
    assert dec(error.body())["provider"] == "cloudC"
    listed = gemini.google_error(
        429, enc([{"error": {"code": 429, "message": "Quota", "status": "RESOURCE_EXHAUSTED"}}]))
    assert (listed.status, listed.message) == (429, "Quota")
    other = gemini.google_error(503, b"upstream connect error")
    assert other.status == 503 and "upstream connect error" in other.message


# --- stream --------------------------------------------------------------------------------------------------

def sse(*docs) -> bytes:
    return b"".join(b"data: " + enc(d) + b"\r\n\r\n" for d in docs)


TEXT_STREAM = sse(
    {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hel"}]}}], "responseId": "s1",
     "modelVersion": "gemini-x"},
    {"candidates": [{"content": {"role": "model", "parts": [{"text": "lo"}]}}], "responseId": "s1"},
    {"candidates": [{"content": {"role": "model", "parts": [{"text": "!"}]}, "finishReason": "STOP"}],
     "usageMetadata": {"promptTokenCount": 2, "candidatesTokenCount": 3, "totalTokenCount": 5}, "responseId": "s1"},
)


def run_stream(data: bytes, cuts: list[int] | None = None, include_usage: bool = True, thoughts: bool = False):
    stream = GeminiStream("gemini-2.0-flash", include_usage, thoughts)
    pieces, last = [], 0
    for cut in sorted(cuts or []):
        pieces.append(data[last:cut])
        last = cut
    pieces.append(data[last:])
    events = []
    for piece in pieces:
        events.extend(stream.feed(piece))
    events.extend(stream.close())
    chunks = []
    for event in events:
        assert event.startswith(b"data: ") and event.endswith(b"\n\n")
        chunks.append(dec(event[6:]))
    return chunks, stream


def test_stream_text_chunks_finish_and_usage():
    chunks, stream = run_stream(TEXT_STREAM)
    assert {c["id"] for c in chunks} == {"chatcmpl-s1"}
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == "gemini-x" for c in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": "Hel"}
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "Hello!"
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert finishes == ["stop"]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] == 5
    assert stream.usage.total_tokens == 5


def test_stream_without_include_usage_has_no_usage_chunk_but_records_usage():
    chunks, stream = run_stream(TEXT_STREAM, include_usage=False)
    assert all(c["choices"] for c in chunks)
    assert stream.usage.prompt_tokens == 2


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=len(TEXT_STREAM) - 1), max_size=12, unique=True))
def test_stream_result_does_not_depend_on_how_bytes_are_cut(cuts):
    chunks, _ = run_stream(TEXT_STREAM, cuts)
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]) == "Hello!"
    assert sum(1 for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]) == 1


def test_stream_tool_calls():
    data = sse({"candidates": [{"content": {"parts": [{"functionCall": {"name": "weather", "args": {"c": "P"}}},
                                                      {"functionCall": {"name": "clock", "args": {}}}]}}]},
               {"candidates": [{"content": {"parts": [{"text": ""}]}, "finishReason": "STOP"}]})
    chunks, _ = run_stream(data, include_usage=False)
    calls = chunks[0]["choices"][0]["delta"]["tool_calls"]
    assert [(c["index"], c["function"]["name"], dec(c["function"]["arguments"])) for c in calls] == [
        (0, "weather", {"c": "P"}), (1, "clock", {})]
    assert all(c["id"] and c["type"] == "function" for c in calls)
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_stream_thoughts_only_when_strict_is_false():
    data = sse({"candidates": [{"content": {"parts": [{"text": "hmm", "thought": True}]}}]},
               {"candidates": [{"content": {"parts": [{"text": "42"}]}, "finishReason": "STOP"}]})
    shown, _ = run_stream(data, include_usage=False, thoughts=True)
    assert shown[0]["choices"][0]["delta"]["content_blocks"] == [{"index": 0, "delta": {"thinking": "hmm"}}]
    hidden, _ = run_stream(data, include_usage=False, thoughts=False)
    assert "hmm" not in str(hidden)
    assert hidden[0]["choices"][0]["delta"] == {"role": "assistant", "content": "42"}


def test_stream_in_band_error_raises_the_upstream_error():
    stream = GeminiStream("m", False, False)
    with pytest.raises(UpstreamError) as info:
        stream.feed(sse({"error": {"code": 429, "message": "Resource exhausted", "status": "RESOURCE_EXHAUSTED"}}))
    assert (info.value.status, info.value.message) == (429, "Resource exhausted")


def test_stream_that_ends_without_finish_reason_is_a_502():
    stream = GeminiStream("m", False, False)
    stream.feed(sse({"candidates": [{"content": {"parts": [{"text": "half"}]}}]}))
    with pytest.raises(GatewayError) as info:
        stream.close()
    assert info.value.status == 502


# --- adapter: URLs, auth header ------------------------------------------------------------------------------

def call_for(target: Config, endpoint: str = CHAT, stream: bool = False, ctx: RequestContext | None = None,
             model: str = "gemini-2.0-flash") -> UpstreamCall:
    if endpoint == CHAT:
        raw = enc({"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": stream})
        request = parse_chat(raw)
    else:
        raw = enc({"model": model, "input": ["a", "b"], "dimensions": 4})
        request = None
    call = UpstreamCall(endpoint, target, raw, request, stream, ctx or RequestContext(), "cloudC")
    call.model = model
    return call


def build(call: UpstreamCall):
    adapter = CloudCAdapter.create(UpstreamClient(Settings()))  # bearer tokens only: the client is never started
    return asyncio.run(adapter.build_request(call))


def test_default_urls_for_chat_stream_embeddings_and_global():
    target = Config(provider="cloudC", api_key="tok", cloudC_project_id="proj", cloudC_region="europe-west4")
    base = "https://europe-west4-aiplatform.googleapis.com/v1/projects/proj/locations/europe-west4"
    req = build(call_for(target))
    assert req.url == base + "/publishers/google/models/gemini-2.0-flash:generateContent"
    assert req.headers["authorization"] == "Bearer tok"
    assert build(call_for(target, stream=True)).url.endswith(":streamGenerateContent?alt=sse")
    embed = build(call_for(target, EMBEDDINGS, model="text-embedding-005"))
    assert embed.url == base + "/publishers/google/models/text-embedding-005:predict"
    assert dec(embed.body) == {"instances": [{"content": "a"}, {"content": "b"}],
                               "parameters": {"outputDimensionality": 4}}
    world = Config(provider="cloudC", api_key="t", cloudC_project_id="p", cloudC_region="global")
    assert build(call_for(world)).url.startswith("https://aiplatform.googleapis.com/v1/projects/p/locations/global/")


def test_custom_host_replaces_the_base_and_request_type_header_is_sent():
    target = Config(provider="cloudC", api_key="tok", cloudC_project_id="p", cloudC_region="us-central1",
                    custom_host="http://127.0.0.1:9/s/x/v1/")
    ctx = RequestContext()
    ctx.cloudC_llm_request_type = "dedicated"
    req = build(call_for(target, ctx=ctx))
    assert req.url == ("http://127.0.0.1:9/s/x/v1/projects/p/locations/us-central1/publishers/google/models/"
                       "gemini-2.0-flash:generateContent")
    assert req.headers["x-vertex-ai-llm-request-type"] == "dedicated"


@pytest.mark.parametrize(("target", "param"), [
    (Config(provider="cloudC", api_key="t", cloudC_region="us-central1"), "cloudC_project_id"),
    (Config(provider="cloudC", api_key="t", cloudC_project_id="p"), "cloudC_region"),
    (Config(provider="cloudC", cloudC_project_id="p", cloudC_region="us-central1"), "api_key"),
    (Config(provider="cloudC", api_key="t", cloudC_project_id="p/../x", cloudC_region="us-central1"),
     "cloudC_project_id"),
])
def test_missing_or_unsafe_pieces_are_400s_naming_the_field(target, param):
    with pytest.raises(InvalidRequest) as info:
        build(call_for(target))
    assert info.value.param == param


def test_unsafe_model_name_is_refused():
    target = Config(provider="cloudC", api_key="t", cloudC_project_id="p", cloudC_region="us-central1")
    with pytest.raises(InvalidRequest) as info:
        build(call_for(target, model="../../evil"))
    assert info.value.param == "model"
