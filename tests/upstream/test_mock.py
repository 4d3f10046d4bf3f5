"""The test transport: a chat runs through the in-process app with every upstream call answered by a function, no
socket anywhere, and what the exchange does (forwarded headers, provider errors, masking, bounds, broken streams)
shows through it as through the aiohttp transport."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import msgspec
import pytest

from gateway.app import GatewayApp
from gateway.upstream.mock import MockResponse, MockTransport
from gateway.upstream.request import UpstreamRequest
from tests.support.asgi import AppClient, in_process
from tests.support.headers import headers_for

#: never connected to: the transport answers (the gateway only checks the address is allowed)
HOST = "http://127.0.0.1:9/v1"
CHAT = {"model": "m-1", "messages": [{"role": "user", "content": "hi"}]}
ANSWER = {"id": "c-1", "object": "chat.completion", "created": 1, "model": "m-1",
          "choices": [{"index": 0, "message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}],
          "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}


def chunk(content: str | None, finish: str | None = None) -> bytes:
    delta = {"content": content} if content is not None else {}
    doc = {"id": "c-1", "object": "chat.completion.chunk", "created": 1, "model": "m-1",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + msgspec.json.encode(doc) + b"\n\n"


@pytest.fixture
async def app() -> AsyncIterator[GatewayApp]:
    async with in_process({"GATEWAY_LOG_FILE": "off"}) as app:
        yield app


def answering(app: GatewayApp, answer: MockResponse | None = None, **options: int) -> MockTransport:
    """The app's upstream calls answered by ``answer`` (a copy each time: JSON ``ANSWER`` unless given)."""

    def handler(request: UpstreamRequest) -> MockResponse:
        if answer is None:
            return MockResponse(200, json=ANSWER)
        return MockResponse(answer.status, dict(answer.headers), pieces=list(answer._pieces), fail=answer.fail)

    transport = MockTransport(handler, **options)
    app.runtime.exchange.transport = transport
    return transport


async def test_a_chat_is_answered_by_the_mock_transport_without_a_socket(app):
    transport = answering(app)
    resp = await AppClient(app, lifespan=False).request(
        "POST", "/v1/chat/completions", CHAT, headers_for(HOST, token="sk-mock", trace_id="t-mock"))
    assert resp.status == 200, resp.text
    assert resp.json()["choices"][0]["message"]["content"] == "hello"
    assert resp.headers["x-gateway-provider"] == "vendorA"
    assert resp.headers["x-gateway-trace-id"] == "t-mock"
    sent = transport.requests[0]
    assert sent.url == f"{HOST}/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-mock"
    assert msgspec.json.decode(sent.body)["messages"] == CHAT["messages"]
    assert transport.responses[0].released


async def test_the_config_forwards_client_headers_through_the_exchange(app):
    transport = answering(app)
    headers = headers_for(HOST, **{"x-team": "blue", "x-gateway-forward-headers": "x-team"})
    resp = await AppClient(app, lifespan=False).request("POST", "/v1/chat/completions", CHAT, headers)
    assert resp.status == 200, resp.text
    assert transport.requests[0].headers["x-team"] == "blue"
    assert "x-gateway-api-key" not in transport.requests[0].headers


async def test_a_stream_is_relayed_event_by_event_from_the_mock(app):
    pieces = [chunk("hel"), chunk("lo"), chunk(None, "stop"), b"data: [DONE]\n\n"]
    answering(app, MockResponse(200, {"content-type": "text/event-stream"}, pieces=pieces))
    client = AppClient(app, lifespan=False)
    async with client.stream("POST", "/v1/chat/completions", {**CHAT, "stream": True}, headers_for(HOST)) as answer:
        assert answer.status == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        body = (await answer.read()).decode()
    assert '"hel"' in body and '"lo"' in body
    assert body.rstrip().endswith("data: [DONE]")


async def test_a_provider_error_keeps_its_status_and_masks_the_echoed_key(app):
    echoed = {"error": {"message": "Incorrect API key provided: sk-secret-123456", "type": "invalid_request_error"}}
    transport = answering(app, MockResponse(401, json=echoed))
    resp = await AppClient(app, lifespan=False).request(
        "POST", "/v1/chat/completions", CHAT, headers_for(HOST, token="sk-secret-123456"))
    assert resp.status == 401, resp.text
    assert "sk-secret-123456" not in resp.text
    assert resp.headers["x-gateway-provider"] == "vendorA"
    assert transport.responses[0].released  # read whole, back to the pool


async def test_an_answer_over_the_bound_is_a_502_naming_the_limit(app):
    transport = answering(app, MockResponse(200, {"content-type": "application/json"}, pieces=[b"{" + b" " * 600]),
                          max_answer_bytes=512)
    resp = await AppClient(app, lifespan=False).request("POST", "/v1/chat/completions", CHAT, headers_for(HOST))
    assert resp.status == 502, resp.text
    assert resp.json()["error"]["code"] == "upstream_answer_too_large"
    assert transport.responses[0].closed  # never back to the pool


async def test_a_stream_that_breaks_after_its_first_event_ends_with_an_error_event(app):
    answering(app, MockResponse(200, {"content-type": "text/event-stream"}, pieces=[chunk("hel")],
                                fail=ConnectionResetError(104, "reset")))
    client = AppClient(app, lifespan=False)
    async with client.stream("POST", "/v1/chat/completions", {**CHAT, "stream": True}, headers_for(HOST)) as answer:
        assert answer.status == 200
        body = (await answer.read()).decode()
    assert '"hel"' in body
    assert "broke off" in body and "reset the connection" in body
    assert body.rstrip().endswith("data: [DONE]")


async def test_a_handler_may_wait_as_a_slow_upstream_would(app):
    async def slow(request: UpstreamRequest) -> MockResponse:
        await asyncio.sleep(0.01)
        return MockResponse(200, json=ANSWER)

    app.runtime.exchange.transport = MockTransport(slow)
    resp = await AppClient(app, lifespan=False).request("POST", "/v1/chat/completions", CHAT, headers_for(HOST))
    assert resp.status == 200, resp.text


async def test_the_models_list_is_asked_through_the_swapped_transport(app):
    """``GET /v1/models`` asks a slug's provider through the exchange's transport too: the mock answers it."""

    def handler(request: UpstreamRequest) -> MockResponse:
        assert request.method == "GET" and request.url == f"{HOST}/models"
        return MockResponse(200, json={"object": "list", "data": [{"id": "m-listed", "object": "model",
                                                                    "created": 1, "owned_by": "x"}]})

    transport = MockTransport(handler)
    app.runtime.exchange.transport = transport
    client = AppClient(app, lifespan=False)
    key = headers_for(HOST)["x-gateway-api-key"]
    slug = {"slug": "listed", "provider": "vendorA", "api_key": "sk-listed", "custom_host": HOST}
    created = await client.request("POST", "/v1/providers", slug, {"x-gateway-api-key": key})
    assert created.status == 201, created.text
    resp = await client.request("GET", "/v1/models", b"", {"x-gateway-api-key": key})
    assert resp.status == 200, resp.text
    assert [(m["slug"], m["id"]) for m in resp.json()["data"]] == [("listed", "m-listed")]
    assert transport.requests[0].headers["authorization"] == "Bearer sk-listed"
    assert transport.responses[0].released
