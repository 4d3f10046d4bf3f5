"""The upstream client through the real gateway: a stale pooled connection is retried once on a new one,
failures read as what happened (a read timeout says read; no library class names), and an answer read whole is
bounded as it is read, decompressed (a gzip bomb is a 502, its connection dropped, the worker never inflates it)."""

from __future__ import annotations

import asyncio
import re
import socket
import zlib
from typing import Self

import msgspec
import pytest

from gateway.upstream.client import os_reason
from tests.support.headers import headers_for
from tests.support.hostile import HostileUpstream, gzip_bomb, response
from tests.support.http import post, stream_events
from tests.support.inprocess import start_in_process
from tests.support.poll import wait_for
from tests.support.processes import peak_rss_kb
from tests.support.proxy import ForwardProxy
from tests.support.servers import start_gateway

CHAT = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}
CLASS_NAME = re.compile(r"\b[A-Z][a-z]+(?:[A-Z][a-z]+)+(?:Error|Exception)\b")  # ClientPayloadError & co
ANSWER = msgspec.json.encode({
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-test",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})


class RawUpstream:
    """An HTTP/1.1 upstream written by hand on a loopback port (``_handle`` serves each connection)."""

    port = 0

    async def start(self) -> Self:
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self.server = server
        return self

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError


class KeepAliveUpstream(RawUpstream):
    """Answers ``answered`` requests per connection with keep-alive, then reads the next one and closes the
    connection without a word: what a pooled connection looks like when the upstream dropped it meanwhile."""

    def __init__(self, answered: int) -> None:
        self.answered = answered
        self.connections = 0
        self.requests = 0

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        served = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(re.search(rb"(?i)content-length:\s*(\d+)", head).group(1))
                await reader.readexactly(length)
                self.requests += 1
                if served >= self.answered:
                    break
                served += 1
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
                             % len(ANSWER) + ANSWER)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()


@pytest.fixture(scope="module")
def loop_thread():
    thread = ForwardProxy().start()  # only for its event loop thread
    yield thread
    thread.stop()


def test_a_pooled_connection_the_upstream_dropped_is_retried_once_on_a_new_one(gateway, loop_thread):
    upstream = loop_thread.run(KeepAliveUpstream(answered=1).start())
    host = f"http://127.0.0.1:{upstream.port}/v1"
    for _ in range(4):  # every second request meets the pooled connection the upstream has dropped
        resp = post(f"{gateway.url}/v1/chat/completions", CHAT, headers_for(host))
        assert resp.status == 200, resp.text
        assert resp.headers["x-gateway-retry-attempt-count"] == "0"  # not a configured retry
    # new A answers; A again is dropped -> fresh B answers; new C answers; C again is dropped -> fresh D answers
    assert (upstream.requests, upstream.connections) == (6, 4)
    loop_thread.run(_close(upstream))


def test_the_fresh_connection_is_tried_once_only(gateway, loop_thread):
    upstream = loop_thread.run(KeepAliveUpstream(answered=0).start())
    resp = post(f"{gateway.url}/v1/chat/completions", CHAT, headers_for(f"http://127.0.0.1:{upstream.port}/v1"))
    assert resp.status == 502
    message = resp.json()["error"]["message"]
    assert "closed the connection before answering" in message and not CLASS_NAME.search(message)
    assert upstream.requests == 2
    loop_thread.run(_close(upstream))


async def _close(upstream: RawUpstream) -> None:
    upstream.server.close()


@pytest.fixture(scope="module")
def impatient_gateway(mock_server):
    server = start_in_process({"GATEWAY_UPSTREAM_READ_TIMEOUT_MS": "400"})
    yield server
    server.stop()


def test_a_read_timeout_says_read_not_connect(impatient_gateway, mock):
    resp = post(f"{impatient_gateway.url}/v1/chat/completions", CHAT,
                headers_for(mock.scenario([{"delay_ms": 1500}]) + "/v1"))
    assert resp.status == 504
    message = resp.json()["error"]["message"]
    assert "read timeout" in message and "connect" not in message


def test_a_stream_that_goes_silent_ends_with_a_read_timeout(impatient_gateway, mock):
    base = mock.scenario([{"chunks": 4, "chunk_delay_ms": 1500}])
    status, _, events = stream_events(f"{impatient_gateway.url}/v1/chat/completions", {**CHAT, "stream": True},
                                      headers_for(base + "/v1"))
    assert status == 200
    received = list(events)
    error = msgspec.json.decode(received[-2])["error"]
    assert received[-1] == b"[DONE]"
    assert "read timeout" in error["message"] and "connect" not in error["message"]


def test_a_stream_cut_midway_is_described_in_words(gateway, mock):
    base = mock.scenario([{"stream_error": "cut"}])
    status, _, events = stream_events(f"{gateway.url}/v1/chat/completions", {**CHAT, "stream": True},
                                      headers_for(base + "/v1"))
    assert status == 200
    received = list(events)
    assert received[-1] == b"[DONE]"
    error = msgspec.json.decode(received[-2])["error"]
    assert "broke off" in error["message"] and not CLASS_NAME.search(error["message"]), error["message"]


@pytest.mark.parametrize(("error", "words"), [
    (ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 19799)"), "connection refused"),
    (OSError("Multiple exceptions: [Errno 111] Connect call failed ('::1', 19799, 0, 0), "
             "[Errno 111] Connect call failed ('127.0.0.1', 19799)"), "connection refused"),
    (OSError("Connect call failed ('127.0.0.1', 19799)"), "connect call failed"),
    (socket.gaierror(-2, "Name or service not known"), "name or service not known"),
])
def test_os_errors_read_in_words_without_address_tuples(error, words):
    assert os_reason(error) == words


def test_a_stream_whose_reads_come_sooner_than_the_read_timeout_is_never_cut(impatient_gateway, mock):
    """The read timeout (400 ms here) bounds each silence, not the stream: six chunks 250 ms apart (1.5 s in all)
    arrive whole."""
    base = mock.scenario([{"chunks": 6, "chunk_delay_ms": 250}])
    status, _, events = stream_events(f"{impatient_gateway.url}/v1/chat/completions", {**CHAT, "stream": True},
                                      headers_for(base + "/v1"))
    assert status == 200
    received = list(events)
    assert received[-1] == b"[DONE]"
    assert not any(b'"error"' in event for event in received)
    assert sum(b'"content"' in event for event in received) >= 6


class CookieSettingUpstream(RawUpstream):
    """A vendorA-compatible upstream that sets a cookie on every answer (as providers behind a CDN do: a bot-management
    cookie) and keeps the ``cookie`` header each request brought."""

    def __init__(self) -> None:
        self.cookies: list[str | None] = []

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(re.search(rb"(?i)content-length:\s*(\d+)", head).group(1))
                await reader.readexactly(length)
                cookie = re.search(rb"(?im)^cookie:\s*(.*?)\r$", head)
                self.cookies.append(cookie.group(1).decode() if cookie else None)
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                             b"set-cookie: __cf_bm=caller-%d; path=/; HttpOnly\r\ncontent-length: %d\r\n\r\n"
                             % (len(self.cookies), len(ANSWER)) + ANSWER)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()


