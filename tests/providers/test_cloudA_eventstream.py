"""The cloudA event-stream codec: AWS's published frame vectors, any chunking, CRC and length failures."""

from __future__ import annotations

import uuid
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.providers.cloudA import eventstream as es

# AWS's event stream encoding test vectors (the positive and negative cases AWS's SDKs test their codecs with).
EMPTY_MESSAGE = b"\x00\x00\x00\x10\x00\x00\x00\x00\x05\xc2H\xeb}\x98\xc8\xff"
INT8_HEADER = b"\x00\x00\x00\x17\x00\x00\x00\x07)\x86\x01X\x04byte\x02\xff\xc2\xf8i\xdc"
INT16_HEADER = b"\x00\x00\x00\x19\x00\x00\x00\tq\x0e\x92>\x05short\x03\xff\xff\xb2|\xb6\xcc"
INT32_HEADER = b"\x00\x00\x00\x1d\x00\x00\x00\r\x83\xe3\xf0\xe7\x07integer\x04\xff\xff\xff\xff\x8b\x8e\x12\xeb"
INT64_HEADER = b"\x00\x00\x00\x1e\x00\x00\x00\x0e]J\xdb\x8d\x04long\x05\xff\xff\xff\xff\xff\xff\xff\xffK\xc22\xda"
PAYLOAD_NO_HEADERS = b"\x00\x00\x00\x1d\x00\x00\x00\x00\xfdR\x8cZ{'foo':'bar'}\xc3e96"
PAYLOAD_ONE_STR_HEADER = (b"\x00\x00\x00=\x00\x00\x00 \x07\xfd\x83\x96\x0ccontent-type\x07\x00\x10"
                          b"application/json{'foo':'bar'}\x8d\x9c\x08\xb1")
ALL_HEADER_TYPES = (
    b"\x00\x00\x00\x62\x00\x00\x00\x52\x03\xb5\xcb\x9c"
    b"\x010\x00\x011\x01\x012\x02\x02\x013\x03\x00\x03"
    b"\x014\x04\x00\x00\x00\x04\x015\x05\x00\x00\x00\x00\x00\x00\x00\x05"
    b"\x016\x06\x00\x05bytes\x017\x07\x00\x04utf8"
    b"\x018\x08\x00\x00\x00\x00\x00\x00\x00\x08\x019\x090123456789abcdef"
    b"\x63\x35\x36\x71"
)
ERROR_MESSAGE = (b"\x00\x00\x00\x52\x00\x00\x00\x42\xbf\x23\x63\x7e"
                 b"\x0d:message-type\x07\x00\x05error\x0b:error-code\x07\x00\x04code"
                 b"\x0e:error-message\x07\x00\x07message\x6b\x6c\xea\x3d")

POSITIVE = [
    ("empty", EMPTY_MESSAGE, {}, b""),
    ("int8", INT8_HEADER, {"byte": es.Byte(-1)}, b""),
    ("int16", INT16_HEADER, {"short": es.Short(-1)}, b""),
    ("int32", INT32_HEADER, {"integer": es.Int32(-1)}, b""),
    ("int64", INT64_HEADER, {"long": es.Long(-1)}, b""),
    ("payload-no-headers", PAYLOAD_NO_HEADERS, {}, b"{'foo':'bar'}"),
    ("payload-one-string-header", PAYLOAD_ONE_STR_HEADER, {"content-type": "application/json"}, b"{'foo':'bar'}"),
    ("all-header-types", ALL_HEADER_TYPES, {
        "0": True, "1": False, "2": es.Byte(2), "3": es.Short(3), "4": es.Int32(4), "5": es.Long(5),
        "6": b"bytes", "7": "utf8", "8": es.Timestamp(8), "9": uuid.UUID(bytes=b"0123456789abcdef"),
    }, b""),
    ("error-message", ERROR_MESSAGE, {":message-type": "error", ":error-code": "code", ":error-message": "message"},
     b""),
]

NEGATIVE = [
    ("corrupted-length", b"\x01\x00\x00\x1d\x00\x00\x00\x00\xfdR\x8cZ{'foo':'bar'}\xc3e96", "prelude CRC"),
    ("corrupted-payload", b"\x00\x00\x00\x1d\x00\x00\x00\x00\xfdR\x8cZ{'foo':'bar'\x8d\xc3e96", "message CRC"),
    ("corrupted-headers", PAYLOAD_ONE_STR_HEADER.replace(b"content-type", b"content+type"), "message CRC"),
    ("corrupted-headers-length", b"\x00\x00\x00=\xff\x00\x01\x02" + PAYLOAD_ONE_STR_HEADER[8:], "prelude CRC"),
    ("duplicate-header", b"\x00\x00\x00\x24\x00\x00\x00\x14\x4b\xb9\x82\xd0"
                         b"\x04test\x04asdf\x04test\x04asdf\xf3\xf4\x75\x63", "twice"),
    ("invalid-headers-length", b"\x00\x00\x00\x3d\xff\x00\x01\x02\x15\x83\xf5\xc2"
                               b"\x0ccontent-type\x07\x00\x10application/json{'foo':'bar'}\x2f\x37\x7f\x5d",
     "headers length"),
    ("oversized-message", b"\x01\x80\x00\x21\x00\x00\x00\x00\xdd\x3f\x33\xb1" + b"0" * 64, "message length"),
]


