"""The MCP test server's process (``python -m tests.support.mcp_server_app --name alpha --port P ...``): an SDK
``MCPServer`` with the test tools, served by uvicorn on 127.0.0.1 behind a harness that records requests, answers
the control API, refuses a missing header and, for ``--era legacy``, the 2026-07-28 envelope.

The facts of the SDK (mcp 2.3.0) this relies on:
- The stateful ``streamable_http_app()`` routes by the ``MCP-Protocol-Version`` header alone: a request carrying a
  version that is not a handshake-era one (2026-07-28) goes to the modern, stateless path (``server/discover``,
  per-request ``_meta``); a request without it, or with a handshake version, to the initialize + ``Mcp-Session-Id``
  path. So a legacy-only server is made by answering the modern requests here before the SDK sees them.
- A legacy server answers what it cannot serve as the 2025 SDKs do: HTTP 400 with a JSON-RPC error body
  (``-32600``). The client's ``mode="auto"`` probe falls back to ``initialize`` on any JSON-RPC error except
  ``-32022`` naming only modern versions, and it reads the error out of a 4xx JSON body.
- A missing credential is answered as the SDK's own bearer middleware answers it: 401, ``WWW-Authenticate: Bearer
  error="invalid_token", ...`` and a JSON body ``{"error", "error_description"}`` (no JSON-RPC).
- A tool raising ``ToolError`` becomes a result with ``isError: true``, not a JSON-RPC error.
"""

from __future__ import annotations

import argparse
import asyncio
from collections import deque
from typing import Any

import msgspec
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from tests.support.app_harness import (
    Scope,
    decoded_body,
    read_body,
    replay,
    request_headers,
    required_header,
    send_json,
)
from tests.support.mcp_control import (
    AddTool,
    ClearReceived,
    ControlOp,
    ReadReceived,
    ReceivedRequest,
    ReceivedRequests,
    RemoveTool,
    ServerState,
    SetDescription,
    SlowNext,
)

#: the largest text ``big`` returns (a test of huge answers uses the misbehaving server's 50 MB instead)
BIG_LIMIT = 64 << 20
RECEIVED_KEPT = 200
_CONTROL_DECODER = msgspec.json.Decoder(ControlOp)


def build_server(name: str) -> MCPServer:
    """The SDK server with every test tool, one resource and one prompt."""
    server = MCPServer(name, log_level="WARNING")

    @server.tool()
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    async def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool()
    async def slow(n: int, delay: float, ctx: Context) -> str:
        """Report progress n times, delay seconds apart, then answer "done"."""
        for step in range(1, n + 1):
            await ctx.report_progress(step, n, f"step {step} of {n}")
            await asyncio.sleep(delay)
        return "done"

    @server.tool()
    async def big(size: int) -> str:
        """Return a text of size bytes."""
        if not 0 <= size <= BIG_LIMIT:
            raise ToolError(f"size must be between 0 and {BIG_LIMIT}")
        return "x" * size

    @server.tool()
    async def fail() -> str:
        """Always fail (a tool error result)."""
        raise ToolError(f"fail on {name} always fails")

    @server.tool()
    async def whoami() -> str:
        """Name the server that answered."""
        return name

    @server.resource(f"resource://{name}/readme", mime_type="text/plain")
    def readme() -> str:
        """What this test server is."""
        return f"{name}: an MCP test server"

    @server.prompt()
    def greet(name: str) -> str:
        """Greet someone."""
        return f"Hello, {name}!"

    return server


