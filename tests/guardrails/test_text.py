"""What checks read: the text per endpoint and phase, redaction segments, and JSON found in text."""

from __future__ import annotations

import pytest

from gateway.guardrails.text import (
    A2A_MESSAGE,
    answer_text,
    find_json,
    replace_segments,
    request_segments,
    request_text,
)

CHAT = {"messages": [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": "Look:"}, {"type": "image_url", "image_url": {}},
                                 {"type": "text", "text": "what is it?"}]},
]}


@pytest.mark.parametrize(
    ("body", "endpoint", "text"),
    [
        (CHAT, "chat", "Look:\nwhat is it?"),
        ({"messages": [{"role": "user", "content": "hi"}]}, "chat", "hi"),
        ({"messages": []}, "chat", ""),
        ({"prompt": ["a", "b"]}, "completions", "a\nb"),
        ({"prompt": "once"}, "completions", "once"),
        ({"input": ["x", "y"]}, "embeddings", "x\ny"),
        ({"input": [[1, 2, 3]]}, "embeddings", ""),
        ({"input": "bad words"}, "moderations", "bad words"),
        ({"query": "q", "documents": ["d1"]}, "rerank", "q"),
        ("not an object", "chat", ""),
    ],
)
def test_request_text(body, endpoint, text):
    assert request_text(body, endpoint) == text


def test_segments_cover_every_message_and_replacement_copies_only_changed_paths():
    segments = request_segments(CHAT, "chat")
    assert [path for path, _ in segments] == [("messages", 0, "content"), ("messages", 1, "content", 0, "text"),
                                              ("messages", 1, "content", 2, "text")]
    texts = [t for _, t in segments]
    texts[2] = "[REDACTED]"
    new = replace_segments(CHAT, segments, texts)
    assert new["messages"][1]["content"][2]["text"] == "[REDACTED]"
    assert CHAT["messages"][1]["content"][2]["text"] == "what is it?"
    assert new["messages"][0] is CHAT["messages"][0]  # unchanged parts are shared
    assert replace_segments(CHAT, segments, [t for _, t in segments]) is CHAT


def test_rerank_segments_include_documents():
    body = {"query": "q", "documents": ["d1", {"text": "d2"}]}
    assert [t for _, t in request_segments(body, "rerank")] == ["q", "d1", "d2"]


def test_answer_text_joins_choices():
    doc = {"choices": [{"message": {"content": "one"}}, {"message": {"content": None, "tool_calls": []}},
                       {"text": "two"}]}
    assert answer_text(doc) == "one\ntwo"
    assert answer_text({"data": []}) == ""


@pytest.mark.parametrize(
    ("text", "found", "value"),
    [
        ('{"a": 1}', True, {"a": 1}),
        ("  [1, 2] ", True, [1, 2]),
        ('Sure:\n```json\n{"a": [1]}\n```', True, {"a": [1]}),
        ('Result {"a": {"b": 2}} done', True, {"a": {"b": 2}}),
        ("nothing", False, None),
        ("{broken", False, None),
        ("", False, None),
    ],
)
def test_find_json(text, found, value):
    assert find_json(text) == (found, value)


A2A_TASK = {"task": {"id": "t", "status": {"state": "TASK_STATE_COMPLETED", "message": {"parts": [{"text": "done"}]}},
                     "artifacts": [{"artifactId": "a", "parts": [{"text": "one"}, {"data": {"x": 1}}]}],
                     "history": [{"role": "ROLE_USER", "parts": [{"text": "the question"}]}]}}


@pytest.mark.parametrize(("result", "text"), [
    (A2A_TASK, "done\none"),  # 1.0 SendMessage: the task's status message and artifacts, not its history
    ({"message": {"parts": [{"text": "hi"}, {"url": "u"}]}}, "hi"),
    ({"kind": "message", "parts": [{"kind": "text", "text": "hi 0.3"}]}, "hi 0.3"),  # 0.3: the result itself
    ({"kind": "task", "id": "t", "status": {"state": "completed"}, "artifacts": [{"parts": [{"text": "x"}]}]}, "x"),
    ("not an object", ""),
])
def test_an_a2a_results_text_is_its_message_or_task_answer(result, text):
    assert answer_text(result, A2A_MESSAGE) == text


def test_an_a2a_messages_text_parts_are_judged_and_redacted_in_place():
    params = {"message": {"role": "ROLE_USER", "parts": [{"text": "a"}, {"data": {}}, {"kind": "text", "text": "b"}]}}
    assert request_text(params, A2A_MESSAGE) == "a\nb"
    segments = request_segments(params, A2A_MESSAGE)
    redacted = replace_segments(params, segments, ["A", "B"])
    assert [p.get("text") for p in redacted["message"]["parts"]] == ["A", None, "B"]
    assert params["message"]["parts"][0]["text"] == "a"
