"""Tests for gateway/http/sse.py and its compiled twin: splitting upstream SSE streams and encoding ours."""

from __future__ import annotations

import re
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway._speedups import NO_EXTENSIONS
from gateway.http import sse as pure_sse
from tests.support.twins import compiled_twin


@pytest.fixture(params=["pure", "compiled"])
def sse(request: pytest.FixtureRequest) -> ModuleType:
    return pure_sse if request.param == "pure" else compiled_twin("sse")


def split_all(sse: ModuleType, chunks: list[bytes], close: bool = True) -> list[tuple[bytes | None, bytes]]:
    splitter = sse.SseSplitter()
    events = []
    for chunk in chunks:
        events.extend(splitter.feed(chunk))
    if close:
        events.extend(splitter.close())
    return events


def byte_by_byte(stream: bytes) -> list[bytes]:
    return [stream[i : i + 1] for i in range(len(stream))]


# --- a straightforward reference parser written from the WHATWG rules, for comparison on random input ---

_EOL = re.compile(rb"\r\n|\r|\n")


def reference(stream: bytes) -> list[tuple[bytes | None, bytes]]:
    """Whole-stream parse; like close(), an unterminated last line and a last event without blank line count."""
    events: list[tuple[bytes | None, bytes]] = []
    event: bytes | None = None
    data: list[bytes] = []
    lines = _EOL.split(stream)
    if lines and lines[-1] == b"":
        lines.pop()  # the stream ended on a line end: no unfinished line
    for line in lines:
        if line == b"":
            if data:
                events.append((event, b"\n".join(data)))
            event, data = None, []
        elif line.startswith(b":"):
            continue
        else:
            name, _, value = line.partition(b":")
            if value.startswith(b" "):
                value = value[1:]
            if name == b"data":
                data.append(value)
            elif name == b"event":
                event = value or None
    if data:
        events.append((event, b"\n".join(data)))
    return events


# --- line endings and chunk boundaries ---

STREAM_LF = b"data: one\n\nevent: named\ndata: two\n\ndata: three\ndata: four\n\n"
EXPECTED = [(None, b"one"), (b"named", b"two"), (None, b"three\nfour")]


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
def test_every_line_ending_gives_the_same_events(sse, eol):
    stream = STREAM_LF.replace(b"\n", eol)
    assert split_all(sse, [stream], close=False) == EXPECTED


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
def test_any_split_point_gives_the_same_events(sse, eol):
    stream = STREAM_LF.replace(b"\n", eol)
    for cut in range(len(stream) + 1):
        assert split_all(sse, [stream[:cut], stream[cut:]]) == EXPECTED, cut
    assert split_all(sse, byte_by_byte(stream)) == EXPECTED


def test_crlf_split_between_cr_and_lf_is_one_line_end(sse):
    splitter = sse.SseSplitter()
    assert splitter.feed(b"data: a\r") == []
    assert splitter.feed(b"\n") == []  # the LF completes the CRLF, it is not a blank line
    assert splitter.feed(b"\r") == [(None, b"a")]  # a blank line: its CR alone ends it
    assert splitter.feed(b"\ndata: b\r\n\r\n") == [(None, b"b")]  # that LF belongs to the CR before it


def test_cr_then_cr_across_chunks_is_a_blank_line(sse):
    splitter = sse.SseSplitter()
    assert splitter.feed(b"data: a\r") == []
    assert splitter.feed(b"\rdata: b\n\n") == [(None, b"a"), (None, b"b")]


def test_empty_chunks_change_nothing(sse):
    splitter = sse.SseSplitter()
    assert splitter.feed(b"data: a\r") == []
    assert splitter.feed(b"") == []
    assert splitter.feed(b"\n\n") == [(None, b"a")]


def test_events_come_out_as_soon_as_their_blank_line_arrives(sse):
    splitter = sse.SseSplitter()
    assert splitter.feed(b"data: {\"a\":1}\n") == []
    assert splitter.feed(b"\n") == [(None, b'{"a":1}')]
    assert splitter.feed(b"data: x\n\ndata: y\n\ndata: z") == [(None, b"x"), (None, b"y")]
    assert splitter.close() == [(None, b"z")]


