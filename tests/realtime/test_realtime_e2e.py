"""The Realtime API through a served gateway (Granian, as ``gateway serve`` runs it) to the mock: the official openai
SDK's ``realtime.connect()`` (vendorA, and cloudB through ``AsyncAzureOpenAI``) and raw ``websockets`` (the browser's
subprotocol form, refusals, close codes, limits); each session's record in ``/v1/logs`` with its summed usage."""

from __future__ import annotations

import asyncio
import base64
import json
import uuid

import msgspec
import pytest
import websockets
from openai import AsyncAzureOpenAI, AsyncOpenAI

from gateway_mock.kit import DEFAULT_REPLY
from tests.support.controlplane import api, create_key
from tests.support.policies import USAGE, get, rate_limit, tag, usage_limit
from tests.support.poll import await_for, wait_logs
from tests.support.servers import ADMIN_KEY, free_port, start_gateway
from tests.support.socket_events import raw_until, until

PCM_100MS = bytes(4800)


def ws_url(base: str) -> str:
    return base.replace("http://", "ws://", 1)


def trace() -> str:
    return f"rt-{uuid.uuid4().hex[:16]}"


def vendor_config(base: str, key: str = "sk-upstream") -> str:
    return msgspec.json.encode({"provider": "vendorA", "api_key": key, "custom_host": f"{base}/v1"}).decode()


def sdk(gw, base: str, trace_id: str, **headers: str) -> AsyncOpenAI:
    """The SDK as a user points it at the gateway: the gateway key as its api_key, the provider in a header."""
    return AsyncOpenAI(base_url=f"{gw.url}/v1", api_key=ADMIN_KEY, max_retries=0,
                       default_headers={"x-gateway-config": vendor_config(base), "x-gateway-trace-id": trace_id,
                                        **headers})