@pytest.mark.parametrize(("name", "frame", "headers", "payload"), POSITIVE, ids=[p[0] for p in POSITIVE])
def test_published_frames_decode_to_their_headers_and_payload(name, frame, headers, payload):
    [message] = es.decode_all(frame)
    assert message.headers == headers
    assert message.payload == payload
    for key, value in headers.items():
        assert type(message.headers[key]) is type(value)


@pytest.mark.parametrize(("name", "frame", "headers", "payload"), POSITIVE, ids=[p[0] for p in POSITIVE])
def test_the_encoder_writes_the_published_bytes(name, frame, headers, payload):
    assert es.encode_message(headers, payload) == frame


def test_every_published_frame_decodes_from_one_buffer_fed_a_byte_at_a_time():
    data = b"".join(p[1] for p in POSITIVE)
    decoder = es.EventStreamDecoder()
    messages = []
    for i in range(len(data)):
        messages.extend(decoder.feed(data[i:i + 1]))
    assert [m.headers for m in messages] == [p[2] for p in POSITIVE]
    assert decoder.pending == 0


@pytest.mark.parametrize(("name", "frame", "reason"), NEGATIVE, ids=[n[0] for n in NEGATIVE])
def test_corrupt_frames_raise_naming_what_is_wrong(name, frame, reason):
    with pytest.raises(es.EventStreamError, match=reason):
        es.EventStreamDecoder().feed(frame)


def test_an_oversized_length_is_refused_before_its_body_arrives():
    decoder = es.EventStreamDecoder()
    with pytest.raises(es.EventStreamError, match="message length"):
        decoder.feed(NEGATIVE[-1][1][:12])


def test_a_partial_frame_waits_for_the_rest():
    decoder = es.EventStreamDecoder()
    assert decoder.feed(PAYLOAD_ONE_STR_HEADER[:30]) == []
    assert decoder.pending == 30
    [message] = decoder.feed(PAYLOAD_ONE_STR_HEADER[30:] + EMPTY_MESSAGE[:5])
    assert message.headers["content-type"] == "application/json" and decoder.pending == 5
    with pytest.raises(es.EventStreamError, match="bytes left"):
        es.decode_all(PAYLOAD_ONE_STR_HEADER + EMPTY_MESSAGE[:5])


def test_event_and_exception_helpers_set_the_protocol_headers():
    [event] = es.decode_all(es.event_message("contentBlockDelta", b'{"delta":{"text":"hi"}}'))
    assert (event.message_type, event.event_type, event.content_type) == (
        "event", "contentBlockDelta", "application/json")
    [failure] = es.decode_all(es.exception_message("throttlingException", b'{"message":"slow down"}'))
    assert (failure.message_type, failure.exception_type) == ("exception", "throttlingException")
    [error] = es.decode_all(es.error_message("InternalFailure", "boom"))
    assert error.headers[":error-code"] == "InternalFailure" and error.payload == b""


def test_the_prelude_and_message_crcs_are_plain_crc32():
    frame = es.event_message("messageStop", b'{"stopReason":"end_turn"}')
    assert int.from_bytes(frame[8:12], "big") == zlib.crc32(frame[:8])
    assert int.from_bytes(frame[-4:], "big") == zlib.crc32(frame[:-4])
    assert int.from_bytes(frame[:4], "big") == len(frame)


@pytest.mark.parametrize(("value", "kind"), [
    (es.Byte(200), "does not fit"), (es.Short(-40000), "does not fit"), ("x" * 40000, "longer than"),
    (1.5, "unsupported"),
])
def test_values_that_do_not_fit_their_type_are_refused(value, kind):
    with pytest.raises(es.EventStreamError, match=kind):
        es.encode_header("h", value)


header_values = st.one_of(
    st.booleans(),
    st.integers(-(2 ** 7), 2 ** 7 - 1).map(es.Byte),
    st.integers(-(2 ** 15), 2 ** 15 - 1).map(es.Short),
    st.integers(-(2 ** 31), 2 ** 31 - 1).map(es.Int32),
    st.integers(-(2 ** 63), 2 ** 63 - 1).map(es.Long),
    st.integers(-(2 ** 63), 2 ** 63 - 1).map(es.Timestamp),
    st.binary(max_size=64),
    st.text(max_size=64),
    st.uuids(),
)
messages = st.tuples(
    st.dictionaries(st.text(min_size=1, max_size=20).filter(lambda s: len(s.encode()) <= 255), header_values,
                    max_size=6),
    st.binary(max_size=300),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(messages, min_size=1, max_size=5), st.lists(st.integers(1, 64), min_size=1, max_size=40))
def test_any_messages_cut_anywhere_decode_to_what_was_encoded(items, cuts):
    data = b"".join(es.encode_message(h, p) for h, p in items)
    decoder = es.EventStreamDecoder()
    out = []
    pos = 0
    for i in range(len(data)):
        size = cuts[i % len(cuts)]
        if pos >= len(data):
            break
        out.extend(decoder.feed(data[pos:pos + size]))
        pos += size
    assert [(m.headers, m.payload) for m in out] == [(h, p) for h, p in items]
    for message, (headers, _) in zip(out, items):
        assert [type(v) for v in message.headers.values()] == [type(v) for v in headers.values()]


@settings(max_examples=200, deadline=None)
@given(messages, st.data())
def test_any_single_flipped_bit_is_caught(item, data):
    frame = bytearray(es.encode_message(*item))
    bit = data.draw(st.integers(0, len(frame) * 8 - 1))
    frame[bit // 8] ^= 1 << (bit % 8)
    with pytest.raises(es.EventStreamError):
        es.decode_all(bytes(frame))
