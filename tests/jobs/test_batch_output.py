"""Batch output lines in vendorA's format, and what the runner reads from a line's answer."""

from __future__ import annotations

import msgspec

from gateway.jobs.batch_output import OUTPUT, ResultLines, answer_usage, gateway_limit, result_usage, retry_after_s
from gateway.schema.batches import BatchError

_lines = ResultLines()
response_result, error_result, invalid_result = _lines.response, _lines.error, _lines.invalid

ANSWER = b'{"id":"chatcmpl-1","usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}}'


def test_a_2xx_answer_is_an_output_line_with_its_body_as_json():
    result = response_result("c-1", "req-1", 200, ANSWER)
    assert result[:1] == OUTPUT
    doc = msgspec.json.decode(result[1:])
    assert doc["id"].startswith("batch_req_") and doc["custom_id"] == "c-1" and doc["error"] is None
    assert doc["response"] == {"status_code": 200, "request_id": "req-1", "body": msgspec.json.decode(ANSWER)}


def test_an_error_answer_goes_to_the_error_file_and_a_pretty_body_becomes_one_line():
    result = response_result("c-2", "req-2", 400, b'{\n  "error": {"message": "bad"}\n}')
    assert result[:1] == b"e" and b"\n" not in result
    assert msgspec.json.decode(result[1:])["response"]["body"] == {"error": {"message": "bad"}}


def test_lines_without_an_answer_carry_code_and_message():
    doc = msgspec.json.decode(error_result("c-3", "batch_expired", "too late")[1:])
    assert doc["response"] is None and doc["error"] == {"code": "batch_expired", "message": "too late"}
    doc = msgspec.json.decode(invalid_result(None, BatchError("invalid_json_line", "not JSON", None, 4))[1:])
    assert doc["custom_id"] is None and doc["error"]["code"] == "invalid_json_line"


def test_usage_is_read_from_answers_and_stored_results():
    usage = answer_usage(ANSWER)
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (3, 5, 8)
    assert result_usage(response_result("c", "r", 200, ANSWER)).total_tokens == 8
    assert answer_usage(b"[]") is None


def test_only_a_429_without_a_provider_is_the_gateways_own_limit():
    assert gateway_limit(b'{"error":{"message":"rate limit","type":"rate_limit_error"}}') == ""
    assert gateway_limit(b'{"error":{"message":"spent","code":"usage_limit_exceeded"}}') == "usage_limit_exceeded"
    assert gateway_limit(b'{"error":{"message":"slow down","code":"rate_limit_exceeded"},"provider":"vendorA"}') is None
    assert gateway_limit(b"<html>") is None


def test_retry_after_prefers_milliseconds_and_ignores_dates():
    assert retry_after_s([(b"retry-after", b"3"), (b"retry-after-ms", b"250")]) == 0.25
    assert retry_after_s([(b"Retry-After", b"2")]) == 2.0
    assert retry_after_s([(b"retry-after", b"Wed, 21 Oct 2015 07:28:00 GMT")]) is None
    assert retry_after_s([]) is None