async def test_the_sdk_runs_a_text_and_an_audio_turn_and_the_record_sums_their_usage(gw, mock):
    base = mock.scenario([{"cached_tokens": 2}])
    trace_id = trace()
    async with sdk(gw, base, trace_id).realtime.connect(model="gpt-realtime") as connection:
        created = await connection.recv()
        assert created.type == "session.created" and created.session.model == "gpt-realtime"
        await connection.session.update(session={"type": "realtime", "output_modalities": ["text"]})
        assert (await connection.recv()).type == "session.updated"
        await connection.conversation.item.create(item={"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "hello there, mock"}]})
        await connection.response.create()
        text_turn = await until(connection, "response.done")
        assert "".join(e.delta for e in text_turn if e.type == "response.output_text.delta") == DEFAULT_REPLY
        await connection.input_audio_buffer.append(audio=base64.b64encode(PCM_100MS * 5).decode())
        await connection.input_audio_buffer.commit()
        await connection.response.create(response={"output_modalities": ["audio"]})
        audio_turn = await until(connection, "response.done")
        audio = b"".join(base64.b64decode(e.delta) for e in audio_turn if e.type == "response.output_audio.delta")
        assert audio
    first, second = text_turn[-1].response.usage, audio_turn[-1].response.usage
    [item] = wait_logs(gw, trace_id)
    assert (item["endpoint"], item["provider"], item["model"], item["status"]) == (
        "realtime", "vendorA", "gpt-realtime", 101)
    assert item["prompt_tokens"] == first.input_tokens + second.input_tokens
    assert item["completion_tokens"] == first.output_tokens + second.output_tokens
    assert item["total_tokens"] == first.total_tokens + second.total_tokens
    assert item["usage_source"] == "reported"
    meta = item["metadata"]
    assert meta["realtime_responses"] == 2 and meta["realtime_closed_by"] == "client"
    assert meta["realtime_close_code"] == 1000
    assert meta["realtime_cached_tokens"] == 4
    assert meta["realtime_input_audio_tokens"] == second.input_token_details.audio_tokens == 5
    assert meta["realtime_output_audio_tokens"] == second.output_token_details.audio_tokens > 0
    assert meta["realtime_messages_in"] == 6  # update, item, response, append, commit, response
    assert meta["realtime_messages_out"] >= 2 + len(text_turn) + len(audio_turn)
    assert meta["realtime_bytes_in"] > 5 * 4800 and meta["realtime_bytes_out"] > len(audio)
    upstream = mock.calls(base)["requests"][0]
    assert upstream["path"] == "/v1/realtime" and upstream["query"] == "model=gpt-realtime"
    assert upstream["headers"]["authorization"] == "Bearer sk-upstream"
    assert ADMIN_KEY not in json.dumps(upstream["headers"])


async def test_a_browser_sends_the_gateway_key_in_the_subprotocol_and_names_a_provider_slug(gw, mock):
    base = mock.scenario()
    slug = f"rt{uuid.uuid4().hex[:10]}"
    made = api(gw, "POST", "/v1/providers", {"slug": slug, "provider": "vendorA", "api_key": "sk-slug-key",
                                             "custom_host": f"{base}/v1"})
    assert made.status in (200, 201), made.text
    trace_id = trace()
    url = f"{ws_url(gw.url)}/v1/realtime?model=m&x-gateway-provider=@{slug}&x-gateway-trace-id=ignored"
    async with websockets.connect(url, subprotocols=["realtime", f"openai-insecure-api-key.{ADMIN_KEY}"],
                                  additional_headers={"x-gateway-trace-id": trace_id}) as ws:
        assert ws.subprotocol == "realtime"
        assert json.loads(await ws.recv())["type"] == "session.created"
        await ws.send(json.dumps({"type": "response.create", "response": {"output_modalities": ["text"]}}))
        await raw_until(ws, "response.done")
    upstream = mock.calls(base)["requests"][0]
    assert upstream["headers"]["authorization"] == "Bearer sk-slug-key"
    assert ADMIN_KEY not in json.dumps(upstream["headers"])
    [item] = wait_logs(gw, trace_id)
    assert item["status"] == 101 and item["metadata"]["realtime_responses"] == 1
    # a key or a JSON config in the query is refused: the provider credential never comes from the page
    for query in ("x-gateway-provider=vendorA", "x-gateway-config=%7B%7D"):
        with pytest.raises(websockets.InvalidStatus) as refused:
            async with websockets.connect(f"{ws_url(gw.url)}/v1/realtime?model=m&{query}",
                                          subprotocols=["realtime", f"openai-insecure-api-key.{ADMIN_KEY}"]):
                pass
        assert refused.value.response.status_code == 400
        assert json.loads(refused.value.response.body)["error"]["param"] in ("x-gateway-provider", "x-gateway-config")


@pytest.mark.parametrize(("headers", "subprotocols", "status"), [
    ({}, [], 401),
    ({"x-gateway-api-key": "gw-wrong"}, [], 401),
    ({}, ["realtime", "openai-insecure-api-key.gw-wrong"], 401),
])
async def test_a_missing_or_wrong_gateway_key_is_refused_before_the_upgrade(gw, mock, headers, subprotocols, status):
    headers = {"x-gateway-config": vendor_config(mock.scenario()), **headers}
    with pytest.raises(websockets.InvalidStatus) as refused:
        async with websockets.connect(f"{ws_url(gw.url)}/v1/realtime?model=m", additional_headers=headers,
                                      subprotocols=subprotocols or None):
            pass
    response = refused.value.response
    assert response.status_code == status
    error = json.loads(response.body)["error"]
    assert error["param"] == "x-gateway-api-key" and error["message"]


async def test_refusals_name_what_is_wrong_and_are_logged(gw, mock):
    base = mock.scenario()
    member = create_key(gw, role="member", scopes=["logs.read"])
    cases = [
        ({"x-gateway-api-key": member["key"], "x-gateway-config": vendor_config(base)}, "/v1/realtime?model=m", 403,
         None),
        ({"x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "anthropic", "authorization": "Bearer sk-a"},
         "/v1/realtime?model=m", 400, "provider"),
        ({"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": vendor_config(base)}, "/v1/realtime", 400, "model"),
        ({"x-gateway-api-key": ADMIN_KEY}, "/v1/realtime?model=m", 400, "x-gateway-provider"),
        ({"x-gateway-api-key": ADMIN_KEY}, "/v1/elsewhere", 404, None),
    ]
    for headers, path, status, param in cases:
        trace_id = trace()
        with pytest.raises(websockets.InvalidStatus) as refused:
            async with websockets.connect(ws_url(gw.url) + path,
                                          additional_headers={**headers, "x-gateway-trace-id": trace_id}):
                pass
        response = refused.value.response
        assert response.status_code == status, (path, response.body)
        error = json.loads(response.body)["error"]
        assert error["message"] and (param is None or error["param"] == param), error
        if status == 400:
            [item] = wait_logs(gw, trace_id)
            assert item["endpoint"] == "realtime" and item["status"] == 400 and item["error"]


async def test_the_provider_refusing_the_upgrade_is_its_status_without_its_key(gw, mock):
    base = mock.scenario([{"status": 401, "message": "bad upstream key"}])
    with pytest.raises(websockets.InvalidStatus) as refused:
        async with websockets.connect(f"{ws_url(gw.url)}/v1/realtime?model=m", additional_headers={
                "x-gateway-api-key": ADMIN_KEY, "x-gateway-config": vendor_config(base, "sk-secret-upstream")}):
            pass
    response = refused.value.response
    assert response.status_code == 401
    body = bytes(response.body).decode()
    assert "vendorA" in body and "sk-secret-upstream" not in body


async def test_the_provider_closing_mid_session_closes_the_client_with_its_code(gw, mock):
    base = mock.scenario([{"close_code": 4001}])
    trace_id = trace()
    headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": vendor_config(base),
               "x-gateway-trace-id": trace_id}
    async with websockets.connect(f"{ws_url(gw.url)}/v1/realtime?model=m", additional_headers=headers) as ws:
        await ws.recv()
        await ws.send(json.dumps({"type": "response.create", "response": {"output_modalities": ["text"]}}))
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await raw_until(ws, "response.done")
    assert closed.value.rcvd.code == 4001 and closed.value.rcvd.reason == "mock: scripted close"
    [item] = wait_logs(gw, trace_id)
    meta = item["metadata"]
    assert (meta["realtime_close_code"], meta["realtime_closed_by"]) == (4001, "upstream")


async def test_an_oversized_message_closes_with_1009_either_way(gw, mock):
    headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": vendor_config(mock.scenario())}
    async with websockets.connect(f"{ws_url(gw.url)}/v1/realtime?model=m", additional_headers=headers) as ws:
        await ws.recv()
        await ws.send(json.dumps({"type": "input_audio_buffer.append",
                                  "audio": base64.b64encode(bytes(300 * 1024)).decode()}))
        with pytest.raises(websockets.ConnectionClosedError) as closed:
            await ws.recv()
    assert closed.value.rcvd.code == 1009 and "262144" in closed.value.rcvd.reason
    big = mock.scenario([{"oversized_bytes": 400 * 1024}])
    headers["x-gateway-config"] = vendor_config(big)
    async with websockets.connect(f"{ws_url(gw.url)}/v1/realtime?model=m", additional_headers=headers) as ws:
        await ws.recv()
        await ws.send(json.dumps({"type": "response.create", "response": {"output_modalities": ["text"]}}))
        with pytest.raises(websockets.ConnectionClosedError) as closed:
            await raw_until(ws, "response.done")
    assert closed.value.rcvd.code == 1009


async def test_an_idle_session_is_closed_and_pings_are_answered(gw, mock):
    headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": vendor_config(mock.scenario())}
    async with websockets.connect(f"{ws_url(gw.url)}/v1/realtime?model=m", additional_headers=headers,
                                  ping_interval=None) as ws:
        await ws.recv()
        pong = await ws.ping()
        async with asyncio.timeout(5):
            await pong
        with pytest.raises(websockets.ConnectionClosed) as closed:
            async with asyncio.timeout(15):
                await ws.recv()
    assert closed.value.rcvd.code == 1001 and closed.value.rcvd.reason == "idle timeout"


async def test_a_client_that_vanishes_leaves_the_gateway_serving_the_next_session(gw, mock):
    base = mock.scenario([{"chunk_delay_ms": 50}])
    headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": vendor_config(base)}
    for _ in range(3):
        ws = await websockets.connect(f"{ws_url(gw.url)}/v1/realtime?model=m", additional_headers=headers)
        await ws.recv()
        await ws.send(json.dumps({"type": "response.create", "response": {"output_modalities": ["text"]}}))
        await ws.recv()
        ws.transport.abort()  # no close frame: the socket just goes
    # the gateway noticed each client leaving and closed the provider's socket
    await await_for(lambda: all("close" in r for r in mock.calls(base)["requests"][:3]), 20, 0.1)
    async with websockets.connect(f"{ws_url(gw.url)}/v1/realtime?model=m", additional_headers=headers) as ws:
        await ws.recv()
        await ws.send(json.dumps({"type": "response.create", "response": {"output_modalities": ["text"]}}))
        done = (await raw_until(ws, "response.done"))[-1]
        assert done["response"]["status"] == "completed"
    closes = [r.get("close") for r in mock.calls(base)["requests"][:3]]
    assert all(c is not None and c["by"] == "client" for c in closes), closes


async def test_cloudB_through_the_azure_client(gw, mock):
    base = mock.scenario()
    trace_id = trace()
    config = {"provider": "cloudB", "api_key": "azure-upstream", "custom_host": f"{base}/openai",
              "api_version": "2025-04-01-preview"}
    client = AsyncAzureOpenAI(azure_endpoint=gw.url, api_key="unused", api_version="2025-04-01-preview",
                              websocket_base_url=ws_url(gw.url) + "/v1", max_retries=0,
                              default_headers={"x-gateway-api-key": ADMIN_KEY, "x-gateway-trace-id": trace_id,
                                               "x-gateway-config": msgspec.json.encode(config).decode()})
    async with client.realtime.connect(model="my-deployment") as connection:
        created = await connection.recv()
        assert created.session.model == "my-deployment"
        await connection.response.create(response={"output_modalities": ["text"]})
        await until(connection, "response.done")
    upstream = mock.calls(base)["requests"][0]
    assert upstream["path"] == "/openai/realtime" and upstream["headers"]["api-key"] == "azure-upstream"
    assert "deployment=my-deployment" in upstream["query"] and "api-version=2025-04-01-preview" in upstream["query"]
    [item] = wait_logs(gw, trace_id)
    assert (item["provider"], item["model"], item["status"]) == ("cloudB", "my-deployment", 101)
    assert item["total_tokens"] > 0
    # the GA form when the config's api version is v1
    ga = mock.scenario()
    config.update(custom_host=f"{ga}/openai", api_version="v1")
    headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": msgspec.json.encode(config).decode()}
    async with websockets.connect(f"{ws_url(gw.url)}/v1/realtime?model=ga-deployment",
                                  additional_headers=headers) as ws:
        assert json.loads(await ws.recv())["session"]["model"] == "ga-deployment"
    assert mock.calls(ga)["requests"][0]["path"] == "/openai/v1/realtime"


async def test_the_client_closing_closes_the_provider_with_its_code(gw, mock):
    base = mock.scenario()
    headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": vendor_config(base)}
    async with websockets.connect(f"{ws_url(gw.url)}/v1/realtime?model=m", additional_headers=headers) as ws:
        await ws.recv()
        await ws.close(4000, "done here")
    await await_for(lambda: "close" in mock.calls(base)["requests"][0], 10, 0.05)
    assert mock.calls(base)["requests"][0]["close"] == {"code": 4000, "by": "client"}


async def test_a_provider_lost_mid_session_closes_the_client_with_1011(gw):
    """A provider whose connection drops without a close frame (a raw server that aborts its socket)."""

    async def provider(connection) -> None:
        await connection.send(json.dumps({"type": "session.created", "event_id": "e1", "session": {}}))
        await connection.recv()
        connection.transport.abort()

    async with websockets.serve(provider, "127.0.0.1", free_port()) as server:
        port = server.sockets[0].getsockname()[1]
        trace_id = trace()
        headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-trace-id": trace_id,
                   "x-gateway-config": vendor_config(f"http://127.0.0.1:{port}")}
        async with websockets.connect(f"{ws_url(gw.url)}/v1/realtime?model=m", additional_headers=headers) as ws:
            await ws.recv()
            await ws.send(json.dumps({"type": "response.create"}))
            with pytest.raises(websockets.ConnectionClosedError) as closed:
                async with asyncio.timeout(10):
                    await ws.recv()
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (1011, "upstream connection lost")
    [item] = wait_logs(gw, trace_id)
    assert item["status"] == 101 and "upstream connection lost" in item["error"]
    assert item["metadata"]["realtime_closed_by"] == "upstream"


async def test_stopping_the_gateway_ends_open_sessions_with_1001_and_logs_them(mock, tmp_path):
    server = start_gateway(data_dir=str(tmp_path))
    trace_id = trace()
    try:
        headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": vendor_config(mock.scenario()),
                   "x-gateway-trace-id": trace_id}
        async with websockets.connect(f"{ws_url(server.url)}/v1/realtime?model=m", additional_headers=headers) as ws:
            await ws.recv()
            server.proc.terminate()
            with pytest.raises(websockets.ConnectionClosed) as closed:
                async with asyncio.timeout(15):
                    await ws.recv()
        # Granian 2.8.9 drops upgraded connections as soon as a worker stops, so the 1001 the gateway sends at once
        # usually, not always, gets out first (docs/websockets.md#limits-and-close-codes)
        received = closed.value.rcvd
        assert received is None or (received.code, received.reason) == (1001, "gateway shutting down")
        assert await asyncio.to_thread(server.proc.wait, 20) == 0
    finally:
        server.stop()
    again = start_gateway(data_dir=str(tmp_path))  # the record was written before the worker ended
    try:
        [item] = wait_logs(again, trace_id)
        assert item["metadata"]["realtime_close_code"] == 1001 and item["metadata"]["realtime_closed_by"] == "gateway"
    finally:
        again.stop()