def test_line_split_mid_field_name(sse):
    assert split_all(sse, [b"ev", b"ent: pi", b"ng\nda", b"ta", b": 1\n", b"\n"]) == [(b"ping", b"1")]


def test_huge_event_in_many_small_chunks(sse):
    payload = b"x" * 200_000
    stream = b"data: " + payload + b"\ndata: tail\n\n"
    chunks = [stream[i : i + 7] for i in range(0, len(stream), 7)]
    assert split_all(sse, chunks, close=False) == [(None, payload + b"\ntail")]


def test_many_data_lines_in_one_event(sse):
    lines = [str(i).encode() for i in range(5000)]
    stream = b"".join(b"data: " + line + b"\n" for line in lines) + b"\n"
    assert split_all(sse, byte_by_byte(stream)[:50] + [stream[50:]], close=False) == [(None, b"\n".join(lines))]


# --- fields ---


def test_comments_are_ignored(sse):
    stream = b": keep-alive\n\n:\ndata: a\n: in the middle\ndata: b\n\n"
    assert split_all(sse, [stream]) == [(None, b"a\nb")]


def test_only_one_leading_space_is_removed(sse):
    stream = b"data:no-space\n\ndata:  two spaces\n\ndata:\tTab\n\n"
    assert split_all(sse, [stream]) == [(None, b"no-space"), (None, b" two spaces"), (None, b"\tTab")]


def test_colons_after_the_first_stay_in_the_value(sse):
    assert split_all(sse, [b'data: {"url": "http://x:1"}\n\n']) == [(None, b'{"url": "http://x:1"}')]


def test_empty_data_line_dispatches_empty_data(sse):
    assert split_all(sse, [b"data:\n\ndata: \n\n"]) == [(None, b""), (None, b"")]


def test_empty_data_lines_keep_their_place(sse):
    assert split_all(sse, [b"data\ndata: a\ndata:\n\n"]) == [(None, b"\na\n")]


def test_field_without_colon_has_an_empty_value(sse):
    assert split_all(sse, [b"event: x\nevent\ndata\n\n"]) == [(None, b"")]


def test_event_without_data_is_not_dispatched(sse):
    assert split_all(sse, [b"event: ping\n\nid: 7\nretry: 100\n\n\n\ndata: a\n\n"]) == [(None, b"a")]


def test_event_name_resets_after_each_dispatch(sse):
    stream = b"event: one\ndata: a\n\ndata: b\n\nevent: gone\n\ndata: c\n\n"
    assert split_all(sse, [stream]) == [(b"one", b"a"), (None, b"b"), (None, b"c")]


def test_id_retry_and_unknown_fields_are_ignored(sse):
    stream = b"id: 42\nretry: 3000\nDATA: shouted\nfoo: bar\ndata: kept\nid\n\n"
    assert split_all(sse, [stream]) == [(None, b"kept")]


def test_anthropic_style_stream(sse):
    stream = (
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1"}}\n\n'
        b'event: content_block_delta\ndata: {"type":"content_block_delta","delta":{"text":"Hi"}}\n\n'
        b"event: ping\ndata: {\"type\": \"ping\"}\n\n"
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    )
    expected = [
        (b"message_start", b'{"type":"message_start","message":{"id":"msg_1"}}'),
        (b"content_block_delta", b'{"type":"content_block_delta","delta":{"text":"Hi"}}'),
        (b"ping", b'{"type": "ping"}'),
        (b"message_stop", b'{"type":"message_stop"}'),
    ]
    assert split_all(sse, [stream]) == expected
    assert split_all(sse, byte_by_byte(stream)) == expected


def test_vendorA_stream_with_done(sse):
    stream = b'data: {"choices":[{"delta":{"content":"a"}}]}\n\ndata: [DONE]\n\n'
    events = split_all(sse, [stream])
    assert [sse.is_done(data) for _, data in events] == [False, True]


# --- end of stream ---


def test_close_returns_the_event_without_blank_line(sse):
    splitter = sse.SseSplitter()
    assert splitter.feed(b"data: a\n\ndata: b\n") == [(None, b"a")]
    assert splitter.close() == [(None, b"b")]


