"""A translated Responses WebSocket session's own rules with a stand-in client socket and a stand-in door (whose turns
wait until the test lets them end): lanes first-in first-out and independent, the bounds on lanes and waiting turns,
a client that leaves mid-turn leaving no turn running, the headers a turn carries, and what a store: false response
leaves for the next turn of its socket, and a response prepared without output."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from gateway.http.websocket import ClientSocket
from gateway.realtime.relay import Traffic
from gateway.realtime.translate import MAX_LANES, MAX_WAITING, TranslatedSession, turn_headers
from gateway.realtime.usage import RESPONSES_ENDS, SessionUsage
from tests.realtime.test_relay import Client


def create(text: str, **more: Any) -> dict:
    return {"type": "websocket.receive", "text": json.dumps({"type": "response.create", "model": "m", "input": text,
                                                             **more})}


class Door:
    """The Responses door as a session calls it: each turn streams ``response.created``, then waits for its gate
    (or for its client to leave), then ``response.completed``."""

    def __init__(self) -> None:
        self.started: list[dict] = []
        self.gates: dict[str, asyncio.Event] = {}
        self.left: list[str] = []

    def gate(self, name: str) -> asyncio.Event:
        return self.gates.setdefault(name, asyncio.Event())

    async def stream(self, method: str, path: str, headers: list, body: bytes, key: Any, sink: Any,
                     left: asyncio.Future) -> None:
        doc = json.loads(body)
        name = doc["input"] if isinstance(doc["input"], str) else doc["input"][-1]["content"]
        self.started.append(doc)
        await sink.start(200, [(b"content-type", b"text/event-stream")])
        await sink.body(_event("response.created", {"response": {"id": f"resp_{name}"}}))
        waiter = asyncio.ensure_future(self.gate(name).wait())
        await asyncio.wait([waiter, left], return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if left.done():
            self.left.append(name)
            return
        output = [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": f"re {name}"}]}]
        await sink.body(_event("response.completed", {"response": {"id": f"resp_{name}", "output": output,
                                                                   "previous_response_id": None}}))

    def names(self) -> list[str]:
        return [d["input"] if isinstance(d["input"], str) else d["input"][-1]["content"] for d in self.started]


def _event(kind: str, doc: dict) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **doc}, separators=(',', ':'))}\n\n".encode()


def session(client: Client, door: Door) -> TranslatedSession:
    socket = ClientSocket({}, client.receive, client.send)
    socket.accepted = True
    return TranslatedSession(socket, door, None, [], 1024 * 1024, 30.0, asyncio.Event(),  # type: ignore[arg-type]
                             SessionUsage(RESPONSES_ENDS), Traffic())


def sent(client: Client) -> list[dict]:
    return [json.loads(m["text"]) for m in client.sent if m["type"] == "websocket.send"]


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_a_lane_runs_its_turns_in_order_and_lanes_run_side_by_side():
    client = Client([create("a1", stream_id="a"), create("a2", stream_id="a"), create("b1", stream_id="b")])
    door = Door()
    run = asyncio.ensure_future(session(client, door).run())
    await settle()
    assert door.names() == ["a1", "b1"]  # a2 waits for a1; b1 does not
    door.gate("b1").set()
    await settle()
    assert door.names() == ["a1", "b1"]
    door.gate("a1").set()
    await settle()
    assert door.names() == ["a1", "b1", "a2"]
    door.gate("a2").set()
    await settle()
    events = sent(client)
    assert [(e["type"], e["stream_id"]) for e in events if e["stream_id"] == "a"] == [
        ("response.created", "a"), ("response.completed", "a"), ("response.created", "a"), ("response.completed", "a")]
    assert all(doc["stream"] is True and "stream_id" not in doc and "type" not in doc for doc in door.started)
    client.incoming.put_nowait({"type": "websocket.disconnect", "code": 1000})
    assert (await run).by == "client"


async def test_turns_over_the_bounds_are_refused_with_an_error_event():
    lanes = [create(f"l{i}", stream_id=f"l{i}") for i in range(MAX_LANES + 1)]
    client, door = Client(lanes), Door()
    run = asyncio.ensure_future(session(client, door).run())
    await settle()
    [refused] = [e for e in sent(client) if e["type"] == "error"]
    assert (refused["status"], refused["error"]["code"], refused["stream_id"]) == (429, "too_many_requests",
                                                                                    f"l{MAX_LANES}")
    assert len(door.started) == MAX_LANES
    for i in range(MAX_WAITING):  # one lane's queue fills the rest
        client.incoming.put_nowait(create(f"q{i}", stream_id="l0"))
    await settle()
    errors = [e for e in sent(client) if e["type"] == "error"]
    assert len(errors) == 1 + MAX_LANES  # MAX_WAITING - MAX_LANES queued, the rest refused
    client.incoming.put_nowait({"type": "websocket.disconnect", "code": 1000})
    await run


async def test_a_client_that_leaves_mid_turn_leaves_no_turn_running():
    client, door = Client([create("one"), create("two")]), Door()
    translated = session(client, door)
    run = asyncio.ensure_future(translated.run())
    await settle()
    client.incoming.put_nowait({"type": "websocket.disconnect", "code": 1001})
    ending = await run
    assert (ending.code, ending.by) == (1001, "client")
    assert door.left == ["one"] and door.names() == ["one"]  # the running turn saw its client leave; two never ran
    assert translated.left.done() and not [lane for lane in translated.lanes.values() if not lane.task.done()]


async def test_a_store_false_response_is_continued_from_the_sockets_memory():
    client, door = Client([create("first", store=False), create("second", previous_response_id="resp_first")]), Door()
    door.gate("first").set()
    door.gate("second").set()
    run = asyncio.ensure_future(session(client, door).run())
    await settle()
    second = door.started[1]
    assert "previous_response_id" not in second
    assert second["input"] == [{"role": "user", "content": "first"},
                               {"role": "assistant", "content": [{"type": "output_text", "text": "re first"}]},
                               {"role": "user", "content": "second"}]
    completed = [e for e in sent(client) if e["type"] == "response.completed"][-1]
    assert completed["response"]["previous_response_id"] == "resp_first"  # as the client asked
    client.incoming.put_nowait({"type": "websocket.disconnect", "code": 1000})
    await run


def test_a_turn_runs_as_the_session_with_the_provider_key_kept_only_beside_the_gateway_key():
    upgrade = [(b"host", b"gw"), (b"sec-websocket-key", b"k"), (b"authorization", b"Bearer gw-key"),
               (b"x-gateway-provider", b"@slug"), (b"x-gateway-trace-id", b"client-trace")]
    headers = dict(turn_headers(upgrade, "t-1", "s-1"))
    assert headers == {b"x-gateway-provider": b"@slug", b"content-type": b"application/json",
                       b"accept": b"text/event-stream", b"x-gateway-trace-id": b"t-1",
                       b"x-gateway-parent-span-id": b"s-1"}
    beside = dict(turn_headers([(b"x-gateway-api-key", b"gw-key"), (b"authorization", b"Bearer sk-ant"),
                                (b"x-gateway-provider", b"anthropic")], "t", None))
    assert (beside[b"x-gateway-api-key"], beside[b"authorization"]) == (b"gw-key", b"Bearer sk-ant")


async def test_a_prepared_response_is_answered_by_the_gateway_and_its_input_sent_with_the_next_turn():
    client = Client([create("tools and context", generate=False, stream_id="w"),
                     create("go", previous_response_id="resp_stored", store=False),
                     create("on", previous_response_id="resp_go")])
    door = Door()
    door.gate("go").set()
    door.gate("on").set()
    run = asyncio.ensure_future(session(client, door).run())
    await settle()
    prepared = [e for e in sent(client) if e.get("stream_id") == "w"]
    assert [(e["type"], e["response"]["output"]) for e in prepared] == [("response.created", []),
                                                                         ("response.completed", [])]
    assert prepared[-1]["response"]["usage"]["total_tokens"] == 0
    assert door.names() == ["go", "on"]  # the prepared response sent nothing to the door
    # a store: false turn continuing a stored response is remembered relative to it: the next turn continues the
    # stored one with the remembered items before its own
    go, on = door.started
    assert (go["previous_response_id"], go["input"]) == ("resp_stored", "go")  # the door continues the stored one
    assert on["previous_response_id"] == "resp_stored"
    assert on["input"] == [{"role": "user", "content": "go"},
                           {"role": "assistant", "content": [{"type": "output_text", "text": "re go"}]},
                           {"role": "user", "content": "on"}]
    completed = [e for e in sent(client) if e["type"] == "response.completed"][-1]
    assert completed["response"]["id"] == "resp_on"
    client.incoming.put_nowait({"type": "websocket.disconnect", "code": 1000})
    await run


async def test_a_prepared_response_is_continued_with_its_input():
    client = Client([create("context", generate=False)])
    door = Door()
    translated = session(client, door)
    run = asyncio.ensure_future(translated.run())
    await settle()
    prepared_id = sent(client)[-1]["response"]["id"]
    door.gate("next").set()
    client.incoming.put_nowait(create("next", previous_response_id=prepared_id))
    await settle()
    [turn] = door.started
    assert "previous_response_id" not in turn
    assert turn["input"] == [{"role": "user", "content": "context"}, {"role": "user", "content": "next"}]
    assert [e["response"]["previous_response_id"] for e in sent(client) if e["type"] == "response.completed"][-1] \
        == prepared_id
    client.incoming.put_nowait({"type": "websocket.disconnect", "code": 1000})
    await run