def test_a_cookie_one_answer_sets_never_reaches_another_callers_request(gateway, loop_thread):
    upstream = loop_thread.run(CookieSettingUpstream().start())
    try:
        for token in ("sk-first-caller", "sk-second-caller", "sk-first-caller"):
            resp = post(f"{gateway.url}/v1/chat/completions", CHAT,
                        headers_for(f"http://localhost:{upstream.port}/v1", token=token))
            assert resp.status == 200, resp.text
            assert "set-cookie" not in resp.headers  # an upstream's cookies are not the caller's either
        assert upstream.cookies == [None, None, None]
    finally:
        loop_thread.run(_close(upstream))


def test_the_installed_aiohttp_has_the_hooks_the_read_deadline_replaces():
    """The read deadline overrides private hooks of aiohttp's response protocol; an aiohttp without them would
    silently fall back to its per-read timer (correct, slower under many streams): this says so at once."""
    from aiohttp.client_proto import ResponseHandler

    from gateway.settings import Settings
    from gateway.upstream.client import DEADLINE_HOOKS, UpstreamClient, _DeadlineReadTimeout

    assert [name for name in DEADLINE_HOOKS if not hasattr(ResponseHandler, name)] == []

    async def protocol_class() -> type:
        connector = UpstreamClient(Settings())._connector()
        try:
            return type(connector._factory())
        finally:
            await connector.close()

    assert asyncio.run(protocol_class()) is _DeadlineReadTimeout


