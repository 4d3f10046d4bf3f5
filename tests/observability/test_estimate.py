"""The gateway's token estimate: text found in JSON bytes, prompt tokens of a request, a stream's relayed text."""

from __future__ import annotations

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
from gateway.schema.chat import parse_chat
from gateway.schema.completions import parse_completion

_enc = msgspec.json.encode


def chunk(content: str | None = None, role: bool = False, finish: str | None = None) -> bytes:
    delta = {"role": "assistant", "content": ""} if role else ({"content": content} if content is not None else {})
    doc = {"id": "chatcmpl-123", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o-mini",
           "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
    return b"data: " + _enc(doc) + b"\n\n"


@given(st.text(max_size=60))
def test_text_chars_measures_any_string_value_as_encoded(text):
    encoded = _enc(text)
    assert text_chars(b'{"content":' + encoded + b',"other":"not counted"}') == len(encoded) - 2


def test_text_chars_reads_every_text_key():
    data = b'{"text":"abc"}{"arguments":"{\\"a\\": 1}"}{"reasoning_content":"xy"}{"content":null}'
    assert text_chars(data) == 3 + len('{\\"a\\": 1}') + 2


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
