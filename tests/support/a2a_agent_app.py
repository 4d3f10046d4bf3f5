"""The A2A test agent's process (``python -m tests.support.a2a_agent_app --name alpha --port P ...``): an agent built
with the official SDK (a2a-sdk 1.3.0: ``DefaultRequestHandler``, the JSON-RPC and agent card Starlette routes) served
by uvicorn on 127.0.0.1 behind a harness that records the requests it receives and refuses a missing header.

What the agent does with a message's text (its first text part):
- ``message ...``: answers one ``Message`` (role agent) ``"<name>: ..."`` and no task;
- ``wait ...``: a task that stays ``TASK_STATE_WORKING`` until cancelled (``CancelTask``), at most ``WAIT_S``;
- anything else: a task (submitted) whose status goes working, then completed, with one artifact ``answer`` sent as
  ``STREAM_PARTS`` artifact updates (append), each after a status update ``step <n>``: a stream shows them in order,
  a unary answer the finished task (artifact text ``"<name>: <text>"``).

The card (``GET /.well-known/agent-card.json``, as the SDK serves it: the 1.0 fields with the 0.3 ones merged in)
declares a JSON-RPC interface at ``{base}/a2a`` (protocol 1.0), an HTTP+JSON interface at ``{base}/rest`` that is not
served (a gateway must drop it), streaming, one skill and an API-key security scheme (header ``x-agent-key``). The
JSON-RPC route takes the 0.3 method names too (``enable_v0_3_compat``: ``message/send``, ``tasks/get``, ...).

``/control`` (GET) answers ``{"name", "received": [...]}``: the last requests to ``/a2a`` (method, path, headers
lower-cased, decoded body), so a test sees which headers reached the agent; ``POST /control`` clears them.

Facts of the SDK relied on (read in its source): the JSON-RPC methods of 1.0 are ``SendMessage``,
``SendStreamingMessage``, ``GetTask``, ``CancelTask``, ``ListTasks``, ``SubscribeToTask``, ...; the server checks the
``A2A-Version`` header (missing means 0.3, which the 1.0 methods refuse with -32009 VersionNotSupported); a stream
is ``text/event-stream`` whose events carry one JSON-RPC response each in ``data`` (an error event is named
``error``).
"""

from __future__ import annotations

import argparse
import asyncio
from collections import deque
from typing import Any

import uvicorn
from a2a.helpers.proto_helpers import get_message_text, new_task_from_user_message, new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events.event_queue_v2 import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    APIKeySecurityScheme,
    Role,
    SecurityRequirement,
    SecurityScheme,
    StringList,
    TaskState,
)
from starlette.applications import Starlette

from tests.support.app_harness import (
    Scope,
    decoded_body,
    read_body,
    replay,
    request_headers,
    required_header,
    send_json,
)

#: how many artifact updates a task's answer is sent in
STREAM_PARTS = 3
#: the longest a ``wait`` task waits for its cancel
WAIT_S = 60.0
RECEIVED_KEPT = 200
RPC_PATH = "/a2a"
AGENT_KEY_HEADER = "x-agent-key"


class TestExecutor(AgentExecutor):
    """The agent's behaviour (see the module docstring)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.waiting: dict[str, asyncio.Event] = {}

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        text = get_message_text(message) if message is not None else ""
        if text.startswith("message"):
            await event_queue.enqueue_event(new_text_message(f"{self.name}: {text}", context_id=context.context_id,
                                                             role=Role.ROLE_AGENT))
            return
        task_id, context_id = context.task_id or "", context.context_id or ""
        if context.current_task is None and message is not None:
            task = new_task_from_user_message(message)
            task.id, task.context_id = task_id, context_id
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task_id, context_id)
        await updater.start_work()
        if text.startswith("wait"):
            cancelled = self.waiting.setdefault(task_id, asyncio.Event())
            try:
                async with asyncio.timeout(WAIT_S):
                    await cancelled.wait()
            except TimeoutError:
                await updater.failed()
            return
        answer = f"{self.name}: {text}"
        size = max(1, -(-len(answer) // STREAM_PARTS))
        pieces = [answer[i:i + size] for i in range(0, len(answer), size)]
        for n, piece in enumerate(pieces, 1):
            await updater.update_status(TaskState.TASK_STATE_WORKING,
                                        updater.new_agent_message([new_text_part(f"step {n}")]))
            await updater.add_artifact([new_text_part(piece)], artifact_id="answer", name="answer",
                                       append=n > 1, last_chunk=n == len(pieces))
            await asyncio.sleep(0.01)
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id = context.task_id or ""
        updater = TaskUpdater(event_queue, task_id, context.context_id or "")
        await updater.cancel()
        self.waiting.pop(task_id, asyncio.Event()).set()


def build_card(name: str, base: str) -> AgentCard:
    return AgentCard(
        name=name,
        description=f"The gateway tests' A2A agent {name}",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=f"{base}{RPC_PATH}", protocol_binding="JSONRPC", protocol_version="1.0"),
            AgentInterface(url=f"{base}/rest", protocol_binding="HTTP+JSON", protocol_version="1.0"),
        ],
        capabilities=AgentCapabilities(streaming=True),
        security_schemes={"agentKey": SecurityScheme(
            api_key_security_scheme=APIKeySecurityScheme(location="header", name=AGENT_KEY_HEADER))},
        security_requirements=[SecurityRequirement(schemes={"agentKey": StringList(list=[])})],
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="Echo", description="Answers the text it is sent", tags=["test"])],
    )


class Harness:
    """The ASGI app in front of the SDK's: ``/control``, the request record and the header check."""

    def __init__(self, name: str, base: str, require_header: tuple[str, str] | None) -> None:
        self.name = name
        card = build_card(name, base)
        handler = DefaultRequestHandler(agent_executor=TestExecutor(name), task_store=InMemoryTaskStore(),
                                        agent_card=card)
        self.inner = Starlette(routes=[*create_agent_card_routes(card),
                                       *create_jsonrpc_routes(handler, RPC_PATH, enable_v0_3_compat=True)])
        self.require_header = (require_header[0].lower().encode("latin-1"), require_header[1].encode("latin-1")) \
            if require_header else None
        self.received: deque[dict[str, Any]] = deque(maxlen=RECEIVED_KEPT)

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.inner(scope, receive, send)
            return
        if scope["path"] == "/control":
            if scope["method"] == "POST":
                self.received.clear()
            await send_json(send, 200, {"name": self.name, "received": list(self.received)})
            return
        if scope["path"] == RPC_PATH:
            body = await read_body(receive)
            self.received.append(received(scope, body))
            if self.require_header and self.require_header not in scope["headers"]:
                await send_json(send, 401, {"error": "missing or wrong agent key"})
                return
            receive = replay(body, receive)
        await self.inner(scope, receive, send)


def received(scope: Scope, body: bytes) -> dict[str, Any]:
    return {"method": scope["method"], "path": scope["path"], "headers": request_headers(scope),
            "body": decoded_body(body)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--require-header", help="NAME:VALUE the JSON-RPC route answers 401 without")
    args = parser.parse_args()
    app = Harness(args.name, f"http://127.0.0.1:{args.port}", required_header(args.require_header))
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", lifespan="off",
                timeout_graceful_shutdown=1)


if __name__ == "__main__":
    main()
