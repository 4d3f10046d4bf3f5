"""The vendorA stream relay: events pass unchanged, [DONE] is swallowed, in-band errors are raised in order."""

from __future__ import annotations

import msgspec
import pytest

from gateway.http.errors import GatewayError
from gateway.providers.vendorA import VendorAStream
from tests.support.http import stream_events

CHUNK = b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n'
ERROR = b'data: {"error":{"message":"went wrong","type":"server_error","code":503}}\n\n'


def test_events_before_an_error_in_the_same_read_go_out_first():
    stream = VendorAStream("vendorA")
    out = stream.feed(CHUNK + CHUNK + ERROR)
    assert len(out) == 2 and b'"hi"' in out[0]
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


@pytest.mark.parametrize("last", [CHUNK * 3 + b"data: [DONE]\n\n", b"data: [DONE]\n\n"], ids=["events+done", "done"])
def test_the_read_that_ends_the_stream_relays_its_events_as_received_and_swallows_done(last):
    stream = VendorAStream("vendorA")
    assert stream.feed(CHUNK) == [CHUNK]
    out = stream.feed(last)
    assert b"".join(out) == last[: -len(b"data: [DONE]\n\n")] and stream.done
    assert stream.feed(CHUNK) == [] and stream.close() == []  # nothing after [DONE] goes out


@pytest.mark.parametrize("last", [
    CHUNK[:-1] + b"data: [DONE]\n\n",  # [DONE] as a second data line of the last event: not the end
    CHUNK + b"data: [DONE]\n\n" + b"data: [DONE]\n\n",
    CHUNK + b"data:[DONE]\n\n",
], ids=["continuation-line", "done-twice", "no-space"])
def test_a_last_read_the_fast_path_cannot_vouch_for_goes_through_the_splitter(last):
    fast, slow = VendorAStream("vendorA"), VendorAStream("vendorA")
    slow.aligned = False  # forces the splitter: what the relay must match
    out = [*fast.feed(last)]
    expected = [*slow.feed(last)]
    assert out == expected
    if fast.done:
        assert fast.close() == slow.close() == []
    else:
        with pytest.raises(GatewayError):
            fast.close()
