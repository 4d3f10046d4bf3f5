"""Helpers for the agent gateway's end-to-end tests (``tests/api/test_agents*.py``): a workspace of a test's own with
its admin key (``Tenant``: it registers agents with ``POST /v1/agents`` and reads its logs), the official A2A SDK's
client pointed at the gateway with a gateway key (``connect``), the same call without the SDK (``rpc``), and readers
of what came back.

The SDK (a2a-sdk 1.3.0) resolves ``{base}/.well-known/agent-card.json`` and posts to the JSON-RPC interface's
``url`` the card names, with ``A2A-Version: 1.0``; ``connect`` gives it the gateway's ``/v1/agents/<slug>`` as the
base and the gateway key on every request (as a default header of its HTTP client, or through the SDK's own
``AuthInterceptor`` reading the card's security schemes).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from a2a.client import (
    AuthInterceptor,
    Client,
    ClientCallContext,
    ClientConfig,
    InMemoryContextCredentialStore,
    create_client,
)
from a2a.helpers.proto_helpers import get_artifact_text, new_text_message
from a2a.types.a2a_pb2 import Role, SendMessageConfiguration, SendMessageRequest, StreamResponse, Task

from tests.support import controlplane
from tests.support.poll import wait_for
from tests.support.servers import Server


class Tenant(controlplane.Tenant):
    """A workspace of its own with its admin key (``key``), which holds ``agents.invoke`` as every admin key does."""

    records = "/v1/agents"

    def wait_logs(self, count: int, provider: str) -> list[dict[str, Any]]:
        """The workspace's records of ``provider`` (``agent:<slug>``) once there are ``count`` (newest first)."""

        def listed() -> Any:
            answer = self.admin("GET", f"/v1/logs?limit=100&provider={provider}")
            assert answer.status == 200, answer.text
            data = answer.json()["data"]
            return data if len(data) >= count else None

        return wait_for(listed, 8.0, 0.1)


@asynccontextmanager
async def connect(gw: Server, slug: str, key: str, streaming: bool = True,
                  interceptor: bool = False) -> AsyncIterator[Client]:
    """The SDK's client for the agent ``slug`` through the gateway, with ``key``: as a default header of its HTTP
    client, or (``interceptor``) sent by the SDK's ``AuthInterceptor`` for the card's ``gatewayKey`` scheme (the
    card itself read with the key in the resolver's headers); with ``interceptor``, calls need ``session()``."""
    headers = {} if interceptor else {"x-gateway-api-key": key}
    async with httpx.AsyncClient(headers=headers, timeout=60) as http:
        config = ClientConfig(httpx_client=http, streaming=streaming)
        if interceptor:
            store = InMemoryContextCredentialStore()
            await store.set_credentials("s1", "gatewayKey", key)
            client = await create_client(f"{gw.url}/v1/agents/{slug}", config, [AuthInterceptor(store)],
                                         resolver_http_kwargs={"headers": {"x-gateway-api-key": key}})
        else:
            client = await create_client(f"{gw.url}/v1/agents/{slug}", config)
        try:
            yield client
        finally:
            await client.close()


def session() -> ClientCallContext:
    """The call context whose session the ``interceptor`` client's credentials are kept under."""
    return ClientCallContext(state={"sessionId": "s1"})


def ask(text: str, return_immediately: bool = False) -> SendMessageRequest:
    configuration = SendMessageConfiguration(return_immediately=return_immediately)
    return SendMessageRequest(message=new_text_message(text, role=Role.ROLE_USER), configuration=configuration)


async def events(client: Client, text: str, context: ClientCallContext | None = None) -> list[StreamResponse]:
    """Every event of a ``send_message`` (a unary answer is one event)."""
    return [event async for event in client.send_message(ask(text), context=context)]


async def final_task(client: Client, text: str, context: ClientCallContext | None = None) -> Task:
    """The task a unary ``send_message`` answered with."""
    [event] = await events(client, text, context)
    assert event.HasField("task"), event
    return event.task


def answer_text(task: Task) -> str:
    return "".join(get_artifact_text(artifact, "") for artifact in task.artifacts)


def streamed_text(streamed: list[StreamResponse]) -> str:
    """The answer a stream's artifact updates carry, joined."""
    return "".join(part.text for event in streamed if event.HasField("artifact_update")
                   for part in event.artifact_update.artifact.parts)


async def rpc(gw: Server, slug: str, body: Any, key: str | None = None, **headers: str) -> httpx.Response:
    """One JSON-RPC call to the agent's gateway endpoint without the SDK (``A2A-Version: 1.0`` unless given)."""
    sent = {"content-type": "application/json", "a2a-version": "1.0", **headers}
    if key is not None:
        sent["x-gateway-api-key"] = key
    async with httpx.AsyncClient(timeout=60) as http:
        if isinstance(body, bytes):
            return await http.post(f"{gw.url}/v1/agents/{slug}", content=body, headers=sent)
        return await http.post(f"{gw.url}/v1/agents/{slug}", json=body, headers=sent)


def send_body(text: str, id: Any = "r1", method: str = "SendMessage") -> dict[str, Any]:
    """A raw ``SendMessage`` (1.0) or ``message/send`` (0.3) request sending ``text``."""
    if "/" in method:
        message = {"kind": "message", "messageId": "m1", "role": "user", "parts": [{"kind": "text", "text": text}]}
    else:
        message = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": text}]}
    return {"jsonrpc": "2.0", "id": id, "method": method, "params": {"message": message}}