async def test_policies_admit_a_session_as_a_request_and_settle_its_usage(gw, mock):
    run = tag()
    rate_limit(gw, run, 1, unit="rpm")
    budget = usage_limit(gw, run, "tokens", 100_000)
    base = mock.scenario()
    headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": vendor_config(base),
               "x-gateway-metadata": json.dumps({"run": run})}
    async with websockets.connect(f"{ws_url(gw.url)}/v1/realtime?model=m", additional_headers=headers) as ws:
        await ws.recv()
        await ws.send(json.dumps({"type": "response.create", "response": {"output_modalities": ["text"]}}))
        used = (await raw_until(ws, "response.done"))[-1]["response"]["usage"]["total_tokens"]
        with pytest.raises(websockets.InvalidStatus) as refused:  # the second session in the minute
            async with websockets.connect(f"{ws_url(gw.url)}/v1/realtime?model=m", additional_headers=headers):
                pass
        assert refused.value.response.status_code == 429
        assert "rate limit policy" in json.loads(refused.value.response.body)["error"]["message"]
    await await_for(lambda: get(gw, USAGE, budget)["current_usage"] == used, 10, 0.1)


async def test_the_sdk_with_the_provider_key_as_its_api_key_and_the_gateway_key_in_a_header(gw, mock):
    base = mock.scenario()
    client = AsyncOpenAI(base_url=f"{gw.url}/v1", api_key="sk-provider-own", max_retries=0,
                         default_headers={"x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "vendorA",
                                          "x-gateway-custom-host": f"{base}/v1"})
    async with client.realtime.connect(model="gpt-realtime") as connection:
        assert (await connection.recv()).type == "session.created"
    assert mock.calls(base)["requests"][0]["headers"]["authorization"] == "Bearer sk-provider-own"


