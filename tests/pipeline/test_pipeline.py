"""Pipelines are put together from parts: no pipeline (or attempt) subclasses another, and a request's data stays on its
exchange, never in the ASGI scope (a door's reading of its credentials, a multipart form)."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import pkgutil
import uuid
from typing import Any

import msgspec

import gateway.pipeline
from gateway.pipeline.pipeline import Attempt, Pipeline
from gateway.upstream.mock import MockResponse, MockTransport
from tests.support.asgi import in_process
from tests.support.poll import await_for, wait_logs
from tests.support.servers import ADMIN_KEY

HOST = "http://127.0.0.1:9/v1"  # never connected to: the mock transport answers
CHAT_ANSWER = {"id": "c-1", "object": "chat.completion", "created": 1, "model": "m-1",
               "choices": [{"index": 0, "message": {"role": "assistant", "content": "hello"},
                            "finish_reason": "stop"}],
               "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}


def test_no_pipeline_or_attempt_subclasses_another():
    modules = [importlib.import_module(info.name)
               for info in pkgutil.walk_packages(gateway.pipeline.__path__, "gateway.pipeline.")]
    subclasses = [f"{module.__name__}.{name}" for module in modules
                  for name, cls in inspect.getmembers(module, inspect.isclass)
                  if (issubclass(cls, Pipeline) and cls is not Pipeline)
                  or (issubclass(cls, Attempt) and cls is not Attempt)]
    assert len(modules) > 10  # the walk found the package's modules
    assert subclasses == []


async def _call(app: Any, scope: dict[str, Any], body: bytes) -> tuple[int, bytes]:
    """One request straight to the ASGI app with ``scope``, as a server would make it."""
    sent: list[dict[str, Any]] = []
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return pending.pop(0) if pending else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])


async def test_a_door_reads_its_credential_forms_without_rewriting_the_scope():
    config = {"provider": "vendorA", "api_key": "sk-upstream", "custom_host": HOST}
    headers = [(b"x-api-key", ADMIN_KEY.encode()), (b"content-type", b"application/json"),
               (b"x-gateway-config", msgspec.json.encode(config)), (b"anthropic-version", b"2023-06-01")]
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "scheme": "http", "method": "POST",
             "path": "/v1/messages", "raw_path": b"/v1/messages", "query_string": b"", "root_path": "",
             "headers": list(headers), "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 80), "state": {}}
    body = msgspec.json.encode({"model": "m-1", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]})
    async with in_process({"GATEWAY_LOG_FILE": "off"}) as app:
        transport = MockTransport(lambda request: MockResponse(200, json=CHAT_ANSWER))
        app.runtime.exchange.transport = transport
        status, answer = await _call(app, scope, body)
    assert status == 200, answer
    assert msgspec.json.decode(answer)["content"][0]["text"] == "hello"  # the Messages dialect's answer
    assert transport.requests[0].headers["authorization"] == "Bearer sk-upstream"
    assert scope["headers"] == headers  # x-api-key read as the gateway key on the exchange, not in the scope
    assert not [key for key in scope if key.startswith("gateway.")]


def test_a_request_whose_handler_is_cancelled_still_leaves_its_record(gateway, mock):
    """The worker stopping (or a WebSocket session closing its in-process turns) cancels a handler mid-request: the
    request is still listed, as a 499 naming why, and its policy hold is not left to the sweep."""
    base = mock.scenario([{"delay_ms": 5000}])
    trace = f"dropped-{uuid.uuid4().hex}"
    config = {"provider": "vendorA", "api_key": "sk-upstream", "custom_host": base + "/v1"}
    headers = [(b"x-gateway-api-key", ADMIN_KEY.encode()), (b"content-type", b"application/json"),
               (b"x-gateway-config", msgspec.json.encode(config)), (b"x-gateway-trace-id", trace.encode())]
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "scheme": "http", "method": "POST",
             "path": "/v1/chat/completions", "raw_path": b"/v1/chat/completions", "query_string": b"",
             "root_path": "", "headers": headers, "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 80)}
    body = msgspec.json.encode({"model": "m-1", "messages": [{"role": "user", "content": "hi"}]})

    async def cancelled_midway() -> bool:
        handler = asyncio.ensure_future(_call(gateway.app, scope, body))
        await await_for(lambda: mock.calls(base)["calls"] >= 1, timeout=10.0)  # the provider has the request
        handler.cancel()
        try:
            await handler
        except asyncio.CancelledError:
            return True
        return False

    assert gateway.run(cancelled_midway(), timeout=30.0)
    [item] = wait_logs(gateway, trace)
    assert item["status"] == 499
    assert "cancelled before it ended" in item["error"]