def test_close_completes_an_unterminated_last_line(sse):
    splitter = sse.SseSplitter()
    assert splitter.feed(b"event: end\ndata: one\ndata: tw") == []
    assert splitter.close() == [(b"end", b"one\ntw")]


def test_close_with_nothing_pending_returns_nothing(sse):
    splitter = sse.SseSplitter()
    assert splitter.close() == []
    assert splitter.feed(b"data: a\n\n: trailing comment") == [(None, b"a")]
    assert splitter.close() == []
    assert splitter.feed(b"event: lonely\n") == []
    assert splitter.close() == []


def test_close_resets_the_splitter(sse):
    splitter = sse.SseSplitter()
    splitter.feed(b"event: old\ndata: stale\r")
    assert splitter.close() == [(b"old", b"stale")]
    # a fresh stream: no leftover name, data, line or pending CR
    assert splitter.feed(b"\ndata: new\n\n") == [(None, b"new")]


def test_bytes_like_input_gives_bytes_events(sse):
    events = split_all(sse, [bytearray(b"event: e\ndata: a\n\n"), memoryview(b"data: b\n\n")])
    assert events == [(b"e", b"a"), (None, b"b")]
    assert all(type(name) is bytes and type(data) is bytes for name, data in events if name is not None)


# --- encoding ---


def test_encode_single_line(sse):
    assert sse.encode_event(b'{"a":1}') == b'data: {"a":1}\n\n'
    assert sse.encode_event(b"") == b"data: \n\n"


def test_encode_with_event_name(sse):
    assert sse.encode_event(b"{}", b"message_start") == b"event: message_start\ndata: {}\n\n"


def test_encode_multi_line(sse):
    assert sse.encode_event(b"a\nb\n", b"e") == b"event: e\ndata: a\ndata: b\ndata: \n\n"
    assert sse.encode_event(b"a\r\nb\rc") == b"data: a\ndata: b\ndata: c\n\n"
    assert sse.encode_event(b"\n") == b"data: \ndata: \n\n"


def test_encode_refuses_an_event_name_that_breaks_framing(sse):
    with pytest.raises(ValueError, match="event name"):
        sse.encode_event(b"x", b"evil\ndata: injected")
    with pytest.raises(ValueError, match="event name"):
        sse.encode_event(b"x", b"evil\r")


@pytest.mark.parametrize("data", [b"", b"x", b" leading space", b"a\nb", b"\n\n", b"trailing\n", b'{"k": ":"}'])
def test_encoded_events_split_back_to_their_data(sse, data):
    assert split_all(sse, [sse.encode_event(data, b"name")]) == [(b"name", data)]


def test_done_constant_and_is_done(sse):
    assert sse.DONE == b"data: [DONE]\n\n"
    assert split_all(sse, [sse.DONE]) == [(None, b"[DONE]")]
    for data in (b"[DONE]", b" [DONE]", b"[DONE]\n", b"\t\r\n [DONE] \x0b\x0c"):
        assert sse.is_done(data), data
    for data in (b"", b"DONE", b"[done]", b"[DONE] x", b'{"done": "[DONE]"}', b"[DONE", b"\xa0[DONE]"):
        assert not sse.is_done(data), data


def test_twins_expose_the_same_names():
    compiled = compiled_twin("sse")
    assert sorted(compiled.__all__) == sorted(pure_sse.__all__)
    for name in pure_sse.__all__:
        assert hasattr(compiled, name), name
    assert compiled.DONE == pure_sse.DONE


# --- property tests ---

names = st.one_of(st.none(), st.binary(min_size=1, max_size=12).filter(lambda b: b"\n" not in b and b"\r" not in b))
datas = st.binary(max_size=60)
event_lists = st.lists(st.tuples(datas, names), max_size=12)


def chunked(stream: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(stream) + 1) for c in cuts})
    bounds = [0, *points, len(stream)]
    return [stream[a:b] for a, b in zip(bounds, bounds[1:])]


def twins() -> list[ModuleType]:
    return [pure_sse] if NO_EXTENSIONS else [pure_sse, compiled_twin("sse")]