def _metric(text: str, name: str, **labels: str) -> float:
    want = [f'{k}="{v}"' for k, v in labels.items()]
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") and all(w in line for w in want):
            total += float(line.rsplit(" ", 1)[1])
    return total


async def test_metrics_count_sessions_opened_and_ended_and_their_messages(gw, mock):
    headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": vendor_config(mock.scenario())}
    async with websockets.connect(f"{ws_url(gw.url)}/v1/realtime?model=m", additional_headers=headers) as ws:
        await ws.recv()
        await ws.send(json.dumps({"type": "response.create", "response": {"output_modalities": ["text"]}}))
        await raw_until(ws, "response.done")

    def counted() -> str | None:
        text = api(gw, "GET", "/metrics").text
        ended = _metric(text, "gateway_realtime_sessions_total", event="ended", provider="vendorA")
        return text if ended >= 1 and _metric(text, "gateway_realtime_messages_total", direction="in") >= 1 else None

    text = await await_for(counted, 10, 0.2)
    opened = _metric(text, "gateway_realtime_sessions_total", event="opened", provider="vendorA")
    assert opened >= _metric(text, "gateway_realtime_sessions_total", event="ended", provider="vendorA") >= 1
    assert _metric(text, "gateway_realtime_bytes_total", direction="out", provider="vendorA") > 0


