"""What a translated turn writes and keeps (``gateway/realtime/turn.py``): output items as the next turn's input,
the mode's error event, and a response prepared without output."""

from __future__ import annotations

import json

from gateway.realtime.turn import as_input, error_event, prepared_events


def test_output_items_become_input_items():
    assert as_input([{"type": "message", "content": [{"type": "output_text", "text": "hi"}, {"type": "refusal"}]},
                     {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}", "id": "fc_1"},
                     {"type": "reasoning", "summary": []}]) == [
        {"role": "assistant", "content": [{"type": "output_text", "text": "hi"}]},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}]
    assert as_input(None) == []


def test_the_error_event_has_the_modes_shape():
    assert json.loads(error_event(400, "invalid_request_error", "invalid_value", "bad", "input", "lane")) == {
        "type": "error", "status": 400, "stream_id": "lane",
        "error": {"type": "invalid_request_error", "code": "invalid_value", "message": "bad", "param": "input"}}
    in_stream = json.loads(error_event(None, "server_error", None, "cut", None, sequence_number=7))
    assert "status" not in in_stream and in_stream["sequence_number"] == 7


def test_a_prepared_response_is_created_then_completed_without_output_or_usage():
    (created_name, created), (completed_name, completed) = prepared_events(
        {"model": "m", "input": "x", "store": False}, "resp_before", "lane")
    created, completed = json.loads(created), json.loads(completed)
    assert (created_name, completed_name) == (b"response.created", b"response.completed")
    assert [created["sequence_number"], completed["sequence_number"]] == [0, 1]
    assert created["response"]["id"] == completed["response"]["id"]
    assert completed["response"]["id"].startswith("resp_") and completed["stream_id"] == "lane"
    assert (completed["response"]["status"], completed["response"]["output"]) == ("completed", [])
    assert completed["response"]["previous_response_id"] == "resp_before"
    assert completed["response"]["usage"]["total_tokens"] == 0
