"""The vendorA stream relay: events pass unchanged, [DONE] is swallowed, in-band errors are raised in order."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.http.errors import GatewayError
from gateway.providers.vendorA import VendorAStream
from tests.support.http import stream_events

CHUNK = b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n'
ERROR = b'data: {"error":{"message":"went wrong","type":"server_error","code":503}}\n\n'


def test_events_before_an_error_in_the_same_read_go_out_first():
    stream = VendorAStream("vendorA")
    out = stream.feed(CHUNK + CHUNK + ERROR)
    assert b"".join(out) == CHUNK + CHUNK  # as received, before the error is raised
    with pytest.raises(GatewayError) as info:
        stream.feed(b"")
    assert info.value.status == 503 and info.value.message == "went wrong"


def test_an_error_as_the_first_event_raises_at_once():
    with pytest.raises(GatewayError):
        VendorAStream("vendorA").feed(ERROR + CHUNK)


def test_done_is_swallowed_and_usage_is_read():
    stream = VendorAStream("vendorA")
    usage = b'data: {"id":"c1","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}\n\n'
    out = stream.feed(CHUNK + usage + b"data: [DONE]\n\n")
    assert len(out) == 2 and stream.close() == []
    assert stream.usage.total_tokens == 7


def test_a_stream_without_done_is_malformed():
    stream = VendorAStream("vendorA")
    stream.feed(CHUNK)
    with pytest.raises(GatewayError) as info:
        stream.close()
    assert info.value.status == 502


def test_content_then_error_in_one_upstream_write_reaches_the_client_in_order(gateway, mock, gw_headers):
    base = mock.scenario([{"stream_error": "burst", "message": "burst error"}])
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    status, _, events = stream_events(f"{gateway.url}/v1/chat/completions", body, gw_headers(base + "/v1"))
    payloads = list(events)
    assert status == 200
    assert payloads[-1] == b"[DONE]" and b"burst error" in payloads[-2]
    contents = [msgspec.json.decode(p)["choices"][0]["delta"].get("content") for p in payloads[:-2]]
    assert "".join(c or "" for c in contents).startswith("Hello from the")


def test_aligned_chunks_are_relayed_as_received_and_misaligned_ones_are_split():
    stream = VendorAStream("vendorA")
    assert stream.feed(CHUNK) == [CHUNK]  # the very bytes
    half = len(CHUNK) // 2
    assert stream.feed(CHUNK[:half]) == []
    out = stream.feed(CHUNK[half:] + CHUNK)
    assert len(out) == 2 and all(b'"hi"' in e for e in out)
    crlf = CHUNK.replace(b"\n", b"\r\n")
    assert stream.feed(crlf) == [CHUNK]  # normalised through the splitter
    assert stream.feed(b"data: [DONE]\n\n") == [] and stream.close() == []



USAGE = b'data: {"id":"c1","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}\n\n'
NULL_USAGE = b'data: {"id":"c1","choices":[{"index":0,"delta":{"content":"x"}}],"usage":null}\n\n'
DONE = b"data: [DONE]\n\n"


class SplitterOnly(VendorAStream):
    """The relay with every chunk through the splitter: what the fast paths must be indistinguishable from."""

    def __init__(self, provider: str) -> None:
        super().__init__(provider)
        self.aligned = False

    def passthrough_ready(self) -> bool:
        return False


def relay(stream: VendorAStream, chunks: list[bytes]) -> tuple[bytes, object]:
    """Everything the stream relays for ``chunks`` then its end, and how it ended (an error's status, or usage)."""
    out = b""
    try:
        for chunk in chunks:
            out += b"".join(stream.feed(chunk))
        out += b"".join(stream.feed(b""))
        out += b"".join(stream.close())
    except GatewayError as error:
        return out, error.status
    return out, stream.usage.total_tokens if stream.usage else None


def test_the_read_that_ends_the_stream_relays_its_events_as_received():
    stream = VendorAStream("vendorA")
    assert stream.feed(CHUNK) == [CHUNK]
    out = stream.feed(CHUNK * 3 + USAGE + DONE)
    assert out[0] == CHUNK * 3 and stream.done  # the events before the usage event, the very bytes
    assert stream.usage.total_tokens == 7 and stream.close() == []


@settings(max_examples=300, deadline=None)
@given(events=st.lists(st.sampled_from([CHUNK, NULL_USAGE, USAGE, ERROR, DONE, CHUNK[:-1] + DONE]), max_size=8),
       cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=6), strip=st.booleans())
def test_relayed_bytes_and_ending_do_not_depend_on_the_fast_paths_or_on_where_reads_are_cut(events, cuts, strip):
    body = b"".join(events)
    points = sorted({min(c, len(body)) for c in cuts})
    chunks = [body[a:b] for a, b in zip([0, *points], [*points, len(body)]) if b > a]
    fast, slow = VendorAStream("vendorA"), SplitterOnly("vendorA")
    fast.strip_usage = slow.strip_usage = strip
    assert relay(fast, chunks) == relay(slow, chunks)