class Harness:
    """The ASGI app in front of the SDK's: ``/control``, the request record, the header check, the legacy refusal
    and the held requests; everything else is the SDK's."""

    def __init__(self, server: MCPServer, era: str, require_header: tuple[str, str] | None,
                 json_response: bool) -> None:
        self.server = server
        self.era = era
        self.require_header = (require_header[0].lower().encode("latin-1"), require_header[1].encode("latin-1")) \
            if require_header else None
        self.inner = server.streamable_http_app(json_response=json_response)
        self.received: deque[ReceivedRequest] = deque(maxlen=RECEIVED_KEPT)
        self.slow_left = 0
        self.slow_seconds = 0.0
        self.slow_method: str | None = None

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.inner(scope, receive, send)
        elif scope["path"] == "/control":
            await self.control(scope, receive, send)
        else:
            await self.mcp(scope, receive, send)

    async def mcp(self, scope: Scope, receive: Any, send: Any) -> None:
        body = await read_body(receive)
        record = received(scope, body)
        self.received.append(record)
        if self.require_header and self.require_header not in scope["headers"]:
            await refuse_credentials(send)
            return
        if self.era == "legacy" and is_modern(record):
            await refuse_modern(send, record)
            return
        if self.slow_left and scope["method"] == "POST" and self.slow_method in (None, record.jsonrpc_method):
            self.slow_left -= 1
            await asyncio.sleep(self.slow_seconds)
        await self.inner(scope, replay(body, receive), send)

    async def control(self, scope: Scope, receive: Any, send: Any) -> None:
        body = await read_body(receive)
        if scope["method"] == "GET":
            await send_json(send, 200, ServerState(self.server.name, self.era, self.tool_names()))
            return
        try:
            answer = self.apply(_CONTROL_DECODER.decode(body))
        except (msgspec.ValidationError, msgspec.DecodeError, ValueError) as error:
            await send_json(send, 400, {"error": {"message": f"control: {error}"}})
            return
        await send_json(send, 200, answer)

    def apply(self, op: ControlOp) -> Any:
        if isinstance(op, SetDescription):
            function = self.tool_function(op.tool)
            self.server.remove_tool(op.tool)
            self.server.add_tool(function, name=op.tool, description=op.description)
        elif isinstance(op, AddTool):
            if op.tool in self.tool_names():
                raise ValueError(f"`tool`: {op.tool!r} exists")
            self.server.add_tool(added_tool(op.tool), name=op.tool, description=op.description)
        elif isinstance(op, RemoveTool):
            self.tool_function(op.tool)
            self.server.remove_tool(op.tool)
        elif isinstance(op, SlowNext):
            self.slow_left, self.slow_seconds, self.slow_method = op.count, op.seconds, op.method
        elif isinstance(op, ReadReceived):
            return ReceivedRequests(list(self.received)[-op.last:] if op.last > 0 else [])
        elif isinstance(op, ClearReceived):
            self.received.clear()
        return {"ok": True}

    def tool_names(self) -> list[str]:
        return [tool.name for tool in self.server._tool_manager.list_tools()]  # the SDK has no public synchronous list

    def tool_function(self, name: str) -> Any:
        tool = self.server._tool_manager.get_tool(name)  # the function behind a tool
        if tool is None:
            raise ValueError(f"`tool`: no tool {name!r}")
        return tool.fn


def added_tool(tool: str) -> Any:
    async def added(text: str) -> str:
        return f"{tool}: {text}"

    return added


def is_modern(record: ReceivedRequest) -> bool:
    version = record.headers.get("mcp-protocol-version")
    return (version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS) \
        or record.jsonrpc_method == "server/discover"


def received(scope: Scope, body: bytes) -> ReceivedRequest:
    return ReceivedRequest(scope["method"], scope["path"], request_headers(scope), decoded_body(body))


async def refuse_credentials(send: Any) -> None:
    challenge = b'Bearer error="invalid_token", error_description="Authentication required"'
    await send_json(send, 401, {"error": "invalid_token", "error_description": "Authentication required"},
                    [(b"www-authenticate", challenge)])


async def refuse_modern(send: Any, record: ReceivedRequest) -> None:
    request_id = record.body.get("id") if isinstance(record.body, dict) else None
    version = record.headers.get("mcp-protocol-version", "(none)")
    message = f"Bad Request: Unsupported protocol version: {version}"
    await send_json(send, 400, {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32600, "message": message}})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--era", choices=("both", "legacy"), default="both")
    parser.add_argument("--require-header", help="NAME:VALUE the server answers 401 without")
    parser.add_argument("--json-response", action="store_true")
    args = parser.parse_args()
    app = Harness(build_server(args.name), args.era, required_header(args.require_header), args.json_response)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", lifespan="on",
                timeout_graceful_shutdown=1)


if __name__ == "__main__":
    main()
