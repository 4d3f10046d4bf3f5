"""The anthropic mock forces tool calls the way the API does, and refuses what the API refuses."""

from __future__ import annotations

import msgspec
import pytest

from tests.support.http import post, stream_events

TOOLS = [{"name": "first", "input_schema": {"type": "object", "properties": {"a": {"type": "integer"}}}},
         {"name": "second", "input_schema": {"type": "object", "properties": {"b": {"type": "boolean"}},
                                             "required": ["b"]}}]
BASE = {"model": "claude-test-1", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}], "tools": TOOLS}
HEADERS = {"x-api-key": "k", "anthropic-version": "2023-06-01", "content-type": "application/json"}


def messages(mock, body: dict, steps: list | None = None):
    return post(mock.scenario(steps) + "/v1/messages", body, HEADERS)


@pytest.mark.parametrize(("choice", "steps", "name", "value"), [
    ({"type": "tool", "name": "second"}, None, "second", {"b": True}),
    ({"type": "any"}, None, "first", {"a": 1}),
    ({"type": "any"}, [{"tool_name": "second"}], "second", {"b": True}),
])
def test_a_forced_tool_is_called_with_input_from_its_schema(mock, choice, steps, name, value):
    resp = messages(mock, {**BASE, "tool_choice": choice}, steps)
    doc = resp.json()
    assert resp.status == 200 and doc["stop_reason"] == "tool_use"
    assert [(b["type"], b["name"], b["input"]) for b in doc["content"]] == [("tool_use", name, value)]


def test_a_forced_tool_streams_its_input_in_pieces(mock):
    base = mock.scenario()
    status, _, events = stream_events(base + "/v1/messages", {**BASE, "stream": True,
                                                              "tool_choice": {"type": "tool", "name": "second"}},
                                      HEADERS)
    docs = [msgspec.json.decode(e) for e in events]
    pieces = [d["delta"]["partial_json"] for d in docs if d["type"] == "content_block_delta"]
    assert status == 200 and len([p for p in pieces if p]) >= 2 and msgspec.json.decode("".join(pieces)) == {"b": True}
    assert not [d for d in docs if d["type"] == "content_block_start" and d["content_block"]["type"] == "text"]


@pytest.mark.parametrize(("body", "text"), [
    ({**BASE, "tool_choice": {"type": "tool", "name": "third"}}, "not found"),
    ({**BASE, "tools": [], "tool_choice": {"type": "any"}}, "only be specified while providing tools"),
    ({**BASE, "max_tokens": 2048, "thinking": {"type": "enabled", "budget_tokens": 1024},
      "tool_choice": {"type": "any"}}, "Thinking may not be enabled when tool_choice forces tool use"),
])
def test_what_the_api_refuses_is_a_400(mock, body, text):
    resp = messages(mock, body)
    assert resp.status == 400 and text in resp.json()["error"]["message"]