async def test_binary_frames_stay_binary_and_their_usage_counts(gw, mock):
    base = mock.scenario([{"binary_frames": True}])
    trace_id = trace()
    headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": vendor_config(base), "x-gateway-trace-id": trace_id}
    async with websockets.connect(f"{ws_url(gw.url)}/v1/realtime?model=m", additional_headers=headers) as ws:
        first = await ws.recv()
        assert isinstance(first, bytes) and json.loads(first)["type"] == "session.created"
        await ws.send(json.dumps({"type": "response.create", "response": {"output_modalities": ["text"]}}).encode())
        async with asyncio.timeout(20):
            while json.loads(frame := await ws.recv())["type"] != "response.done":
                assert isinstance(frame, bytes)
        usage = json.loads(frame)["response"]["usage"]
    assert mock.calls(base)["requests"][0]["frames"][0].startswith('{"type": "response.create"')
    [item] = wait_logs(gw, trace_id)
    assert item["total_tokens"] == usage["total_tokens"] > 0


async def test_the_ssrf_guard_refuses_the_upstream_and_redirects_are_not_followed(gw):
    headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": vendor_config("http://169.254.169.254")}
    with pytest.raises(websockets.InvalidStatus) as refused:
        async with websockets.connect(f"{ws_url(gw.url)}/v1/realtime?model=m", additional_headers=headers):
            pass
    assert refused.value.response.status_code == 403

    def redirect(connection, request):
        if not request.path.startswith("/v1/realtime"):
            return None
        response = connection.respond(302, "elsewhere\n")
        response.headers["Location"] = "/elsewhere/realtime?model=m"
        return response

    reached = []

    async def elsewhere(connection) -> None:  # pragma: no cover - a followed redirect would land here
        reached.append(connection.request.path)

    async with websockets.serve(elsewhere, "127.0.0.1", free_port(), process_request=redirect) as server:
        port = server.sockets[0].getsockname()[1]
        headers["x-gateway-config"] = vendor_config(f"http://127.0.0.1:{port}")
        with pytest.raises(websockets.InvalidStatus) as refused:
            async with websockets.connect(f"{ws_url(gw.url)}/v1/realtime?model=m", additional_headers=headers):
                pass
    assert refused.value.response.status_code == 502 and not reached
    assert "HTTP 302" in json.loads(refused.value.response.body)["error"]["message"]


