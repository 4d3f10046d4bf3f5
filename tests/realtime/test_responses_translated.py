"""The Responses API's WebSocket mode translated for providers that do not serve it: a served gateway runs each
``response.create`` through its own Responses door (to the mock's anthropic and cloudC), with the official openai
SDK's ``responses.connect()`` and raw ``websockets``: turns on one socket, ``previous_response_id`` across turns, lanes
first-in first-out, errors as the mode's ``error`` event with the session still usable, a client that vanishes
mid-turn, the records (one per turn plus the session's) and a budget charged once."""

from __future__ import annotations

import asyncio
import json
import re

import msgspec
import pytest
import websockets
from openai import AsyncOpenAI

from gateway_mock.cloudC import TEST_TOKEN
from gateway_mock.kit import DEFAULT_REPLY
from tests.realtime.test_realtime_e2e import trace, ws_url
from tests.support.http import request
from tests.support.policies import USAGE, get, tag, usage_limit
from tests.support.poll import await_for, wait_for, wait_logs
from tests.support.servers import ADMIN_KEY, start_gateway
from tests.support.socket_events import raw_turn, turn

SESSION = "responses.websocket"
CLAUDE = "claude-3-5-sonnet-20240620"
GEMINI = "gemini-2.0-flash"


def anthropic_config(base: str) -> str:
    return msgspec.json.encode({"provider": "anthropic", "api_key": "sk-ant-test",
                                "custom_host": f"{base}/v1"}).decode()


def cloud_c_config(base: str) -> str:
    return msgspec.json.encode({"provider": "cloudC", "api_key": TEST_TOKEN, "custom_host": f"{base}/v1",
                                "cloudC_project_id": "proj-1", "cloudC_region": "us-central1"}).decode()


