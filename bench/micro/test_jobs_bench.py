"""What the batch and upload paths cost per unit of work: multipart parsing per MiB, checking one batch line and
building one output line. Run with ``python -m pytest bench/micro/test_jobs_bench.py --benchmark-enable``.

These are pure Python (no compiled twin): the figures show they stay small beside a line's pipeline cost (a few
hundred microseconds) and an upload's disk writes.
"""

from __future__ import annotations

import msgspec

from gateway.jobs.batch_lines import LineChecker
from gateway.jobs.batch_output import ResultLines
from gateway.jobs.multipart import MultipartParser
from gateway.schema.chat import parse_chat

BOUNDARY = "----bench-boundary-3f9a"
MIB = 1024 * 1024
LINE = msgspec.json.encode({"custom_id": "request-1", "method": "POST", "url": "/v1/chat/completions", "body": {
    "model": "gpt-4o-mini", "max_tokens": 64,
    "messages": [{"role": "system", "content": "You are brief."}, {"role": "user", "content": "Say hello."}]}})
ANSWER = msgspec.json.encode({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
                              "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello!"},
                                           "finish_reason": "stop"}],
                              "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}})


def test_multipart_parse_one_mib_in_64k_chunks(benchmark):
    body = (f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="f.jsonl"\r\n\r\n'.encode()
            + (LINE + b"\n") * (MIB // (len(LINE) + 1)) + f"\r\n--{BOUNDARY}--\r\n".encode())
    chunks = [body[i:i + 65536] for i in range(0, len(body), 65536)]

    def parse() -> int:
        parser = MultipartParser(BOUNDARY)
        size = 0
        for chunk in chunks:
            for event in parser.feed(chunk):
                if isinstance(event, bytes):
                    size += len(event)
        parser.close()
        return size

    assert benchmark(parse) > MIB - 1024


def test_check_one_batch_line(benchmark):
    def check() -> object:
        return LineChecker("/v1/chat/completions", parse_chat).check(1, LINE)

    item, error = benchmark(check)
    assert error is None and item.custom_id == "request-1"


def test_build_one_output_line(benchmark):
    result = benchmark(ResultLines().response, "request-1", "batch_gw_x-1", 200, ANSWER)
    assert result.startswith(b'o{"id":"batch_req_')
