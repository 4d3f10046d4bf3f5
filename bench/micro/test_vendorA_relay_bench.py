"""Micro benchmarks for relaying a vendorA stream: what asking for usage the client did not ask for costs.

A 20-chunk stream through ``VendorAStream`` as the client asked for it (no usage), as it arrives once the gateway has
asked for usage (``"usage":null`` on every chunk, a usage-only chunk at the end, both stripped again), plus the
pipeline's per-chunk accounting (each chunk sent kept for the estimate, up to HEAD_BYTES) and the background
estimate. Run with ``python -m pytest bench/micro/test_vendorA_relay_bench.py --benchmark-enable``.
"""

from __future__ import annotations

from types import ModuleType

from gateway.observability.estimate import HEAD_BYTES, relayed_text_chars
from gateway.providers.vendorA import VendorAStream

CHUNKS = 20
_HEAD = (b'{"id":"chatcmpl-9x8Yz7AbCdEfGhIjKlMn","object":"chat.completion.chunk","created":1718000000,'
         b'"model":"gpt-x-2024-08-06","system_fingerprint":"fp_44709d6fcb",')


def content(i: int, usage_null: bool) -> bytes:
    usage = b'"usage":null,' if usage_null else b""
    return (b"data: " + _HEAD + usage + b'"choices":[{"index":0,"delta":{"content":" token%02d"},"logprobs":null,'
            b'"finish_reason":null}]}\n\n' % i)


PLAIN = [content(i, False) for i in range(CHUNKS)] + [b"data: [DONE]\n\n"]
WITH_USAGE = [content(i, True) for i in range(CHUNKS)] + [
    b"data: " + _HEAD + b'"usage":{"prompt_tokens":9,"completion_tokens":20,"total_tokens":29},"choices":[]}\n\n',
    b"data: [DONE]\n\n"]


def relay(chunks: list[bytes], strip: bool) -> int:
    stream = VendorAStream("vendorA")
    stream.strip_usage = strip
    head: list[bytes] = []
    kept = rest_bytes = rest_events = 0
    for chunk in chunks:
        out = stream.feed(chunk)
        if out:
            data = b"".join(out)
            if kept < HEAD_BYTES:
                head.append(data)
                kept += len(data)
            else:
                rest_bytes += len(data)
                rest_events += data.count(b"\n\n")
    stream.close()
    return kept + rest_bytes


def test_relay_as_the_client_asked(benchmark, sse_in_use: ModuleType) -> None:
    assert benchmark(relay, PLAIN, False) > 0


def test_relay_with_usage_asked_for_and_stripped(benchmark, sse_in_use: ModuleType) -> None:
    assert benchmark(relay, WITH_USAGE, True) == relay(PLAIN, False)  # the client sees the same bytes


def test_estimate_a_relayed_stream(benchmark) -> None:
    head = b"".join(PLAIN[:-1])  # the whole stream is under HEAD_BYTES: its text is counted exactly
    assert benchmark(relayed_text_chars, head) == CHUNKS * len(" token00")
