"""The ASGI edge of a served WebSocket: refusals with and without the HTTP-response extension, frames, closes."""

from __future__ import annotations

from gateway.http.errors import Unauthorized
from gateway.http.websocket import ClientSocket, bounded_reason, sendable


class Peer:
    def __init__(self, incoming: list[dict]) -> None:
        self.incoming = incoming
        self.sent: list[dict] = []

    async def receive(self) -> dict:
        return self.incoming.pop(0)

    async def send(self, message: dict) -> None:
        self.sent.append(message)


async def test_a_refusal_is_the_json_error_when_the_server_answers_http_else_a_close_before_accept():
    peer = Peer([{"type": "websocket.connect"}])
    socket = ClientSocket({"extensions": {"websocket.http.response": {}}}, peer.receive, peer.send)
    assert await socket.wait_connect()
    await socket.refuse(Unauthorized("no key", param="x-gateway-api-key"))
    start, body = peer.sent
    assert start["type"] == "websocket.http.response.start" and start["status"] == 401
    assert b'"param":"x-gateway-api-key"' in body["body"]
    bare = Peer([])
    await ClientSocket({}, bare.receive, bare.send).refuse(Unauthorized("no key"))
    assert bare.sent == [{"type": "websocket.close", "code": 1008, "reason": "no key"}]


async def test_frames_in_and_the_client_leaving():
    peer = Peer([{"type": "websocket.receive", "text": "t"}, {"type": "websocket.receive", "bytes": b"b"},
                 {"type": "websocket.disconnect", "code": 1001}])
    socket = ClientSocket({"subprotocols": ["realtime"]}, peer.receive, peer.send)
    await socket.accept("realtime")
    assert peer.sent == [{"type": "websocket.accept", "subprotocol": "realtime"}]
    assert [await socket.receive() for _ in range(3)] == ["t", b"b", 1001]
    assert socket.closed and socket.close_code == 1001
    await socket.close(1000)  # already gone: nothing sent
    assert len(peer.sent) == 1


async def test_close_codes_and_reasons_are_what_a_close_frame_may_carry():
    assert sendable(1006) == sendable(1005) == sendable(999) == 1000
    assert sendable(4001) == 4001 and sendable(1011) == 1011
    assert bounded_reason("é" * 100).encode() == ("é" * 61).encode()
    peer = Peer([])
    await ClientSocket({}, peer.receive, peer.send).close(1006, "x" * 200)
    assert peer.sent == [{"type": "websocket.close", "code": 1000, "reason": "x" * 123}]


async def test_a_client_gone_before_the_answer_makes_accept_raise_and_a_refusal_quiet():
    async def gone(message: dict) -> None:
        raise OSError("connection reset")

    async def never() -> dict:
        raise AssertionError("not read")

    socket = ClientSocket({"extensions": {"websocket.http.response": {}}}, never, gone)
    await socket.refuse(Unauthorized("no key"))  # nothing raised: there is no one to answer
    socket = ClientSocket({}, never, gone)
    try:
        await socket.accept("realtime")
    except ConnectionError:
        pass
    else:
        raise AssertionError("accept should raise ConnectionError")
    assert socket.closed and not socket.accepted
