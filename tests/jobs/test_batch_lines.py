"""Batch input lines: numbering from 1 across chunk cuts, and every reason a line is refused (with its param)."""

from __future__ import annotations

import msgspec
import pytest

from gateway.jobs.batch_lines import LineChecker, custom_id_of, file_lines
from gateway.schema.chat import parse_chat

CHAT = "/v1/chat/completions"


def line(custom_id="a", method="POST", url=CHAT, body=None, **extra) -> bytes:
    doc = {"custom_id": custom_id, "method": method, "url": url,
           "body": body if body is not None else {"model": "m", "messages": [{"role": "user", "content": "hi"}]}}
    doc.update(extra)
    return msgspec.json.encode(doc)


async def pieces(data: bytes, size: int):
    for start in range(0, len(data), size):
        yield data[start:start + size]


@pytest.mark.parametrize("size", [1, 3, 7, 1000])
async def test_lines_are_numbered_from_one_and_blank_lines_skipped(size):
    data = b'{"a":1}\r\n\n  \n{"b":2}\n{"c":3}'
    got = [item async for item in file_lines(pieces(data, size))]
    assert got == [(1, b'{"a":1}'), (4, b'{"b":2}'), (5, b'{"c":3}')]


def test_a_good_line_passes_with_its_body_bytes_kept():
    item, error = LineChecker(CHAT, parse_chat).check(1, line())
    assert error is None and item.custom_id == "a" and msgspec.json.decode(bytes(item.body))["model"] == "m"


@pytest.mark.parametrize("raw, code, param", [
    (b"not json", "invalid_json_line", None),
    (b"[1, 2]", "invalid_json_line", None),
    (msgspec.json.encode({"method": "POST", "url": CHAT, "body": {}}), "missing_required_parameter", "custom_id"),
    (msgspec.json.encode({"custom_id": "a", "url": CHAT, "body": {}}), "missing_required_parameter", "method"),
    (line(method="GET"), "invalid_method", "method"),
    (line(url="/v1/embeddings"), "mismatched_endpoint", "url"),
    (line(body=[1]), "invalid_body", "body"),
    (line(body={"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": True}), "invalid_body",
     "body.stream"),
    (line(body={"model": "m", "messages": []}), "invalid_body", "body.messages"),
    (line(body={"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": 3}), "invalid_body",
     "body.temperature"),
])
def test_bad_lines_name_their_problem(raw, code, param):
    item, error = LineChecker(CHAT, parse_chat).check(7, raw)
    assert item is None
    assert (error.code, error.param, error.line) == (code, param, 7)
    assert error.message


def test_a_repeated_custom_id_is_refused_after_its_first_use():
    checker = LineChecker(CHAT, parse_chat)
    assert checker.check(1, line("same"))[1] is None
    error = checker.check(2, line("same"))[1]
    assert (error.code, error.param, error.line) == ("duplicate_custom_id", "custom_id", 2)


def test_custom_id_is_read_from_any_line_that_has_one():
    assert custom_id_of(line("x-1", method="GET")) == "x-1"
    assert custom_id_of(b"garbage") is None
    assert custom_id_of(b'{"custom_id": 5}') is None
