"""The gateway's token estimate: text found in JSON bytes, prompt tokens of a request, a stream's relayed text."""

from __future__ import annotations

import json

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.observability.estimate import (
    MESSAGE_OVERHEAD_TOKENS,
    estimate,
    prompt_tokens,
    relayed_text_chars,
    text_chars,
    tokens_for,
)
from gateway.pipeline.dialects.base import DoorRequest
from gateway.schema.chat import parse_chat
from gateway.schema.completions import parse_completion

_enc = msgspec.json.encode


def chunk(content: str | None = None, role: bool = False, finish: str | None = None) -> bytes:
    delta = {"role": "assistant", "content": ""} if role else ({"content": content} if content is not None else {})
    doc = {"id": "chatcmpl-123", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o-mini",
           "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
    return b"data: " + _enc(doc) + b"\n\n"


@given(st.text(max_size=60))
def test_text_chars_measures_any_string_value_as_decoded(text):
    encoded = _enc(text)
    assert text_chars(b'{"content":' + encoded + b',"other":"not counted"}') == len(text)
    assert text_chars(b'{"content" :  ' + encoded + b', "other": "not counted"}') == len(text)


def test_text_chars_reads_every_text_key():
    data = _enc({"choices": [{"message": {"content": None, "refusal": "no", "reasoning_content": "xy",
                                          "tool_calls": [{"function": {"name": "f", "arguments": '{"a": 1}'}}]}},
                             {"text": "abc"}]})
    assert text_chars(data) == 2 + 2 + len('{"a": 1}') + 3
    assert text_chars(b"not json") == 0


def spaced(doc: dict) -> bytes:
    """JSON as Python's json module writes it: a space after every colon and comma."""
    return json.dumps(doc).encode()


@pytest.mark.parametrize("encode", [_enc, spaced], ids=["compact", "spaced"])
def test_every_dialects_events_are_counted_whatever_their_whitespace(encode):
    """Unified chunks, anthropic's events (text, tool input, thinking) and the Responses API's deltas; the
    Responses events that repeat earlier text (a part's or item's ``done``, ``response.completed``) count nothing."""
    def event(doc: dict, name: str | None = None) -> bytes:
        return (f"event: {name}\n".encode() if name else b"") + b"data: " + encode(doc) + b"\r\n\r\n"

    head = b"".join([
        event({"choices": [{"index": 0, "delta": {"content": "Hello"}}]}),
        event({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"a"'}}]}}]}),
        event({"type": "message_start", "message": {"content": [], "usage": {"output_tokens": 1}}}, "message_start"),
        event({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": " there"}}),
        event({"type": "content_block_delta", "delta": {"type": "input_json_delta", "partial_json": '{"b": 1}'}}),
        event({"type": "content_block_delta", "delta": {"type": "thinking_delta", "thinking": "hmm"}}),
        event({"type": "response.output_text.delta", "delta": " again"}),
        event({"type": "response.output_text.done", "text": "Hello there again"}),
        event({"type": "response.completed", "response": {"output": [{"content": [{"text": "all of it"}]}]}}),
        b"data: [DONE]\n\n",
    ])
    assert relayed_text_chars(head) == len("Hello" '{"a"' " there" '{"b": 1}' "hmm" " again")


def test_an_event_nested_too_deep_or_not_json_counts_nothing_and_does_not_fail():
    deep = b'{"a":' * 5000 + b"1" + b"}" * 5000
    assert relayed_text_chars(b"data: " + deep + b"\n\ndata: {oops\n\n" + chunk("abc")) == 3


def test_prompt_tokens_of_chat_and_completions():
    chat = parse_chat(_enc({"model": "m", "messages": [
        {"role": "system", "content": "x" * 40},
        {"role": "user", "content": [{"type": "text", "text": "y" * 8}, {"type": "image_url", "image_url": {}}]},
        {"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
                                              "function": {"name": "f", "arguments": "{}"}}]}]}))
    assert prompt_tokens(chat) == tokens_for(40 + 8 + 3) + 3 * MESSAGE_OVERHEAD_TOKENS
    assert prompt_tokens(parse_completion(_enc({"model": "m", "prompt": "z" * 9}))) == 3
    assert prompt_tokens(parse_completion(_enc({"model": "m", "prompt": [[1, 2, 3], [4]]}))) == 4
    assert prompt_tokens(None) == 0


@pytest.mark.parametrize("words", [["Hello"], ["Hello", " there", ",", " how", " are", " you", " today", "?"] * 5])
def test_a_relayed_stream_is_estimated_close_to_its_text(words):
    events = [chunk(role=True), *(chunk(w) for w in words), chunk(finish="stop")]
    head, rest = events[0] + events[1], b"".join(events[2:])
    chars = relayed_text_chars(head, len(rest), rest.count(b"\n\n"))
    text = "".join(words)
    assert abs(chars - len(text)) <= 12  # the role and finish events differ from a content event by a few bytes
    assert abs(tokens_for(chars) - tokens_for(len(text))) <= 3


@pytest.mark.parametrize("opening", ["role-only", "role-with-text"])
def test_the_kept_head_counts_exactly_and_the_rest_by_a_content_envelope(opening):
    """As the pipeline keeps them: the first chunks relayed. An opening event with the role and text together (cloudC)
    has a larger envelope than a content event; measured on it, the rest would be undercounted to nothing."""
    words = ["Hello", " from", " the", " gateway", " mock", " upstream", ":", " this", " reply"] * 3
    first = chunk(role=True) if opening == "role-only" else chunk(words[0]).replace(
        b'"delta":{', b'"delta":{"role":"assistant",')
    events = [first, *(chunk(w) for w in words[opening == "role-with-text":]), chunk(finish="stop")]
    rest = b"".join(events[3:])
    chars = relayed_text_chars(b"".join(events[:3]), len(rest), rest.count(b"\n\n"))
    assert abs(chars - len("".join(words))) <= 12  # the finish event is a few bytes smaller than a content event


def test_a_stream_with_no_text_relayed_estimates_none():
    role = chunk(role=True)
    assert relayed_text_chars(role) == 0
    assert relayed_text_chars(None) == 0
    assert relayed_text_chars(role * 3, len(role), 1) == 0


def test_a_head_whose_first_events_carry_no_text_still_counts_the_text_after_them():
    """Opening events without text (the role, a tool call's name, empty deltas) do not hide the text that
    follows: every kept event is read, not a fixed number of first chunks."""
    words = [" one", " two", " three", " four"]
    events = [chunk(role=True), chunk(""), chunk(""), chunk(""), *(chunk(w) for w in words)]
    assert relayed_text_chars(b"".join(events)) == len("".join(words))


def test_estimate_adds_up():
    usage = estimate(parse_completion(_enc({"model": "m", "prompt": "abcd" * 5})), 41)
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (5, 11, 16)


def test_a_front_door_requests_prompt_is_estimated_from_its_own_body():
    messages = DoorRequest({"model": "m", "max_tokens": 5, "system": "x" * 8, "messages": [
        {"role": "user", "content": "y" * 8}, {"role": "user", "content": [{"type": "text", "text": "z" * 8}]}]},
        "m", True)
    assert prompt_tokens(messages) == tokens_for(24) + 2 * MESSAGE_OVERHEAD_TOKENS
    responses = DoorRequest({"model": "m", "instructions": "x" * 4, "input": "y" * 12}, "m", True)
    assert prompt_tokens(responses) == tokens_for(16) + MESSAGE_OVERHEAD_TOKENS