# --- answers read whole are bounded (GATEWAY_MAX_UPSTREAM_BODY_BYTES) -----------------------------------------

LIMIT = 1024 * 1024  # the bounded gateway's GATEWAY_MAX_UPSTREAM_BODY_BYTES


def test_the_gzip_bomb_is_what_it_claims():
    bomb = gzip_bomb(64 << 20)
    assert len(bomb) < 100_000 and len(zlib.decompress(bomb, 31)) == 64 << 20


@pytest.fixture(scope="module")
def bounded_gateway(mock_server):
    server = start_gateway({"GATEWAY_MAX_UPSTREAM_BODY_BYTES": str(LIMIT)})
    yield server
    server.stop()


def _refused(resp) -> None:
    assert resp.status == 502, resp.text
    error = resp.json()["error"]
    assert error["code"] == "upstream_answer_too_large"
    assert str(LIMIT) in error["message"] and "GATEWAY_MAX_UPSTREAM_BODY_BYTES" in error["message"]


def test_a_gzip_bomb_is_a_502_naming_the_limit_and_the_worker_never_inflates_it(bounded_gateway, mock):
    bomb = gzip_bomb()
    assert len(bomb) < 1_100_000
    answer = response(200, bomb, content_encoding="gzip")
    with HostileUpstream(lambda head, body: answer) as upstream:
        _refused(post(f"{bounded_gateway.url}/v1/chat/completions", CHAT, headers_for(upstream.url + "/v1")))
        wait_for(lambda: upstream.dropped == 1)  # the connection was closed, not pooled
    # the worker never held the GiB (nor a good part of it), and it still serves
    assert peak_rss_kb(bounded_gateway.proc.pid) < 400 * 1024
    ok = post(f"{bounded_gateway.url}/v1/chat/completions", CHAT, headers_for(mock.scenario() + "/v1"))
    assert ok.status == 200, ok.text


@pytest.mark.parametrize("status", [200, 500])
def test_an_answer_or_error_body_over_the_limit_is_a_502_and_its_connection_is_dropped(bounded_gateway, status):
    huge = response(status, b'{"error": {"message": "' + b"x" * (2 * LIMIT) + b'"}}')
    with HostileUpstream(lambda head, body: huge) as upstream:
        for _ in range(2):
            _refused(post(f"{bounded_gateway.url}/v1/chat/completions", CHAT, headers_for(upstream.url + "/v1")))
        wait_for(lambda: upstream.dropped == 2)
        assert (upstream.requests, upstream.connections) == (2, 2)  # never back in the pool


def test_an_answer_just_under_the_limit_is_read_whole_compressed_or_not(bounded_gateway):
    content = "y" * (LIMIT - len(ANSWER) - 64)
    doc = msgspec.json.decode(ANSWER)
    doc["choices"][0]["message"]["content"] = content
    plain = msgspec.json.encode(doc)
    assert len(plain) < LIMIT
    for answer in (response(200, plain), response(200, zlib.compress(plain, wbits=31), content_encoding="gzip")):
        with HostileUpstream(lambda head, body, answer=answer: answer) as upstream:
            resp = post(f"{bounded_gateway.url}/v1/chat/completions", CHAT, headers_for(upstream.url + "/v1"))
            assert resp.status == 200, resp.text[:300]
            assert resp.json()["choices"][0]["message"]["content"] == content
            assert upstream.dropped == 0
