"""The lean exchange's connection (``gateway.upstream.connection``) against a raw upstream that misbehaves: heads split
across reads, chunk extensions and trailers, cuts, resets, silences, interim answers, oversized or invalid heads,
close-delimited bodies, stray bytes on an idle connection and a stale pooled connection. Each test says what the
gateway's caller sees: the status, the body, the error (502 / 504 and its words) and whether a connection was
reused."""

from __future__ import annotations

import asyncio

import pytest

from gateway.http.errors import GatewayError
from gateway.upstream.connection import MAX_INTERIM
from gateway.upstream.lean import LeanResponse
from gateway.upstream.request import UpstreamRequest
from tests.support.lean import ScriptedConnection, ScriptedUpstream, answer, fetch, lean_transport, refusal

BODY = b'{"id":"chatcmpl-1","object":"chat.completion"}'


async def test_a_head_split_into_single_bytes_is_read_whole():
    async def serve(conn: ScriptedConnection) -> None:
        while await conn.request():
            await conn.trickle(answer(200, BODY, "content-type: application/json", "x-request-id: r-1"))

    async with ScriptedUpstream(serve) as upstream, lean_transport() as transport:
        status, headers, body = await fetch(transport, upstream.url + "/v1/chat")
        assert (status, body) == (200, BODY)
        assert headers["Content-Type"] == "application/json" and headers["X-REQUEST-ID"] == "r-1"
        assert (await fetch(transport, upstream.url + "/v1/chat"))[2] == BODY
    assert upstream.connections == 1


async def test_chunk_extensions_and_trailers_are_framing_not_body_and_the_connection_is_reused():
    async def serve(conn: ScriptedConnection) -> None:
        while await conn.request():
            await conn.send(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ntrailer: x-checksum\r\n\r\n"
                            b"5;name=value;other=\"quoted\"\r\nhello\r\n"
                            b"6;ext\r\n world\r\n"
                            b"0;last=1\r\nx-checksum: abc\r\nx-more: 1\r\n\r\n")

    async with ScriptedUpstream(serve) as upstream, lean_transport() as transport:
        for _ in range(3):
            status, headers, body = await fetch(transport, upstream.url)
            assert (status, body) == (200, b"hello world")
            assert "x-checksum" not in headers
    assert upstream.connections == 1