@settings(max_examples=300, deadline=None)
@given(event_lists, st.lists(st.integers(min_value=0), max_size=20))
def test_encoded_events_survive_any_chunking_in_both_twins(events, cuts):
    for module in twins():
        stream = b"".join(module.encode_event(data, name) for data, name in events)
        assert stream == b"".join(pure_sse.encode_event(data, name) for data, name in events)
        expected = [(name, data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")) for data, name in events]
        assert split_all(module, [stream]) == expected
        assert split_all(module, chunked(stream, cuts)) == expected


wire_bytes = st.lists(
    st.sampled_from([b"data", b"event", b"id", b":", b" ", b"\r", b"\n", b"\r\n", b"x", b"\xff", b"[DONE]"]),
    max_size=60,
).map(b"".join)


@settings(max_examples=500, deadline=None)
@given(wire_bytes, st.lists(st.integers(min_value=0), max_size=20))
def test_twins_agree_on_arbitrary_streams_cut_anywhere(stream, cuts):
    expected = reference(stream)
    for module in twins():
        assert split_all(module, [stream]) == expected
        assert split_all(module, chunked(stream, cuts)) == expected
        assert split_all(module, byte_by_byte(stream)) == expected
        assert module.is_done(stream) == pure_sse.is_done(stream)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=40), st.one_of(st.none(), st.binary(max_size=10)))
def test_twins_encode_identically(data, name):
    for module in twins():
        try:
            expected = pure_sse.encode_event(data, name)
        except ValueError:
            with pytest.raises(ValueError):
                module.encode_event(data, name)
            continue
        assert module.encode_event(data, name) == expected


# -- scan_relay: what keeps a vendorA chunk from being relayed as received -------------------------------------

_EVENT = b'data: {"id":"c","choices":[{"index":0,"delta":{"content":"%s"},"finish_reason":null}],"usage":null}\n\n'
_CHUNK = _EVENT % b"hi" + _EVENT % b" there"


def test_scan_relay_passes_a_plain_chunk_unchanged(sse: ModuleType) -> None:
    plain = _CHUNK.replace(b',"usage":null', b"")
    out, flags = sse.scan_relay(plain, True)
    assert out is plain and flags == 0


def test_scan_relay_strips_null_usage_members_only_when_asked(sse: ModuleType) -> None:
    out, flags = sse.scan_relay(_CHUNK, True)
    assert out == _CHUNK.replace(b',"usage":null', b"") and flags == 0
    kept, flags = sse.scan_relay(_CHUNK, False)
    assert kept == _CHUNK and flags == 0


@pytest.mark.parametrize(("chunk", "expected"), [
    (b'data: {"error":{"message":"x"}}\n\n', "RELAY_ERROR"),
    (b"data: [DONE]\n\n", "RELAY_DONE"),
    (b"data: {}\r\n\r\n", "RELAY_CR"),
    (b'data: {"choices":[],"usage":{"prompt_tokens":1}}\n\n', "RELAY_USAGE"),
    (b'data: {"choices":[],"usage":nul', "RELAY_USAGE"),  # cut inside the member: not known to be null
])
def test_scan_relay_flags_what_needs_the_event_path(sse: ModuleType, chunk: bytes, expected: str) -> None:
    for strip in (False, True):
        _, flags = sse.scan_relay(chunk, strip)
        assert flags == getattr(sse, expected)


def test_scan_relay_cuts_many_members_in_one_chunk(sse: ModuleType) -> None:
    chunk = _CHUNK * 50  # 100 members: past the compiled twin's inline table of cut positions
    out, flags = sse.scan_relay(chunk, True)
    assert out == chunk.replace(b',"usage":null', b"") and flags == 0


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([b",", b'"usage"', b":null", b'"error"', b"[DONE]", b"\r", b"\n\n", b"data: ",
                                 b'{"a":1}', b"[", b'"', b"x"]), max_size=40), st.booleans())
def test_scan_relay_twins_agree(parts: list[bytes], strip: bool) -> None:
    chunk = b"".join(parts)
    assert compiled_twin("sse").scan_relay(chunk, strip) == pure_sse.scan_relay(chunk, strip)