async def test_a_spent_token_budget_refuses_the_next_session(gw, mock):
    run = tag()
    budget = usage_limit(gw, run, "tokens", 1)
    headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": vendor_config(mock.scenario()),
               "x-gateway-metadata": json.dumps({"run": run})}
    async with websockets.connect(f"{ws_url(gw.url)}/v1/realtime?model=m", additional_headers=headers) as ws:
        await ws.recv()
        await ws.send(json.dumps({"type": "response.create", "response": {"output_modalities": ["text"]}}))
        used = (await raw_until(ws, "response.done"))[-1]["response"]["usage"]["total_tokens"]
    await await_for(lambda: get(gw, USAGE, budget)["current_usage"] == used, 10, 0.1)
    with pytest.raises(websockets.InvalidStatus) as refused:
        async with websockets.connect(f"{ws_url(gw.url)}/v1/realtime?model=m", additional_headers=headers):
            pass
    assert refused.value.response.status_code == 429
    assert "usage limit policy" in json.loads(refused.value.response.body)["error"]["message"]


async def test_a_response_that_spends_the_budget_ends_the_session_with_an_error_event_and_1008(gw, mock):
    run = tag()
    budget = usage_limit(gw, run, "tokens", 1)
    trace_id = trace()
    headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": vendor_config(mock.scenario()),
               "x-gateway-metadata": json.dumps({"run": run}), "x-gateway-trace-id": trace_id}
    async with websockets.connect(f"{ws_url(gw.url)}/v1/realtime?model=m", additional_headers=headers) as ws:
        await ws.recv()
        await ws.send(json.dumps({"type": "response.create", "response": {"output_modalities": ["text"]}}))
        used = (await raw_until(ws, "response.done"))[-1]["response"]["usage"]["total_tokens"]
        error = json.loads(await ws.recv())
        assert error["type"] == "error" and error["error"]["code"] == "usage_limit_exceeded"
        assert "usage limit policy" in error["error"]["message"]
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await ws.recv()
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (1008, "usage limit exceeded")
    [item] = wait_logs(gw, trace_id)
    assert item["metadata"]["realtime_closed_by"] == "gateway" and "usage limit policy" in item["error"]
    await await_for(lambda: get(gw, USAGE, budget)["current_usage"] == used, 10, 0.1)
