"""Summing a session's usage from its ``response.done`` events (text and binary frames), and what is not one."""

from __future__ import annotations

import msgspec

from gateway.realtime.usage import SessionUsage


def done(usage: dict | None) -> str:
    return msgspec.json.encode({"type": "response.done", "event_id": "e", "response": {"usage": usage}}).decode()


USAGE = {"total_tokens": 30, "input_tokens": 20, "output_tokens": 10,
         "input_token_details": {"cached_tokens": 4, "text_tokens": 12, "audio_tokens": 8, "image_tokens": 0},
         "output_token_details": {"text_tokens": 3, "audio_tokens": 7}}


def test_every_response_done_adds_its_usage_and_details():
    usage = SessionUsage()
    usage.read(done(USAGE))
    usage.read(done(USAGE).encode())  # a binary frame carries the same JSON
    usage.read(done(None))  # a response without usage counts as a response
    assert usage.responses == 3
    assert usage.as_record_usage() == {
        "input_tokens": 40, "output_tokens": 20, "total_tokens": 60,
        "input_token_details": {"cached_tokens": 8, "text_tokens": 24, "audio_tokens": 16, "image_tokens": 0},
        "output_token_details": {"text_tokens": 6, "audio_tokens": 14}}


def test_other_events_and_bad_json_count_nothing():
    usage = SessionUsage()
    usage.read('{"type":"response.output_text.delta","delta":"response.done"}')
    usage.read('{"type": "response.done", ')
    usage.read(b"\x00\x01")
    usage.read('{"type":"response.created"}')
    assert usage.responses == 0 and usage.as_record_usage() is None


def test_a_total_missing_is_input_plus_output():
    usage = SessionUsage()
    usage.read(done({"input_tokens": 2, "output_tokens": 3}))
    assert usage.as_record_usage()["total_tokens"] == 5
