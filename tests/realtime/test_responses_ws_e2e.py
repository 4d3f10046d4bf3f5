"""The Responses API's WebSocket mode through a served gateway to the mock: the official openai SDK's
``responses.connect()`` (two turns chained by ``previous_response_id`` on one socket), raw ``websockets`` for
cloudB's form, refusals (a Realtime client secret among them) and the budget's end; each session's record in
``/v1/logs`` with its summed usage."""

from __future__ import annotations

import json
import uuid

import msgspec
import pytest
import websockets
from openai import AsyncOpenAI

from gateway_mock.kit import DEFAULT_REPLY, count_tokens
from tests.realtime.test_realtime_e2e import trace, vendor_config, ws_url
from tests.support.controlplane import api
from tests.support.policies import tag, usage_limit
from tests.support.poll import wait_logs
from tests.support.servers import ADMIN_KEY
from tests.support.socket_events import raw_turn, turn

ENDPOINT = "responses.websocket"


def sdk(gw, base: str, trace_id: str, api_key: str = ADMIN_KEY) -> AsyncOpenAI:
    """The SDK pointed at the gateway: the gateway key as its api_key, the provider's config in a header."""
    return AsyncOpenAI(base_url=f"{gw.url}/v1", api_key=api_key, max_retries=0,
                       default_headers={"x-gateway-config": vendor_config(base), "x-gateway-trace-id": trace_id})


def refusal(gw, path: str, headers: dict[str, str]):
    """The HTTP answer to an upgrade the gateway refuses."""
    async def attempt():
        with pytest.raises(websockets.InvalidStatus) as refused:
            async with websockets.connect(ws_url(gw.url) + path, additional_headers=headers):
                pass
        return refused.value.response
    return attempt()


async def test_the_sdk_runs_two_chained_turns_on_one_socket_and_the_record_sums_their_usage(gw, mock):
    base = mock.scenario([{"cached_tokens": 1}])
    trace_id = trace()
    async with sdk(gw, base, trace_id).responses.connect() as connection:
        first_turn = await turn(connection, model="gpt-4o-mini", input="say hello to the mock", store=False)
        first = first_turn[-1].response
        second_turn = await turn(connection, model="gpt-4o-mini", input="and again",
                                 previous_response_id=first.id)
        second = second_turn[-1].response
    for events in (first_turn, second_turn):  # relayed in order, each turn's events as the provider numbered them
        assert [e.sequence_number for e in events] == list(range(len(events)))
        assert events[0].type == "response.created" and events[-1].type == "response.completed"
        assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == DEFAULT_REPLY
    assert second.previous_response_id == first.id
    assert second.usage.input_tokens == count_tokens("and again") + first.usage.total_tokens
    [item] = wait_logs(gw, trace_id)
    assert (item["endpoint"], item["provider"], item["model"], item["status"]) == (
        ENDPOINT, "vendorA", first.model, 101)
    assert item["prompt_tokens"] == first.usage.input_tokens + second.usage.input_tokens
    assert item["completion_tokens"] == first.usage.output_tokens + second.usage.output_tokens
    assert item["total_tokens"] == first.usage.total_tokens + second.usage.total_tokens
    assert item["usage_source"] == "reported"
    meta = item["metadata"]
    assert (meta["realtime_responses"], meta["realtime_closed_by"], meta["realtime_close_code"]) == (2, "client", 1000)
    assert meta["realtime_cached_tokens"] == (first.usage.input_tokens_details.cached_tokens
                                              + second.usage.input_tokens_details.cached_tokens) > 0
    assert meta["realtime_messages_in"] == 2
    assert meta["realtime_messages_out"] == len(first_turn) + len(second_turn)
    [upstream] = mock.calls(base)["requests"]
    assert upstream["path"] == "/v1/responses" and upstream["query"] == ""
    assert upstream["headers"]["authorization"] == "Bearer sk-upstream"
    assert ADMIN_KEY not in json.dumps(upstream["headers"])
    assert "sec-websocket-protocol" not in upstream["headers"]


async def test_cloudB_is_forwarded_to_its_v1_responses_route_with_its_api_key(gw, mock):
    base = mock.scenario()
    trace_id = trace()
    config = msgspec.json.encode({"provider": "cloudB", "api_key": "azure-upstream",
                                  "custom_host": f"{base}/openai"}).decode()
    headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": config, "x-gateway-trace-id": trace_id}
    async with websockets.connect(f"{ws_url(gw.url)}/v1/responses", additional_headers=headers) as ws:
        assert ws.subprotocol is None
        events = await raw_turn(ws, {"type": "response.create", "model": "my-deployment", "input": "hi"})
    assert events[-1]["type"] == "response.completed"
    [upstream] = mock.calls(base)["requests"]
    assert upstream["path"] == "/openai/v1/responses"
    assert upstream["headers"]["api-key"] == "azure-upstream" and "authorization" not in upstream["headers"]
    [item] = wait_logs(gw, trace_id)
    assert (item["endpoint"], item["provider"], item["model"]) == (ENDPOINT, "cloudB", "my-deployment")
    assert item["total_tokens"] == events[-1]["response"]["usage"]["total_tokens"]


