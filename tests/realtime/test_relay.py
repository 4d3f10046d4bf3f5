"""The relay's own rules with stand-in sockets: backpressure each way (a slow reader stops the other side being read
while the gateway holds one of its messages), order, the close codes each way, the size limit and the idle timeout,
and no task left once a session ended."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from gateway.http.websocket import ClientSocket
from gateway.realtime.relay import LOST, Relay, Traffic
from gateway.realtime.usage import SessionUsage


class Client:
    """The ASGI side: ``incoming`` messages to receive (then it waits), a gate its sends wait on, ``fail_at``: the
    send (counted from 1) that raises as for a client gone."""

    def __init__(self, incoming: list[dict] | None = None, fail_at: int = 0) -> None:
        self.incoming: asyncio.Queue[dict] = asyncio.Queue()
        for message in incoming or []:
            self.incoming.put_nowait(message)
        self.sent: list[dict] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.sends = 0
        self.fail_at = fail_at

    async def receive(self) -> dict:
        return await self.incoming.get()

    async def send(self, message: dict) -> None:
        self.sends += 1
        if self.sends == self.fail_at:
            raise OSError("connection reset")
        await self.gate.wait()
        self.sent.append(message)


class Upstream:
    """aiohttp's client WebSocket as the relay uses it: ``frames`` to hand out, then ``end`` (a message)."""

    def __init__(self, frames: list, end: aiohttp.WSMessage | None = None) -> None:
        self.frames = list(frames)
        self.end = end
        self.read = 0
        self.got: list = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.closed = False
        self.close_code: int | None = None

    async def receive(self) -> aiohttp.WSMessage:
        if self.frames:
            self.read += 1
            frame = self.frames.pop(0)
            kind = aiohttp.WSMsgType.TEXT if isinstance(frame, str) else aiohttp.WSMsgType.BINARY
            return aiohttp.WSMessage(kind, frame, None)
        if self.end is not None:
            return self.end
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    async def send_str(self, data: str) -> None:
        await self.gate.wait()
        self.got.append(data)

    async def send_bytes(self, data: bytes) -> None:
        await self.gate.wait()
        self.got.append(data)

    async def close(self, code: int = 1000) -> None:
        self.closed, self.close_code = True, code


def relay(client: Client, upstream: Upstream, max_bytes: int = 1024, idle_s: float = 30.0,
          traffic: Traffic | None = None) -> Relay:
    socket = ClientSocket({}, client.receive, client.send)
    socket.accepted = True
    return Relay(socket, upstream, max_bytes, idle_s, asyncio.Event(), SessionUsage(),  # type: ignore[arg-type]
                 traffic or Traffic())


async def settle() -> None:
    """Let every task run until it waits on something only the test changes (the stand-ins do no I/O)."""
    for _ in range(50):
        await asyncio.sleep(0)


async def test_a_client_that_does_not_read_stops_the_provider_being_read():
    before = asyncio.all_tasks()
    client = Client()
    client.gate.clear()  # the client reads nothing
    upstream = Upstream([f"event {i}" for i in range(100)])
    task = asyncio.ensure_future(relay(client, upstream).run())
    await settle()
    assert upstream.read == 1 and client.sent == []  # one message in flight, nothing more taken from the provider
    client.gate.set()
    for _ in range(100):
        await settle()
        if len(client.sent) == 100:
            break
    assert [m["text"] for m in client.sent] == [f"event {i}" for i in range(100)]  # all of them, in order
    client.incoming.put_nowait({"type": "websocket.disconnect", "code": 1000})
    ending = await task
    assert (ending.code, ending.by) == (1000, "client") and upstream.close_code == 1000
    assert asyncio.all_tasks() == before


async def test_a_provider_that_does_not_read_stops_the_client_being_read_and_an_oversized_message_ends_last():
    client = Client([{"type": "websocket.receive", "text": f"event {i}"} for i in range(5)]
                    + [{"type": "websocket.receive", "text": "x" * 1025}])
    upstream = Upstream([])
    upstream.gate.clear()  # the provider takes nothing
    task = asyncio.ensure_future(relay(client, upstream).run())
    await settle()
    assert client.incoming.qsize() == 5 and upstream.got == []  # one taken from the client, not passed on yet
    upstream.gate.set()
    ending = await task
    assert upstream.got == [f"event {i}" for i in range(5)]  # every message before the oversized one, in order
    assert (ending.code, ending.by) == (1009, "gateway") and client.sent[-1]["code"] == 1009


async def test_a_failed_write_ends_the_session_as_the_clients_leaving_and_nothing_after_it_is_read():
    before = asyncio.all_tasks()
    client = Client(fail_at=2)  # the client is gone by the second message
    upstream = Upstream([f"event {i}" for i in range(10)])
    traffic = Traffic()
    ending = await relay(client, upstream, traffic=traffic).run()
    assert (ending.code, ending.by) == (1006, "client") and upstream.closed
    assert [m["text"] for m in client.sent] == ["event 0"]
    assert upstream.read == 2 and traffic.messages_out == 2  # the one written and the one whose write failed
    assert asyncio.all_tasks() == before


async def test_frames_keep_their_kind_and_order_both_ways():
    client = Client([{"type": "websocket.receive", "text": "a"}, {"type": "websocket.receive", "bytes": b"b"},
                     {"type": "websocket.disconnect", "code": 4000}])
    upstream = Upstream(["x", b"y"])
    ending = await relay(client, upstream).run()
    assert upstream.got == ["a", b"b"]
    assert [m.get("text", m.get("bytes")) for m in client.sent if m["type"] == "websocket.send"] == ["x", b"y"]
    assert ending.code == 4000 and upstream.close_code == 4000  # the client's code goes to the provider


@pytest.mark.parametrize(("end", "code", "reason"), [
    (aiohttp.WSMessage(aiohttp.WSMsgType.CLOSE, 4001, "bye"), 4001, "bye"),
    (aiohttp.WSMessage(aiohttp.WSMsgType.CLOSE, 1005, ""), 1000, ""),
    (aiohttp.WSMessage(aiohttp.WSMsgType.CLOSED, None, None), 1011, LOST),
    (aiohttp.WSMessage(aiohttp.WSMsgType.ERROR, ConnectionResetError(), None), 1011, LOST),
    (aiohttp.WSMessage(aiohttp.WSMsgType.ERROR, aiohttp.WebSocketError(1009, "too big"), None), 1009,
     "message larger than 1024 bytes"),
])
async def test_how_the_provider_ends_is_how_the_client_is_closed(end, code, reason):
    client = Client()
    ending = await relay(client, Upstream(["hello"], end)).run()
    assert (ending.code, ending.reason) == (code, reason)
    # the message read before the ending is written first
    assert client.sent == [{"type": "websocket.send", "text": "hello"},
                           {"type": "websocket.close", "code": code, "reason": reason}]


async def test_an_oversized_client_message_and_an_idle_session_are_closed():
    client = Client([{"type": "websocket.receive", "text": "x" * 1025}])
    upstream = Upstream([])
    ending = await relay(client, upstream).run()
    assert (ending.code, ending.by) == (1009, "gateway") and upstream.got == [] and upstream.closed
    client = Client()
    ending = await relay(client, Upstream([]), idle_s=0.1).run()
    assert (ending.code, ending.reason) == (1001, "idle timeout")
