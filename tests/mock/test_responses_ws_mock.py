"""The Responses API's WebSocket mode in the mock, driven by the official openai SDK's ``responses.connect()`` and by
raw ``websockets``: turns answered with the stream's events, ``previous_response_id`` within and across
connections, ``stream_id`` lanes, ``generate: false``, error events that keep the socket open, cloudB's form,
refusals and the scenario knobs."""

from __future__ import annotations

import asyncio
import json

import pytest
import websockets
from openai import AsyncOpenAI

from gateway_mock.kit import DEFAULT_REPLY, count_tokens
from tests.support.socket_events import raw_turn, turn

AUTH = {"Authorization": "Bearer sk-test"}


def ws_url(base: str) -> str:
    return base.replace("http://", "ws://", 1)


def sdk(base: str) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=f"{base}/v1", api_key="sk-test", max_retries=0)


async def test_each_response_create_is_answered_with_the_stream_events_and_usage(mock):
    base = mock.scenario()
    async with sdk(base).responses.connect() as connection:
        events = await turn(connection, model="gpt-4o-mini", input="say hello to the mock")
    kinds = [e.type for e in events]
    assert kinds[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]
    assert kinds[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                          "response.completed"]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == DEFAULT_REPLY
    usage = events[-1].response.usage
    assert usage.input_tokens == count_tokens("say hello to the mock")
    assert usage.output_tokens == count_tokens(DEFAULT_REPLY)
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    assert usage.input_tokens_details.cached_tokens == 0
    request = mock.calls(base)["requests"][0]
    assert request["path"] == "/v1/responses" and request["query"] == ""
    assert request["headers"]["authorization"] == "Bearer sk-test"


async def test_previous_response_id_chains_turns_on_a_socket_and_stored_responses_across_sockets(mock):
    async with sdk(mock.url).responses.connect() as connection:
        first = (await turn(connection, model="m", input="one two", store=False))[-1].response
        second = (await turn(connection, model="m", input="three", previous_response_id=first.id))[-1].response
        assert second.previous_response_id == first.id
        assert second.usage.input_tokens == count_tokens("three") + first.usage.total_tokens
    async with sdk(mock.url).responses.connect() as connection:
        third = (await turn(connection, model="m", input="four", previous_response_id=second.id))[-1].response
        assert third.usage.input_tokens == count_tokens("four") + second.usage.total_tokens
        missing = (await turn(connection, model="m", input="five", previous_response_id=first.id))[-1]
        assert missing.type == "error" and missing.status == 400
        assert (missing.error.code, missing.error.param) == ("previous_response_not_found", "previous_response_id")
        after = (await turn(connection, model="m", input="six"))[-1]
    assert after.type == "response.completed"


async def test_stream_id_is_echoed_and_generate_false_prepares_a_response_without_output(mock):
    async with sdk(mock.url).responses.connect() as connection:
        events = await turn(connection, model="m", input="warm up", generate=False, stream_id="lane-a")
        assert [e.type for e in events] == ["response.created", "response.in_progress", "response.completed"]
        assert {e.stream_id for e in events} == {"lane-a"} and events[-1].response.output == []
        warm = events[-1].response
        events = await turn(connection, model="m", input="go", previous_response_id=warm.id, stream_id="lane-b")
    assert {e.stream_id for e in events} == {"lane-b"} and events[-1].type == "response.completed"


async def test_bad_events_are_answered_with_error_events_and_the_socket_stays_open(mock):
    async with websockets.connect(ws_url(mock.url) + "/v1/responses", additional_headers=AUTH) as ws:
        problems = []
        for frame in ["{nope", json.dumps({"type": "response.steer", "stream_id": "s"}), json.dumps({"model": "m"}),
                      json.dumps({"type": "response.create", "input": "hi"}),
                      json.dumps({"type": "response.create", "model": "m", "input": "hi", "background": True})]:
            await ws.send(frame)
            problems.append(json.loads(await ws.recv()))
        assert all(p["type"] == "error" and p["status"] == 400 for p in problems)
        assert [(p["error"]["code"], p["error"]["param"]) for p in problems] == [
            ("invalid_json", None), ("invalid_value", "type"), ("missing_required_parameter", "type"),
            (None, "model"), ("invalid_value", "background")]
        assert problems[1]["stream_id"] == "s"
        events = await raw_turn(ws, {"type": "response.create", "model": "m", "input": "hi"})
    assert events[-1]["type"] == "response.completed"


@pytest.mark.parametrize(("path", "headers", "status"), [
    ("/v1/responses", {}, 401),
    ("/openai/v1/responses", {"Authorization": "Bearer x"}, None),
    ("/openai/v1/responses", {"api-key": "k"}, None),
    ("/openai/v1/responses", {}, 401),
])
async def test_vendorA_and_cloudB_forms_and_their_refusals(mock, path, headers, status):
    if status is not None:
        with pytest.raises(websockets.InvalidStatus) as refused:
            async with websockets.connect(ws_url(mock.url) + path, additional_headers=headers):
                pass
        assert refused.value.response.status_code == status
        assert json.loads(refused.value.response.body)["error"]["message"]
        return
    async with websockets.connect(ws_url(mock.url) + path, additional_headers=headers) as ws:
        events = await raw_turn(ws, {"type": "response.create", "model": "d", "input": "hi"})
    assert events[-1]["type"] == "response.completed"


async def test_scenario_knobs(mock):
    closing = mock.scenario([{"close_code": 4002}])
    async with websockets.connect(ws_url(closing) + "/v1/responses", additional_headers=AUTH) as ws:
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await raw_turn(ws, {"type": "response.create", "model": "m", "input": "hi"})
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4002
    knobs = mock.scenario([{"binary_frames": True, "cached_tokens": 1, "oversized_bytes": 3000}])
    async with websockets.connect(ws_url(knobs) + "/v1/responses", additional_headers=AUTH) as ws:
        await ws.send(json.dumps({"type": "response.create", "model": "m", "input": "a question"}))
        frames = []
        async with asyncio.timeout(20):
            while not frames or json.loads(frames[-1])["type"] != "response.completed":
                frames.append(await ws.recv())
    assert all(isinstance(f, bytes) for f in frames)
    deltas = [f for f in frames if b'"response.output_text.delta"' in f]
    assert len(deltas[0]) > 3000 and len(deltas[1]) < 3000
    assert json.loads(frames[-1])["response"]["usage"]["input_tokens_details"]["cached_tokens"] == 1
    failing = mock.scenario([{"stream_error": "middle"}])
    async with websockets.connect(ws_url(failing) + "/v1/responses", additional_headers=AUTH) as ws:
        events = await raw_turn(ws, {"type": "response.create", "model": "m", "input": "hi"})
    assert events[-1]["error"]["type"] == "server_error" and isinstance(events[-1]["sequence_number"], int)