async def test_a_provider_without_chat_is_refused_before_the_upgrade(gw, mock):
    """Other providers are translated (test_responses_translated.py); one the Responses door cannot serve (no chat
    API: embeddings and rerank only) is refused before the upgrade, naming it."""
    trace_id = trace()
    response = await refusal(gw, "/v1/responses", {
        "x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "cohere", "authorization": "Bearer co-key",
        "x-gateway-trace-id": trace_id})
    assert response.status_code == 400
    error = json.loads(response.body)["error"]
    assert error["param"] == "provider"
    assert "'cohere'" in error["message"] and "no chat API" in error["message"]
    [item] = wait_logs(gw, trace_id)
    assert (item["endpoint"], item["status"]) == (ENDPOINT, 400) and "no chat API" in item["error"]


async def test_a_wrong_gateway_key_is_refused_and_the_provider_is_never_called(gw, mock):
    base = mock.scenario()
    with pytest.raises(websockets.InvalidStatus) as refused:
        async with sdk(gw, base, trace(), api_key="gw-wrong").responses.connect():
            pass
    assert refused.value.response.status_code == 401
    assert json.loads(refused.value.response.body)["error"]["param"] == "x-gateway-api-key"
    assert mock.calls(base)["requests"] == []


async def test_the_provider_refusing_the_upgrade_is_its_status_naming_the_mode(gw, mock):
    base = mock.scenario([{"status": 401, "message": "bad upstream key"}])
    response = await refusal(gw, "/v1/responses", {"x-gateway-api-key": ADMIN_KEY,
                                                   "x-gateway-config": vendor_config(base, "sk-secret-upstream")})
    assert response.status_code == 401
    body = bytes(response.body).decode()
    assert "Responses WebSocket upgrade" in body and "sk-secret-upstream" not in body


async def test_a_spent_budget_ends_the_session_with_the_modes_error_event_and_1008(gw, mock):
    run = tag()
    usage_limit(gw, run, "tokens", 1)
    trace_id = trace()
    headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": vendor_config(mock.scenario()),
               "x-gateway-metadata": json.dumps({"run": run}), "x-gateway-trace-id": trace_id}
    async with websockets.connect(f"{ws_url(gw.url)}/v1/responses", additional_headers=headers) as ws:
        events = await raw_turn(ws, {"type": "response.create", "model": "m", "input": "hello"})
        assert events[-1]["type"] == "response.completed"
        error = json.loads(await ws.recv())
        assert error["type"] == "error" and error["error"]["code"] == "usage_limit_exceeded"
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await ws.recv()
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (1008, "usage limit exceeded")
    [item] = wait_logs(gw, trace_id)
    assert item["endpoint"] == ENDPOINT and item["metadata"]["realtime_closed_by"] == "gateway"


async def test_a_realtime_client_secret_does_not_open_the_mode_and_stays_usable(gw, mock):
    base = mock.scenario()
    slug = f"rs{uuid.uuid4().hex[:10]}"
    made = api(gw, "POST", "/v1/providers", {"slug": slug, "provider": "vendorA", "api_key": "sk-slug-key",
                                             "custom_host": f"{base}/v1"})
    assert made.status in (200, 201), made.text
    minted = api(gw, "POST", "/v1/realtime/client_secrets", {}, ADMIN_KEY, **{"x-gateway-provider": f"@{slug}"})
    secret = minted.json()["value"]
    with pytest.raises(websockets.InvalidStatus) as refused:
        async with websockets.connect(f"{ws_url(gw.url)}/v1/responses",
                                      subprotocols=[f"openai-insecure-api-key.{secret}"]):
            pass
    assert refused.value.response.status_code == 403
    error = json.loads(refused.value.response.body)["error"]
    assert error["param"] == "sec-websocket-protocol" and "Realtime sessions" in error["message"]
    assert mock.calls(base)["requests"] == []
    async with websockets.connect(f"{ws_url(gw.url)}/v1/realtime?model=m",
                                  subprotocols=["realtime", f"openai-insecure-api-key.{secret}"]) as ws:
        assert json.loads(await ws.recv())["type"] == "session.created"