async def test_a_close_right_after_the_head_is_a_cut_body_not_a_short_answer():
    async def serve(conn: ScriptedConnection) -> None:
        await conn.request()
        await conn.send(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n" + b"x" * 10)
        conn.close()

    async with ScriptedUpstream(serve) as upstream, lean_transport() as transport:
        resp = await transport.open(UpstreamRequest(upstream.url, {}, b"{}"))
        assert resp.status == 200
        with pytest.raises(LeanResponse.read_errors) as failure:
            while await resp.read_some():
                pass
        assert resp.failure_text(failure.value) == "cut its answer off before the end"
        resp.close()

        resp = await transport.open(UpstreamRequest(upstream.url, {}, b"{}"))
        with pytest.raises(GatewayError) as error:
            await resp.read_body()
        assert error.value.status == 502
        assert error.value.message == "upstream 127.0.0.1 cut its answer off before the end"


async def test_a_reset_mid_body_is_a_502_that_says_reset():
    async def serve(conn: ScriptedConnection) -> None:
        await conn.request()
        await conn.send(b"HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n" + b"x" * 100)
        await asyncio.sleep(0.05)
        conn.reset()

    error = await refusal(serve)
    assert error.status == 502
    assert "reset the connection" in error.message


async def test_a_head_slower_than_the_read_timeout_is_a_504_that_says_read_timeout():
    async def serve(conn: ScriptedConnection) -> None:
        await conn.request()
        await conn.send(b"HTTP/1.1 200 OK\r\n")
        await asyncio.sleep(5)

    error = await refusal(serve, upstream_read_timeout_ms=300)
    assert error.status == 504
    assert "read timeout" in error.message and "connect" not in error.message


async def test_a_stream_that_falls_silent_past_the_read_timeout_fails_its_read():
    async def serve(conn: ScriptedConnection) -> None:
        await conn.request()
        await conn.send(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        for _ in range(3):
            await conn.send(b"d\r\ndata: event\n\n\r\n")
        await asyncio.sleep(5)

    async with ScriptedUpstream(serve) as upstream, lean_transport(upstream_read_timeout_ms=300) as transport:
        resp = await transport.open(UpstreamRequest(upstream.url, {}, b"{}"), stream=True)
        assert resp.status == 200
        events = []
        with pytest.raises(LeanResponse.read_errors) as failure:
            async for piece in resp.chunks():
                events.append(piece)
        resp.close()
    assert b"".join(events) == b"data: event\n\n" * 3
    assert resp.failure_text(failure.value) == "fell silent past the read timeout"


async def test_an_interim_100_continue_is_skipped():
    async def serve(conn: ScriptedConnection) -> None:
        while await conn.request():
            await conn.send(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\n")
            await conn.send(answer(201, BODY, "x-final: yes"))

    async with ScriptedUpstream(serve) as upstream, lean_transport() as transport:
        for _ in range(2):
            status, headers, body = await fetch(transport, upstream.url)
            assert (status, body) == (201, BODY)
            assert headers["x-final"] == "yes" and "link" not in headers
    assert upstream.connections == 1


async def test_endless_interim_answers_are_a_502_not_a_stream_held_open_for_ever():
    async def serve(conn: ScriptedConnection) -> None:
        await conn.request()
        for _ in range(MAX_INTERIM + 1):
            await conn.send(b"HTTP/1.1 102 Processing\r\n\r\n")
        await conn.send(answer(200, BODY))

    async with ScriptedUpstream(serve) as upstream, lean_transport() as transport:
        with pytest.raises(GatewayError) as refused:
            await transport.open(UpstreamRequest(upstream.url, {}, b"{}"), stream=True)
    assert refused.value.status == 502
    assert f"more than {MAX_INTERIM} interim (1xx) answers" in refused.value.message


@pytest.mark.parametrize(("head", "words"), [
    (b"HTTP/1.1 200 OK\r\nx-big: " + b"a" * (65 * 1024) + b"\r\n\r\n", "head is larger than 65536 bytes"),
    (b"HTTP/1.1 200 OK\r\n" + b"".join(b"x-h%d: v\r\n" % i for i in range(129)) + b"content-length: 0\r\n\r\n",
     "more than 128 header fields"),
    (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n"
     + b"".join(b"x-t%d: v\r\n" % i for i in range(129)) + b"\r\n", "more than 128 trailer fields"),
    (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", "not valid HTTP"),
    (b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\nabc", "not valid HTTP"),
], ids=["head-over-64KiB", "129-fields", "129-trailers", "garbage", "two-lengths"])
async def test_an_answer_that_is_not_a_bounded_valid_http_head_is_a_502(head, words):
    async def serve(conn: ScriptedConnection) -> None:
        await conn.request()
        await conn.send(head)
        await conn.closed_by_client()

    error = await refusal(serve)
    assert error.status == 502
    assert words in error.message, error.message


async def test_a_head_that_never_ends_is_cut_at_64_KiB():
    async def serve(conn: ScriptedConnection) -> None:
        await conn.request()
        await conn.send(b"HTTP/1.1 200 OK\r\n")
        for i in range(100):  # 8 KiB fields, each its own read, and no end of head
            await conn.send(b"x-f%d: %s\r\n" % (i, b"v" * 8192))
            await asyncio.sleep(0.002)

    error = await refusal(serve)
    assert error.status == 502
    assert "head is larger than 65536 bytes" in error.message


async def test_128_header_fields_are_still_an_answer():
    fields = b"".join(b"x-h%d: v\r\n" % i for i in range(127))

    async def serve(conn: ScriptedConnection) -> None:
        await conn.request()
        await conn.send(b"HTTP/1.1 200 OK\r\n" + fields + b"content-length: 2\r\n\r\nok")

    async with ScriptedUpstream(serve) as upstream, lean_transport() as transport:
        status, headers, body = await fetch(transport, upstream.url)
    assert (status, body, len(headers)) == (200, b"ok", 128)


@pytest.mark.parametrize("version", ["HTTP/1.1", "HTTP/1.0"])
async def test_a_body_without_length_or_chunks_ends_at_close_complete(version):
    async def serve(conn: ScriptedConnection) -> None:
        await conn.request()
        await conn.send(f"{version} 200 OK\r\ncontent-type: text/plain\r\n\r\n".encode() + b"all of it")
        await asyncio.sleep(0.05)
        await conn.send(b", and more")
        conn.close()

    async with ScriptedUpstream(serve) as upstream, lean_transport() as transport:
        assert (await fetch(transport, upstream.url))[::2] == (200, b"all of it, and more")
        assert (await fetch(transport, upstream.url))[::2] == (200, b"all of it, and more")
    assert upstream.connections == 2  # the first connection ended with its answer


@pytest.mark.parametrize("answer_head", [
    b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok",
    b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nok",
], ids=["connection-close", "http-1.0"])
async def test_an_answer_that_does_not_keep_alive_is_never_reused(answer_head):
    async def serve(conn: ScriptedConnection) -> None:
        while await conn.request():  # the server would answer again: the client must not ask
            await conn.send(answer_head)

    async with ScriptedUpstream(serve) as upstream, lean_transport() as transport:
        for _ in range(3):
            assert (await fetch(transport, upstream.url))[::2] == (200, b"ok")
    assert upstream.connections == 3


async def test_an_http_1_0_keep_alive_answer_is_reused():
    async def serve(conn: ScriptedConnection) -> None:
        while await conn.request():
            await conn.send(b"HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ncontent-length: 2\r\n\r\nok")

    async with ScriptedUpstream(serve) as upstream, lean_transport() as transport:
        for _ in range(3):
            assert (await fetch(transport, upstream.url))[::2] == (200, b"ok")
    assert upstream.connections == 1


async def test_bytes_sent_on_an_idle_pooled_connection_drop_it():
    dropped = asyncio.Event()

    async def serve(conn: ScriptedConnection) -> None:
        await conn.request()
        await conn.send(answer(200, b"first"))
        if conn.index == 1:
            await asyncio.sleep(0.05)
            await conn.send(answer(200, b"stray, nobody asked"))
            if await conn.closed_by_client():
                dropped.set()
            return
        while await conn.request():
            await conn.send(answer(200, b"next"))

    async with ScriptedUpstream(serve) as upstream, lean_transport() as transport:
        assert (await fetch(transport, upstream.url))[2] == b"first"
        await dropped.wait()  # the client closed the connection the stray bytes came on
        assert (await fetch(transport, upstream.url))[::2] == (200, b"first")  # a new connection's first answer
    assert upstream.connections == 2


async def test_a_pooled_connection_closed_by_the_upstream_meanwhile_is_replaced():
    async def serve(conn: ScriptedConnection) -> None:
        await conn.request()
        await conn.send(answer(200, b"once"))
        conn.close()  # keep-alive said, then closed while idle

    async with ScriptedUpstream(serve) as upstream, lean_transport() as transport:
        for _ in range(3):
            assert (await fetch(transport, upstream.url))[::2] == (200, b"once")
            await asyncio.sleep(0.05)
    assert upstream.connections == 3


async def test_a_stale_pooled_connection_is_resent_once_on_a_new_one():
    """The upstream reads the next request on the pooled connection and closes it without a word (its keep-alive
    ran out as the request arrived): the request goes out once more on a new connection."""

    async def serve(conn: ScriptedConnection) -> None:
        await conn.request()
        await conn.send(answer(200, b"answered"))
        await conn.request()
        conn.close()

    async with ScriptedUpstream(serve) as upstream, lean_transport() as transport:
        assert (await fetch(transport, upstream.url, b'{"n":1}'))[::2] == (200, b"answered")
        assert (await fetch(transport, upstream.url, b'{"n":2}'))[::2] == (200, b"answered")
    assert upstream.connections == 2
    assert len(upstream.requests) == 3  # the second request twice: on the stale connection, then on a new one
    assert upstream.requests[1] == upstream.requests[2]


async def test_a_request_whose_resend_fails_too_is_a_502():
    async def serve(conn: ScriptedConnection) -> None:
        if conn.index == 1:
            await conn.request()
            await conn.send(answer(200, b"answered"))
        await conn.request()
        conn.close()

    async with ScriptedUpstream(serve) as upstream, lean_transport() as transport:
        await fetch(transport, upstream.url)
        with pytest.raises(GatewayError) as error:
            await fetch(transport, upstream.url)
    assert error.value.status == 502
    assert error.value.message.endswith("closed the connection before answering")
    assert upstream.connections == 2 and len(upstream.requests) == 3


async def test_a_request_cut_after_part_of_its_answer_is_not_resent():
    async def serve(conn: ScriptedConnection) -> None:
        await conn.request()
        await conn.send(b"HTTP/1.1 200 OK\r\ncontent-")
        conn.close()

    async with ScriptedUpstream(serve) as upstream, lean_transport() as transport:
        with pytest.raises(GatewayError) as error:
            await fetch(transport, upstream.url)
    assert error.value.status == 502
    assert "in the middle of its answer's head" in error.value.message
    assert upstream.connections == 1


async def test_a_json_answer_slower_than_the_read_timeout_in_all_is_a_504():
    async def serve(conn: ScriptedConnection) -> None:
        await conn.request()
        await conn.send(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n")
        for _ in range(100):  # never silent for long, but the whole answer takes longer than the read timeout
            await conn.send(b"x")
            await asyncio.sleep(0.02)

    error = await refusal(serve, upstream_read_timeout_ms=300)
    assert error.status == 504
    assert error.message == "timed out reading from upstream 127.0.0.1"


async def test_a_stream_read_slower_than_it_arrives_is_not_cut_by_the_read_timeout():
    """The upstream sends a large stream at once and stays connected; the reader takes its time (the socket is
    not read meanwhile): that is the reader's pace, not the upstream falling silent."""
    body = bytes(range(256)) * 8192  # 2 MiB

    async def serve(conn: ScriptedConnection) -> None:
        await conn.request()
        await conn.send(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(body) + body)
        await conn.closed_by_client()

    async with ScriptedUpstream(serve) as upstream, lean_transport(upstream_read_timeout_ms=300) as transport:
        resp = await transport.open(UpstreamRequest(upstream.url, {}, b"{}"), stream=True)
        received = [await resp.read_some()]
        await asyncio.sleep(0.8)  # a slow client downstream
        async for piece in resp.chunks():
            received.append(piece)
        resp.release()
    assert b"".join(received) == body


@pytest.mark.parametrize(("raw", "value", "body"), [
    (b"HTTP/1.1 200 OK\r\nx-a: one\r\n two\r\ncontent-length: 2\r\n\r\nok", "one two", b"ok"),
    (b"HTTP/1.1 200 OK\ncontent-length: 2\nx-a: v\n\nok", "v", b"ok"),
    (b"HTTP/1.1 200 OK\r\nx-a:   v \t \r\ncontent-length: 2\r\n\r\nok", "v", b"ok"),
    (b"HTTP/1.1 200 OK\r\nx-a: a\x01b\x7f\r\ncontent-length: 2\r\n\r\nok", "a\x01b\x7f", b"ok"),
    (b"HTTP/1.1 200 OK\r\nx-a: v\r\ntransfer-encoding: chunked\r\n\r\n2  \r\nok\r\n0\r\n\r\n", "v", b"ok"),
    (b"HTTP/1.1 200 OK\r\nx-a: v\r\ntransfer-encoding: chunked, gzip\r\n\r\nuntil close", "v", b"until close"),
], ids=["obs-fold", "bare-lf", "trailing-whitespace", "control-octets", "spaces-after-chunk-size",
        "chunked-not-last"])
async def test_heads_aiohttp_reads_leniently_read_the_same(raw, value, body):
    """As aiohttp's response parser (its llhttp build outside debug mode): lenient about folded and bare-LF heads,
    octets in values, spaces after a chunk size; a value's trailing whitespace is not part of it; a body whose last
    coding is not chunked ends when the upstream closes."""

    async def serve(conn: ScriptedConnection) -> None:
        await conn.request()
        await conn.send(raw)
        conn.close()

    async with ScriptedUpstream(serve) as upstream, lean_transport() as transport:
        status, headers, got = await fetch(transport, upstream.url)
    assert (status, headers["x-a"], got) == (200, value, body)


async def test_a_nul_in_an_answers_header_value_is_a_502():
    async def serve(conn: ScriptedConnection) -> None:
        await conn.request()
        await conn.send(b"HTTP/1.1 200 OK\r\nx-a: a\x00b\r\ncontent-length: 2\r\n\r\nok")
        await conn.closed_by_client()

    error = await refusal(serve)
    assert error.status == 502 and "not valid HTTP" in error.message


@pytest.mark.parametrize("endless", [b"x-trailer: " + b"v" * 8192, b"1;" + b"e" * 8192], ids=["trailer", "extension"])
async def test_endless_trailers_or_chunk_framing_are_cut_at_64_KiB(endless):
    async def serve(conn: ScriptedConnection) -> None:
        await conn.request()
        await conn.send(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n"
                        + (b"0\r\n" if endless.startswith(b"x-") else b"") + endless[:10])
        for _ in range(100):  # 800 KiB of one field or extension, never ending
            await conn.send(endless[10:])
            await asyncio.sleep(0.002)

    error = await refusal(serve)
    assert error.status == 502
    assert "more than 65536 bytes of chunk framing or trailer fields" in error.message
