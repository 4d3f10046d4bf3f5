"""The Realtime API mock, driven by the official openai SDK's ``realtime.connect()`` and by raw ``websockets``:
the session, text and audio turns with usage derived from the input, cancel, error events that keep the session
open, the browser's subprotocol, cloudB's upgrade forms, refusals and the scenario knobs."""

from __future__ import annotations

import asyncio
import base64
import json
import time

import pytest
import websockets
from openai import AsyncAzureOpenAI, AsyncOpenAI

from gateway_mock.kit import DEFAULT_REPLY, count_tokens
from tests.support.socket_events import raw_until, until

PCM_100MS = bytes(4800)


def ws_url(base: str) -> str:
    return base.replace("http://", "ws://", 1)


def sdk(base: str) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=f"{base}/v1", api_key="sk-test", max_retries=0)


async def test_a_text_turn_answers_the_sdk_with_its_events_and_usage_from_the_conversation(mock):
    base = mock.scenario()
    async with sdk(base).realtime.connect(model="gpt-realtime") as connection:
        created = await connection.recv()
        assert created.type == "session.created" and created.session.model == "gpt-realtime"
        await connection.session.update(session={"type": "realtime", "output_modalities": ["text"]})
        updated = await connection.recv()
        assert updated.type == "session.updated" and updated.session.output_modalities == ["text"]
        await connection.conversation.item.create(item={"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "hello there, mock"}]})
        added, done = await connection.recv(), await connection.recv()
        assert (added.type, done.type) == ("conversation.item.added", "conversation.item.done")
        assert added.item.id == done.item.id
        await connection.response.create()
        events = await until(connection, "response.done")
    kinds = [e.type for e in events]
    assert kinds[:6] == ["response.created", "rate_limits.updated", "response.output_item.added",
                         "conversation.item.added", "response.content_part.added", "response.output_text.delta"]
    assert kinds[-5:] == ["response.output_text.done", "response.content_part.done", "conversation.item.done",
                          "response.output_item.done", "response.done"]
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == DEFAULT_REPLY
    response = events[-1].response
    assert response.status == "completed" and response.output[0].content[0].text == DEFAULT_REPLY
    usage = response.usage
    assert usage.input_tokens == usage.input_token_details.text_tokens == count_tokens("hello there, mock")
    assert usage.output_tokens == usage.output_token_details.text_tokens == count_tokens(DEFAULT_REPLY)
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    assert usage.input_token_details.audio_tokens == usage.input_token_details.cached_tokens == 0
    request = mock.calls(base)["requests"][0]
    assert request["path"] == "/v1/realtime" and request["query"] == "model=gpt-realtime"
    assert request["headers"]["authorization"] == "Bearer sk-test"
    assert any('"response.create"' in frame for frame in request["frames"])


async def test_committed_audio_is_a_user_item_and_an_audio_turn_counts_audio_tokens(mock):
    async with sdk(mock.url).realtime.connect(model="gpt-realtime") as connection:
        await connection.recv()
        for _ in range(3):
            await connection.input_audio_buffer.append(audio=base64.b64encode(PCM_100MS).decode())
        await connection.input_audio_buffer.commit()
        committed, added, done = await connection.recv(), await connection.recv(), await connection.recv()
        assert [committed.type, added.type, done.type] == [
            "input_audio_buffer.committed", "conversation.item.added", "conversation.item.done"]
        assert committed.item_id == added.item.id and added.item.content[0].type == "input_audio"
        await connection.response.create()
        events = await until(connection, "response.done")
    audio = [base64.b64decode(e.delta) for e in events if e.type == "response.output_audio.delta"]
    transcript = "".join(e.delta for e in events if e.type == "response.output_audio_transcript.delta")
    assert len(audio) == 20 and all(len(chunk) == 4800 for chunk in audio) and transcript == DEFAULT_REPLY
    assert [e.type for e in events if e.type.endswith(".done")][:2] == [
        "response.output_audio.done", "response.output_audio_transcript.done"]
    usage = events[-1].response.usage
    assert usage.input_token_details.audio_tokens == 3 and usage.input_token_details.text_tokens == 0
    assert usage.output_token_details.audio_tokens == 20
    assert usage.output_token_details.text_tokens == count_tokens(DEFAULT_REPLY)
    assert usage.total_tokens == 3 + 20 + count_tokens(DEFAULT_REPLY)


async def test_cancel_ends_the_response_with_its_partial_usage_and_a_second_cancel_is_an_error(mock):
    base = mock.scenario([{"chunk_delay_ms": 40}])
    async with sdk(base).realtime.connect(model="gpt-realtime") as connection:
        await connection.recv()
        await connection.response.create(response={"output_modalities": ["text"]})
        await until(connection, "response.output_text.delta")
        await connection.response.cancel()
        events = await until(connection, "response.done")
        done = events[-1].response
        assert done.status == "cancelled" and done.status_details.reason == "client_cancelled"
        assert 0 < done.usage.output_tokens < count_tokens(DEFAULT_REPLY)
        await connection.response.cancel(event_id="evt_again")
        error = await connection.recv()
    assert error.type == "error" and error.error.code == "response_cancel_not_active"
    assert error.error.event_id == "evt_again"


async def test_bad_events_are_answered_with_error_events_and_the_session_goes_on(mock):
    headers = {"Authorization": "Bearer sk-test"}
    async with websockets.connect(ws_url(mock.url) + "/v1/realtime?model=m", additional_headers=headers) as ws:
        await raw_until(ws, "session.created")
        problems = []
        for frame in ["{not json", json.dumps({"type": "conversation.nope", "event_id": "e1"}),
                      json.dumps({"event_id": "e2"}), json.dumps({"type": "input_audio_buffer.commit"}),
                      json.dumps({"type": "session.update", "session": {"output_modalities": ["text"]}}),
                      json.dumps({"type": "input_audio_buffer.append", "audio": "***"}),
                      json.dumps({"type": "conversation.item.create", "item": {"type": "message", "role": "bot",
                                                                                "content": []}})]:
            await ws.send(frame)
            problems.append(json.loads(await ws.recv()))
        assert all(p["type"] == "error" and p["event_id"] for p in problems)
        assert [(p["error"]["code"], p["error"]["param"]) for p in problems] == [
            ("invalid_json", None), ("invalid_value", "type"), ("missing_required_parameter", "type"),
            ("input_audio_buffer_commit_empty", None), ("invalid_value", "session.type"), ("invalid_value", "audio"),
            ("invalid_value", "item.role")]
        assert problems[1]["error"]["event_id"] == "e1" and problems[1]["error"]["type"] == "invalid_request_error"
        await ws.send(json.dumps({"type": "response.create"}))
        await ws.send(json.dumps({"type": "response.create"}))
        events = await raw_until(ws, "response.done")
    busy = [e for e in events if e["type"] == "error"]
    assert [e["error"]["code"] for e in busy] == ["conversation_already_has_active_response"]
    assert events[-1]["response"]["status"] == "completed"


async def test_a_browser_authenticates_with_the_insecure_key_subprotocol_and_gets_realtime_back(mock):
    base = mock.scenario()
    async with websockets.connect(ws_url(base) + "/v1/realtime?model=m",
                                  subprotocols=["realtime", "openai-insecure-api-key.sk-browser"]) as ws:
        assert ws.subprotocol == "realtime"
        assert json.loads(await ws.recv())["type"] == "session.created"
    headers = mock.calls(base)["requests"][0]["headers"]
    assert "authorization" not in headers
    assert headers["sec-websocket-protocol"] == "realtime, openai-insecure-api-key.sk-browser"


@pytest.mark.parametrize(("path", "headers", "steps", "status", "code"), [
    ("/v1/realtime?model=m", {}, None, 401, "invalid_api_key"),
    ("/v1/realtime", {"Authorization": "Bearer k"}, None, 400, "missing_model"),
    ("/v1/realtime?model=m", {"Authorization": "Bearer k"}, [{"status": 429, "error_type": "rate_limit_exceeded"}],
     429, None),
    ("/openai/realtime?api-version=2025-04-01-preview&deployment=d", {}, None, 401, None),
    ("/openai/realtime?deployment=d", {"api-key": "k"}, None, 404, None),
    ("/openai/v1/realtime", {"api-key": "k"}, None, 400, None),
])
async def test_an_upgrade_without_what_the_provider_needs_is_refused_with_its_error_body(mock, path, headers, steps,
                                                                                        status, code):
    with pytest.raises(websockets.InvalidStatus) as refused:
        async with websockets.connect(ws_url(mock.scenario(steps)) + path, additional_headers=headers):
            pass
    assert refused.value.response.status_code == status
    error = json.loads(refused.value.response.body)["error"]
    assert error["message"] and (code is None or error["code"] == code)


async def test_cloudB_realtime_takes_the_azure_sdk_form_and_the_ga_form(mock):
    base = mock.scenario()
    client = AsyncAzureOpenAI(azure_endpoint=base, api_key="azure-key", api_version="2025-04-01-preview",
                              websocket_base_url=ws_url(base) + "/openai", max_retries=0)
    async with client.realtime.connect(model="my-deployment") as connection:
        created = await connection.recv()
        assert created.session.model == "my-deployment"
    request = mock.calls(base)["requests"][0]
    assert request["path"] == "/openai/realtime" and request["headers"]["api-key"] == "azure-key"
    assert "deployment=my-deployment" in request["query"] and "api-version=2025-04-01-preview" in request["query"]
    async with websockets.connect(ws_url(base) + "/openai/v1/realtime?model=ga-deployment",
                                  additional_headers={"api-key": "k"}) as ws:
        assert json.loads(await ws.recv())["session"]["model"] == "ga-deployment"


async def test_scenario_knobs_close_midway_or_at_once_with_the_code_given(mock):
    headers = {"Authorization": "Bearer k"}
    for close_at, code in (("middle", 4001), ("open", 1013)):
        base = mock.scenario([{"close_code": code, "close_at": close_at}])
        async with websockets.connect(ws_url(base) + "/v1/realtime?model=m", additional_headers=headers) as ws:
            seen = []
            with pytest.raises(websockets.ConnectionClosed) as closed:
                async with asyncio.timeout(20):
                    await raw_until(ws, "session.created")
                    await ws.send(json.dumps({"type": "response.create"}))
                    seen = await raw_until(ws, "response.done")
        assert closed.value.rcvd is not None and closed.value.rcvd.code == code and not seen
        assert mock.calls(base)["requests"][0]["close"] == {"code": code, "by": "server"}


async def test_scenario_knobs_oversized_binary_slow_and_cached(mock):
    headers = {"Authorization": "Bearer k"}
    oversized = mock.scenario([{"oversized_bytes": 2 * 1024 * 1024}])
    async with websockets.connect(ws_url(oversized) + "/v1/realtime?model=m", additional_headers=headers) as ws:
        await raw_until(ws, "session.created")
        await ws.send(json.dumps({"type": "response.create"}))
        with pytest.raises(websockets.ConnectionClosedError) as closed:
            await raw_until(ws, "response.done")
    assert closed.value.sent is not None and closed.value.sent.code == 1009
    knobs = mock.scenario([{"binary_frames": True, "delay_ms": 300, "cached_tokens": 2}])
    async with websockets.connect(ws_url(knobs) + "/v1/realtime?model=m", additional_headers=headers,
                                  max_size=None) as ws:
        frame = await ws.recv()
        assert isinstance(frame, bytes) and json.loads(frame)["type"] == "session.created"
        await ws.send(json.dumps({"type": "conversation.item.create", "item": {
            "type": "message", "role": "user", "content": [{"type": "input_text", "text": "a longer question " * 4}]}}))
        await ws.send(json.dumps({"type": "response.create", "response": {"output_modalities": ["text"]}}))
        started = time.monotonic()
        events = await raw_until(ws, "response.output_text.delta")
        assert time.monotonic() - started >= 0.3 and events[0]["type"] == "conversation.item.added"
        usage = (await raw_until(ws, "response.done"))[-1]["response"]["usage"]
    assert usage["input_token_details"]["cached_tokens"] == 2
    assert usage["input_token_details"]["cached_tokens_details"]["text_tokens"] == 2


async def test_a_tool_call_step_answers_a_function_call_item_with_arguments_from_the_schema(mock):
    tool = {"type": "function", "name": "lookup", "description": "find",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
    async with sdk(mock.scenario([{"tool_call": True}])).realtime.connect(model="gpt-realtime") as connection:
        await connection.recv()
        await connection.session.update(session={"type": "realtime", "tools": [tool]})
        await connection.recv()
        await connection.response.create()
        events = await until(connection, "response.done")
    pieces = [e.delta for e in events if e.type == "response.function_call_arguments.delta"]
    done = next(e for e in events if e.type == "response.function_call_arguments.done")
    assert len(pieces) == 2 and "".join(pieces) == done.arguments and "city" in json.loads(done.arguments)
    item = events[-1].response.output[0]
    assert (item.type, item.name, item.call_id, item.arguments) == ("function_call", "lookup", done.call_id,
                                                                    done.arguments)
    assert events[-1].response.usage.output_token_details.text_tokens == count_tokens(done.arguments)


async def test_a_client_leaving_mid_response_is_recorded_and_the_next_session_is_served(mock):
    base = mock.scenario([{"chunk_delay_ms": 30, "times": 1}, {}])
    headers = {"Authorization": "Bearer k"}
    async with websockets.connect(ws_url(base) + "/v1/realtime?model=m", additional_headers=headers) as ws:
        await raw_until(ws, "session.created")
        await ws.send(json.dumps({"type": "response.create"}))
        await raw_until(ws, "response.output_audio.delta")
    async with websockets.connect(ws_url(base) + "/v1/realtime?model=m", additional_headers=headers) as ws:
        await raw_until(ws, "session.created")
        await ws.send(json.dumps({"type": "response.create"}))
        assert (await raw_until(ws, "response.done"))[-1]["response"]["status"] == "completed"
    first = mock.calls(base)["requests"][0]
    async with asyncio.timeout(10):
        while not first["completed"]:
            await asyncio.sleep(0.05)
            first = mock.calls(base)["requests"][0]
    assert first["close"] == {"code": 1000, "by": "client"}
