"""Micro benchmarks for SSE splitting and encoding, compiled vs pure (run with --benchmark-enable).

Each benchmark records ``events_per_s`` in its extra info (shown with ``--benchmark-json``) and prints it with ``-s``.
"""

from __future__ import annotations

from types import ModuleType

from streams import report

EVENTS = 20


def vendor_a_payload(i: int) -> bytes:
    return (
        b'{"id":"chatcmpl-9x8Yz7AbCdEfGhIjKlMn","object":"chat.completion.chunk","created":1718000000,'
        b'"model":"gpt-x-2024-08-06","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,'
        b'"delta":{"content":" token%02d"},"logprobs":null,"finish_reason":null}]}' % i
    )


VENDOR_A_CHUNKS = [b"data: " + vendor_a_payload(i) + b"\n\n" for i in range(EVENTS - 1)] + [b"data: [DONE]\n\n"]


def anthropic_events() -> list[tuple[bytes, bytes]]:
    events = [
        (b"message_start", b'{"type":"message_start","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message",'
         b'"role":"assistant","content":[],"model":"claude-x","stop_reason":null,"usage":{"input_tokens":25}}}'),
        (b"content_block_start", b'{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}'),
        (b"ping", b'{"type": "ping"}'),
    ]
    for i in range(EVENTS - 6):
        events.append((b"content_block_delta",
                       b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello %02d, '
                       b'this is a streamed piece of the answer"}}' % i))
    events += [
        (b"content_block_stop", b'{"type":"content_block_stop","index":0}'),
        (b"message_delta", b'{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},'
         b'"usage":{"output_tokens":15}}'),
        (b"message_stop", b'{"type":"message_stop"}'),
    ]
    return events


ANTHROPIC_CHUNKS = [b"event: " + name + b"\ndata: " + data + b"\n\n" for name, data in anthropic_events()]
HUGE_EVENT = b"data: " + b"x" * 262_144 + b"\n\n"
HUGE_CHUNKS = [HUGE_EVENT[i : i + 64] for i in range(0, len(HUGE_EVENT), 64)]


def split(module: ModuleType, chunks: list[bytes]) -> int:
    splitter = module.SseSplitter()
    count = 0
    for chunk in chunks:
        count += len(splitter.feed(chunk))
    return count + len(splitter.close())


def test_split_vendor_a_stream(benchmark, sse):
    assert benchmark(split, sse, VENDOR_A_CHUNKS) == EVENTS
    report(benchmark, EVENTS)


def test_split_anthropic_stream(benchmark, sse):
    assert benchmark(split, sse, ANTHROPIC_CHUNKS) == EVENTS
    report(benchmark, EVENTS)


def test_split_vendor_a_stream_one_chunk(benchmark, sse):
    whole = [b"".join(VENDOR_A_CHUNKS)]
    assert benchmark(split, sse, whole) == EVENTS
    report(benchmark, EVENTS)


def test_split_huge_event_in_64_byte_chunks(benchmark, sse):
    assert benchmark(split, sse, HUGE_CHUNKS) == 1
    report(benchmark, 1)


def encode_all(module: ModuleType, events: list[tuple[bytes, bytes | None]]) -> int:
    encode = module.encode_event
    return sum(len(encode(data, name)) for data, name in events)


def test_encode_vendor_a_events(benchmark, sse):
    events = [(vendor_a_payload(i), None) for i in range(EVENTS)]
    assert benchmark(encode_all, sse, events) > 0
    report(benchmark, EVENTS)


def test_encode_named_events(benchmark, sse):
    events = [(data, name) for name, data in anthropic_events()]
    assert benchmark(encode_all, sse, events) > 0
    report(benchmark, EVENTS)


def test_is_done(benchmark, sse):
    payloads = [vendor_a_payload(i) for i in range(EVENTS - 1)] + [b"[DONE]"]
    is_done = sse.is_done
    assert benchmark(lambda: sum(map(is_done, payloads))) == 1
    report(benchmark, EVENTS)