def headers(config: str, trace_id: str, **more: str) -> dict[str, str]:
    return {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": config, "x-gateway-trace-id": trace_id, **more}


def connect(gw, config: str, trace_id: str, **more: str):
    return websockets.connect(f"{ws_url(gw.url)}/v1/responses", additional_headers=headers(config, trace_id, **more))


def session_and_turns(gw, trace_id: str, turns: int, timeout: float = 5.0) -> tuple[dict, list[dict]]:
    """The session's record and its turns' records (oldest first), all under the session's trace id."""
    items = wait_logs(gw, trace_id, count=turns + 1, timeout=timeout)
    [session] = [i for i in items if i["endpoint"] == SESSION]
    return session, sorted((i for i in items if i["endpoint"] != SESSION), key=lambda i: i["timestamp"])


def upstream_messages(mock, base: str) -> list[list[dict]]:
    """The messages of every request the mock's anthropic received under ``base``, in order."""
    out = []
    for call in mock.calls(base)["requests"]:
        body = call["body"]
        out.append((msgspec.json.decode(body) if isinstance(body, (str, bytes)) else body)["messages"])
    return out


def text_of(events: list) -> str:
    return "".join(e.delta for e in events if e.type == "response.output_text.delta")


async def test_the_sdk_chains_three_turns_to_anthropic_on_one_socket(gw, mock):
    base = mock.scenario()
    trace_id = trace()
    client = AsyncOpenAI(base_url=f"{gw.url}/v1", api_key=ADMIN_KEY, max_retries=0,
                         default_headers={"x-gateway-config": anthropic_config(base), "x-gateway-trace-id": trace_id})
    async with client.responses.connect() as connection:
        first = await turn(connection, model=CLAUDE, input="my name is Ada", instructions="be brief")
        second = await turn(connection, model=CLAUDE, input="what is my name?",
                            previous_response_id=first[-1].response.id)
        third = await turn(connection, model=CLAUDE, input="and again",
                           previous_response_id=second[-1].response.id)
    for events in (first, second, third):  # the door's stream, event by event, in order
        kinds = [e.type for e in events]
        assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
        assert [e.sequence_number for e in events] == list(range(len(events)))
        assert text_of(events) == DEFAULT_REPLY and kinds.count("response.output_text.delta") > 1
        assert events[-1].response.output_text == DEFAULT_REPLY
    responses = [t[-1].response for t in (first, second, third)]
    assert len({r.id for r in responses}) == 3
    assert (responses[1].previous_response_id, responses[2].previous_response_id) == (responses[0].id,
                                                                                     responses[1].id)
    # turn 2 sent anthropic turn 1's exchange before its own input; turn 3 both earlier ones
    sent = upstream_messages(mock, base)
    assert len(sent) == 3
    assert "my name is Ada" in json.dumps(sent[0]) and DEFAULT_REPLY not in json.dumps(sent[0])
    assert "my name is Ada" in json.dumps(sent[1]) and DEFAULT_REPLY in json.dumps(sent[1])
    assert "what is my name?" in json.dumps(sent[2]) and json.dumps(sent[2]).count(DEFAULT_REPLY) == 2

    session, turns = session_and_turns(gw, trace_id, 3)
    assert (session["status"], session["provider"], session["model"]) == (101, "anthropic", responses[-1].model)
    meta = session["metadata"]
    assert meta["realtime_translated"] is True
    assert meta["realtime_response_ids"] == [r.id for r in responses]
    assert (meta["realtime_responses"], meta["realtime_closed_by"], meta["realtime_close_code"]) == (3, "client", 1000)
    assert (meta["realtime_messages_in"], meta["realtime_messages_out"]) == (3, len(first) + len(second) + len(third))
    assert meta["realtime_usage"]["total_tokens"] == sum(r.usage.total_tokens for r in responses)
    assert not session["total_tokens"]  # counted by the turns' records, not a second time here
    assert [(t["status"], t["provider"], t["total_tokens"]) for t in turns] == [
        (200, "anthropic", r.usage.total_tokens) for r in responses]
    assert ADMIN_KEY not in json.dumps(mock.calls(base)["requests"])


async def test_prepared_and_store_false_responses_chain_on_their_socket_only(gw, mock):
    """As the mode does (and Codex relies on), a response made with store: false, or prepared with generate: false,
    is continued on its own socket: the socket remembers its conversation; the door never stored it, so another
    socket cannot continue it."""
    base = mock.scenario()
    client = AsyncOpenAI(base_url=f"{gw.url}/v1", api_key=ADMIN_KEY, max_retries=0,
                         default_headers={"x-gateway-config": anthropic_config(base), "x-gateway-trace-id": trace()})
    async with client.responses.connect() as connection:
        warm = await turn(connection, model=CLAUDE, input="you talk to Ada", store=False, generate=False)
        assert [e.type for e in warm] == ["response.created", "response.completed"]  # no provider call
        assert warm[-1].response.output == [] and warm[-1].response.usage.total_tokens == 0
        first = (await turn(connection, model=CLAUDE, input="my name is Ada", store=False,
                            previous_response_id=warm[-1].response.id))[-1].response
        second = (await turn(connection, model=CLAUDE, input="what is my name?", store=False,
                             previous_response_id=first.id))[-1].response
        third = (await turn(connection, model=CLAUDE, input=[{"role": "user", "content": "once more"}],
                            previous_response_id=second.id))[-1].response
    assert (second.previous_response_id, third.previous_response_id) == (first.id, second.id)
    sent = [json.dumps(messages) for messages in upstream_messages(mock, base)]
    assert len(sent) == 3 and "you talk to Ada" in sent[0] and "you talk to Ada" in sent[2]
    assert "my name is Ada" in sent[1] and DEFAULT_REPLY in sent[1] and "what is my name?" in sent[1]
    assert "my name is Ada" in sent[2] and "what is my name?" in sent[2] and sent[2].count(DEFAULT_REPLY) == 2
    async with connect(gw, anthropic_config(base), trace()) as ws:
        [unknown] = await raw_turn(ws, {"type": "response.create", "model": CLAUDE, "input": "hi",
                                        "previous_response_id": second.id})
    assert (unknown["status"], unknown["error"]["param"]) == (404, "previous_response_id")


async def test_cloudC_with_a_lane_two_creates_back_to_back_answered_first_in_first_out(gw, mock):
    base = mock.scenario([{"chunk_delay_ms": 20}])
    trace_id = trace()
    async with connect(gw, cloud_c_config(base), trace_id) as ws:
        for words in ("first question", "second question"):
            await ws.send(json.dumps({"type": "response.create", "model": GEMINI, "input": words,
                                      "stream_id": "lane-a"}))
        events = []
        async with asyncio.timeout(20):
            while sum(e["type"] == "response.completed" for e in events) < 2:
                events.append(json.loads(await ws.recv()))
    assert all(e["stream_id"] == "lane-a" for e in events)
    ends = [i for i, e in enumerate(events) if e["type"] == "response.completed"]
    one, two = events[:ends[0] + 1], events[ends[0] + 1:]
    assert one[0]["type"] == two[0]["type"] == "response.created"
    assert one[0]["response"]["id"] != two[0]["response"]["id"]
    assert [e["sequence_number"] for e in one] == list(range(len(one)))  # not interleaved: one after the other
    assert [e["sequence_number"] for e in two] == list(range(len(two)))
    sent = mock.calls(base)["requests"]
    assert len(sent) == 2 and "first question" in json.dumps(sent[0]) and "second question" in json.dumps(sent[1])
    session, turns = session_and_turns(gw, trace_id, 2)
    assert session["provider"] == "cloudC" and [t["status"] for t in turns] == [200, 200]


async def test_two_lanes_run_independently_and_each_event_names_its_lane(gw, mock):
    base = mock.scenario([{"chunk_delay_ms": 20}])
    async with connect(gw, anthropic_config(base), trace()) as ws:
        for lane in ("a", "b"):
            await ws.send(json.dumps({"type": "response.create", "model": CLAUDE, "input": f"lane {lane}",
                                      "stream_id": lane}))
        events = []
        async with asyncio.timeout(20):
            while sum(e["type"] == "response.completed" for e in events) < 2:
                events.append(json.loads(await ws.recv()))
    for lane in ("a", "b"):
        mine = [e for e in events if e["stream_id"] == lane]
        assert [e["sequence_number"] for e in mine] == list(range(len(mine)))
        assert mine[-1]["type"] == "response.completed"
        assert "".join(e["delta"] for e in mine if e["type"] == "response.output_text.delta") == DEFAULT_REPLY
    sent = json.dumps(mock.calls(base)["requests"])
    assert "lane a" in sent and "lane b" in sent


async def test_an_error_inside_a_stream_is_the_modes_error_event_and_the_next_turn_runs(gw, mock):
    base = mock.scenario([{"stream_error": "middle", "message": "anthropic is overloaded"}, {}])
    async with connect(gw, anthropic_config(base), trace()) as ws:
        events = await raw_turn(ws, {"type": "response.create", "model": CLAUDE, "input": "hi", "stream_id": "x"})
        error = events[-1]
        assert events[0]["type"] == "response.created" and error["type"] == "error" and error["stream_id"] == "x"
        assert "anthropic is overloaded" in error["error"]["message"] and error["error"]["type"]
        assert isinstance(error["sequence_number"], int)
        again = await raw_turn(ws, {"type": "response.create", "model": CLAUDE, "input": "hi"})
        assert again[-1]["type"] == "response.completed"


async def test_errors_are_the_modes_error_events_and_the_session_stays_usable(gw, mock):
    base = mock.scenario([{"status": 400, "message": "anthropic says no", "error_type": "invalid_request_error"},
                          {}])
    trace_id = trace()
    async with connect(gw, anthropic_config(base), trace_id) as ws:
        [refused] = await raw_turn(ws, {"type": "response.create", "model": CLAUDE, "input": "hi",
                                        "stream_id": "s1"})
        assert (refused["type"], refused["status"], refused["stream_id"]) == ("error", 400, "s1")
        assert "anthropic says no" in refused["error"]["message"] and refused["error"]["type"]
        [unknown] = await raw_turn(ws, {"type": "response.create", "model": CLAUDE, "input": "hi",
                                        "previous_response_id": "resp_nothing_here"})
        assert (unknown["status"], unknown["error"]["param"]) == (404, "previous_response_id")
        [bad] = await raw_turn(ws, {"type": "response.create", "model": CLAUDE})
        assert (bad["status"], bad["error"]["param"]) == (400, "input")
        [steer] = await raw_turn(ws, {"type": "response.steer", "input": "x", "previous_response_id": "resp_1"})
        assert (steer["status"], steer["error"]["param"]) == (400, "type") and "response.steer" in \
            steer["error"]["message"]
        [background] = await raw_turn(ws, {"type": "response.create", "model": CLAUDE, "input": "hi",
                                           "background": True})
        assert background["error"]["param"] == "background"
        await ws.send("not json")
        assert json.loads(await ws.recv())["error"]["code"] == "invalid_json"
        events = await raw_turn(ws, {"type": "response.create", "model": CLAUDE, "input": "hi"})
        assert events[-1]["type"] == "response.completed"
    session, turns = session_and_turns(gw, trace_id, 4)
    assert session["metadata"]["realtime_close_code"] == 1000
    assert sorted(t["status"] for t in turns) == [200, 400, 400, 404]


async def test_a_client_that_closes_mid_turn_stops_the_turn_and_leaves_nothing_open(gw, mock):
    base = mock.scenario([{"chunk_delay_ms": 300}])
    trace_id = trace()
    async with connect(gw, anthropic_config(base), trace_id) as ws:
        await ws.send(json.dumps({"type": "response.create", "model": CLAUDE, "input": "tell me a long story"}))
        async with asyncio.timeout(20):
            while json.loads(await ws.recv())["type"] != "response.output_text.delta":
                pass
    session, [left] = session_and_turns(gw, trace_id, 1)
    assert (session["metadata"]["realtime_closed_by"], session["metadata"]["realtime_close_code"]) == ("client", 1000)
    assert left["status"] == 499  # the turn saw its client leave, mid-stream
    assert await await_for(lambda: open_sessions(gw) == 0, 10, 0.1)


async def test_a_client_that_vanishes_is_ended_and_recorded(gw, mock):
    """Without a close frame the server may not tell the gateway (Granian 2.8.9 does not, until a write fails): the
    turn runs to its end, then the idle timeout ends the session; nothing stays open."""
    trace_id = trace()
    ws = await connect(gw, anthropic_config(mock.scenario([{"chunk_delay_ms": 20}])), trace_id)
    await ws.send(json.dumps({"type": "response.create", "model": CLAUDE, "input": "hello"}))
    await ws.recv()
    ws.transport.abort()  # gone without a close frame
    session, [done] = session_and_turns(gw, trace_id, 1, timeout=20)
    assert session["status"] == 101 and session["metadata"]["realtime_close_code"] in (1001, 1005, 1006)
    assert done["status"] in (200, 499)
    assert await await_for(lambda: open_sessions(gw) == 0, 10, 0.1)


async def test_stopping_the_gateway_ends_a_translated_session_with_1001_and_logs_it(mock, tmp_path):
    server = start_gateway(data_dir=str(tmp_path))
    trace_id = trace()
    try:
        async with connect(server, anthropic_config(mock.scenario([{"chunk_delay_ms": 200}])), trace_id) as ws:
            await ws.send(json.dumps({"type": "response.create", "model": CLAUDE, "input": "a long one"}))
            await ws.recv()
            server.proc.terminate()
            with pytest.raises(websockets.ConnectionClosed) as closed:
                async with asyncio.timeout(15):
                    while True:
                        await ws.recv()
        received = closed.value.rcvd  # Granian may drop the connection first (see the forwarded sessions' test)
        assert received is None or (received.code, received.reason) == (1001, "gateway shutting down")
        assert await asyncio.to_thread(server.proc.wait, 20) == 0
    finally:
        server.stop()
    again = start_gateway(data_dir=str(tmp_path))  # the records were written before the worker ended
    try:
        session, [cut] = session_and_turns(again, trace_id, 1, timeout=15)  # a fresh worker reading its logs
        assert (session["metadata"]["realtime_close_code"], session["metadata"]["realtime_closed_by"]) == (
            1001, "gateway")
        assert cut["status"] == 499
    finally:
        again.stop()


def open_sessions(gw) -> int:
    """Sessions opened less sessions ended, from /metrics (every provider, every API)."""
    text = request("GET", f"{gw.url}/metrics", headers={"x-gateway-api-key": ADMIN_KEY}).text
    count = 0
    for line in text.splitlines():
        match = re.match(r'gateway_realtime_sessions_total\{(.*)\} ([0-9.e+]+)$', line)
        if match:
            sign = 1 if 'event="opened"' in match.group(1) else -1
            count += sign * int(float(match.group(2)))
    return count


async def test_a_budget_is_charged_once_per_turn_and_a_spent_one_ends_the_session(gw, mock):
    run = tag()
    policy = usage_limit(gw, run, "tokens", 10_000)
    trace_id = trace()
    meta = json.dumps({"run": run})
    async with connect(gw, anthropic_config(mock.scenario()), trace_id, **{"x-gateway-metadata": meta}) as ws:
        first = await raw_turn(ws, {"type": "response.create", "model": CLAUDE, "input": "hello"})
        second = await raw_turn(ws, {"type": "response.create", "model": CLAUDE, "input": "hello again"})
    used = sum(t[-1]["response"]["usage"]["total_tokens"] for t in (first, second))
    session_and_turns(gw, trace_id, 2)
    # the turns settled their tokens; the session's own hold settled none
    wait_for(lambda: get(gw, USAGE, policy)["current_usage"] == used, 5, 0.1)

    spent = tag()
    usage_limit(gw, spent, "tokens", 1)
    trace_id = trace()
    meta = json.dumps({"run": spent})
    async with connect(gw, anthropic_config(mock.scenario()), trace_id, **{"x-gateway-metadata": meta}) as ws:
        [error] = await raw_turn(ws, {"type": "response.create", "model": CLAUDE, "input": "hello"})
        assert (error["status"], error["error"]["code"]) == (429, "usage_limit_exceeded")
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await ws.recv()
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (1008, "usage limit exceeded")
    session, [refused] = session_and_turns(gw, trace_id, 1)
    assert refused["status"] == 429 and session["metadata"]["realtime_closed_by"] == "gateway"
