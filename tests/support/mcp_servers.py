"""Real MCP servers for the MCP gateway's tests, on loopback: SDK servers in subprocesses of their own
(``start_mcp_server``, or ``mcp_servers`` for several at once) and raw servers that misbehave
(``start_misbehaving_server``).

An SDK server (``tests/support/mcp_server_app.py``, the official ``mcp`` SDK's ``MCPServer`` served by uvicorn) has
the tools ``add(a, b)``, ``echo(text)``, ``slow(n, delay)`` (n progress notifications, then "done"), ``big(size)``
(a text of ``size`` bytes), ``fail()`` (a result with ``isError``) and ``whoami()`` (the server's name), the
resource ``resource://<name>/readme`` and the prompt ``greet(name)``; two servers may share tool names. Its
``/control`` route (``tests/support/mcp_control.py``) changes it at runtime and reads back what it received (a
changed description re-registers the tool: same name and schema, now last in the list).

What the SDK's client (mcp 2.3.0) sends and the server answers, per protocol era (seen on the wire):
- 2026-07-28 ("auto" mode, modern): no handshake and no session. The first POST is ``server/discover``; every POST
  carries ``MCP-Protocol-Version: 2026-07-28`` and ``Mcp-Method`` (and ``Mcp-Name`` for ``tools/call``, the tool's
  name) headers, and the version, client info and capabilities again in ``params._meta`` under
  ``io.modelcontextprotocol/...`` keys. ``Accept: application/json, text/event-stream``. A plain result comes back
  as ``application/json``; a call that reports progress as ``text/event-stream``: ``notifications/progress``
  events (``progressToken`` = the request id the client put in ``_meta``), then the result event.
- 2025-11-25 ("legacy" mode, or "auto" falling back): POST ``initialize`` without version header; the answer
  (an SSE stream by default) carries ``Mcp-Session-Id``; then ``notifications/initialized`` (answered 202) and every
  later request with ``Mcp-Session-Id`` and ``MCP-Protocol-Version: 2025-11-25``, a GET opening the server's
  stream, a DELETE ending the session on close. Answers are SSE unless the server runs with ``json_response``.
- Era choice: the SDK's server routes on the version header only; the "auto" client falls back to ``initialize``
  on any JSON-RPC error to ``server/discover`` (a 4xx JSON body counts), except -32022 naming modern versions only.
  ``era="legacy"`` answers a modern request 400 with a -32600 JSON-RPC error, as a 2025 server does.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any, Literal, Self

import msgspec

from tests.support.app_process import AppProcess
from tests.support.http import request
from tests.support.mcp_control import ReceivedRequest, ReceivedRequests, ServerState

Era = Literal["both", "legacy"]


class McpTestServer(AppProcess):
    """A running SDK server: ``.url`` (the ``/mcp`` endpoint), ``.base``, the control API, ``.stop()``; also
    ``with start_mcp_server("alpha") as server:``."""

    what = "MCP test server"

    def __init__(self, name: str, args: list[str]) -> None:
        super().__init__("tests.support.mcp_server_app", name, args)
        self.url = f"{self.base}/mcp"

    def control(self, op: dict[str, Any]) -> Any:
        answer = request("POST", f"{self.base}/control", op, timeout=10)
        if answer.status != 200:
            raise AssertionError(f"control {op} answered {answer.status}: {answer.text}")
        return answer.json()

    def state(self) -> ServerState:
        answer = request("GET", f"{self.base}/control", timeout=10)
        return msgspec.json.decode(answer.body, type=ServerState)

    def set_description(self, tool: str, description: str) -> None:
        self.control({"op": "set_description", "tool": tool, "description": description})

    def add_tool(self, tool: str, description: str = "An added tool.") -> None:
        """Add ``tool(text: str) -> str`` answering ``"<tool>: <text>"``."""
        self.control({"op": "add_tool", "tool": tool, "description": description})

    def remove_tool(self, tool: str) -> None:
        self.control({"op": "remove_tool", "tool": tool})

    def slow_next(self, count: int, seconds: float, method: str | None = None) -> None:
        """Hold the next ``count`` POSTs (of JSON-RPC ``method`` only, when given) ``seconds`` each."""
        self.control({"op": "slow_next", "count": count, "seconds": seconds, "method": method})

    def received(self, last: int = 20) -> list[ReceivedRequest]:
        """The last ``last`` requests to ``/mcp`` (headers lower-cased, body decoded), oldest first."""
        answer = self.control({"op": "received", "last": last})
        return msgspec.convert(answer, ReceivedRequests).requests

    def clear_received(self) -> None:
        self.control({"op": "clear_received"})


def start_mcp_server(name: str, *, era: Era = "both", require_header: tuple[str, str] | None = None,
                     json_response: bool = False, timeout: float = 30.0) -> McpTestServer:
    """Start an SDK server named ``name`` and wait until it answers. ``era="both"`` serves 2026-07-28 and
    2025-11-25 (the SDK's default); ``"legacy"`` only the initialize handshake. ``require_header=(name, value)``:
    401 without it. ``json_response``: legacy answers as JSON, not SSE."""
    return _ready(_launch(name, era, require_header, json_response), timeout)


@contextmanager
def mcp_servers(*names: str, era: Era = "both", require_header: tuple[str, str] | None = None,
                json_response: bool = False, timeout: float = 30.0) -> Iterator[list[McpTestServer]]:
    """``with mcp_servers("alpha", "beta") as (alpha, beta):`` several servers of the same options, started side by
    side (one start's wait covers the others') and all stopped at the end."""
    launched = [_launch(name, era, require_header, json_response) for name in names]
    try:
        yield [_ready(server, timeout) for server in launched]
    finally:
        for server in launched:
            server.stop()


def _launch(name: str, era: Era, require_header: tuple[str, str] | None, json_response: bool) -> McpTestServer:
    args = ["--era", era]
    if require_header:
        args += ["--require-header", f"{require_header[0]}:{require_header[1]}"]
    if json_response:
        args.append("--json-response")
    return McpTestServer(name, args)


def _ready(server: McpTestServer, timeout: float) -> McpTestServer:
    return server.ready(server.state, timeout)


# --- servers that misbehave -------------------------------------------------------------------------------------

Mode = Literal["slow", "reset", "invalid", "garbage", "huge", "html"]
MODES: tuple[Mode, ...] = ("slow", "reset", "invalid", "garbage", "huge", "html")
HUGE_BYTES = 50 << 20
_CHUNK = 1 << 16
_HTML = b"<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1></body></html>"


class MisbehavingServer:
    """A raw HTTP/1.1 server on 127.0.0.1 (no SDK) in an event loop thread of its own, answering every request the
    same wrong way: ``"slow"`` never answers; ``"reset"`` reads the request and resets the connection (RST);
    ``"invalid"`` answers 200 JSON that is not JSON-RPC; ``"garbage"`` 200 ``application/json`` that is not JSON;
    ``"huge"`` 200 ``application/json``, chunked, a JSON-RPC result of ``HUGE_BYTES`` (50 MB); ``"html"`` 502 with an
    HTML page. ``requests`` counts the requests read."""

    def __init__(self, mode: Mode, huge_bytes: int = HUGE_BYTES) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
        self.mode = mode
        self.huge_bytes = huge_bytes
        self.requests = 0
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"mcp-{mode}", daemon=True)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    def start(self) -> Self:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self._loop).result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        if not self._thread.is_alive():
            return

        async def close() -> None:
            assert self._server is not None
            self._server.close()
            for writer in self._writers:
                writer.transport.abort()
            serving = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in serving:
                task.cancel()
            if serving:
                await asyncio.wait(serving, timeout=5)

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.stop()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:
                body = await _read_request(reader)
                if body is None:
                    return
                self.requests += 1
                if self.mode == "slow":
                    await asyncio.Event().wait()  # until stop() cancels it
                if self.mode == "reset":
                    sock = writer.get_extra_info("socket")
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with RST
                    writer.transport.abort()
                    return
                await self._answer(writer, body)
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _answer(self, writer: asyncio.StreamWriter, body: bytes) -> None:
        if self.mode == "invalid":
            writer.write(_response(200, b'{"hello": "this is not JSON-RPC"}'))
        elif self.mode == "garbage":
            writer.write(_response(200, b"<<not json at all"))
        elif self.mode == "html":
            writer.write(_response(502, _HTML, "text/html; charset=utf-8"))
        else:
            await self._huge(writer, _request_id(body))
            return
        await writer.drain()

    async def _huge(self, writer: asyncio.StreamWriter, request_id: Any) -> None:
        head = json.dumps({"jsonrpc": "2.0", "id": request_id})[:-1].encode()
        prefix = head + b', "result": {"content": [{"type": "text", "text": "'
        suffix = b'"}], "isError": false}}'
        filler = max(0, self.huge_bytes - len(prefix) - len(suffix))
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n")
        writer.write(_chunk(prefix))
        block = b"x" * _CHUNK
        while filler > 0:
            writer.write(_chunk(block[:filler]))
            filler -= _CHUNK
            await writer.drain()
        writer.write(_chunk(suffix) + b"0\r\n\r\n")
        await writer.drain()


def start_misbehaving_server(mode: Mode, huge_bytes: int = HUGE_BYTES) -> MisbehavingServer:
    """A started ``MisbehavingServer`` (``.url``, ``.stop()``; also a context manager)."""
    return MisbehavingServer(mode, huge_bytes).start()


async def _read_request(reader: asyncio.StreamReader) -> bytes | None:
    """One request's body (its head read and dropped), None when the client closed between requests."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    return await reader.readexactly(length) if length else b""


def _request_id(body: bytes) -> Any:
    try:
        document = json.loads(body)
    except ValueError:
        return None
    return document.get("id") if isinstance(document, dict) else None


def _response(status: int, body: bytes, content_type: str = "application/json") -> bytes:
    head = f"HTTP/1.1 {status} X\r\ncontent-type: {content_type}\r\ncontent-length: {len(body)}\r\n\r\n"
    return head.encode("latin-1") + body


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)
