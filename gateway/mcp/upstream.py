"""The gateway as an MCP client: one request to a registered server over Streamable HTTP, in the revision that
server speaks, through the worker's upstream transport (the SSRF guard and the pinned address at every connection;
redirects are never followed).

Which revision a server speaks is learnt once per worker and server (``ServerTarget`` url and headers), the first
time it is called: a ``server/discover`` probe at 2026-07-28, and the ``initialize`` handshake when the probe is
answered with anything but a result naming 2026-07-28 (as the official SDK's client decides). A handshake-era
server gets one session per worker (its ``Mcp-Session-Id`` kept here; a 404 on it starts one new session and
sends the request once more); those sessions carry nothing of one client's: every request is self-contained.
What a server answers is bounded: a JSON answer at GATEWAY_MAX_UPSTREAM_BODY_BYTES, a stream at the same number
of bytes in all, each event at ``MAX_EVENT_BYTES``; the head must come within GATEWAY_MCP_TIMEOUT_MS and a stream
may fall silent at most GATEWAY_UPSTREAM_READ_TIMEOUT_MS. Whatever fails (refused address, unreachable, timeout,
an answer that is not JSON-RPC, a huge one) is an ``RpcError`` whose text is bounded and has the server's
credentials masked.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import msgspec

from gateway.bounded_cache import BoundedCache
from gateway.http.errors import GatewayError
from gateway.http.sse import SseSplitter
from gateway.mcp import wire
from gateway.mcp.target import ServerTarget
from gateway.upstream.error_text import bounded, header_secrets, scrub_text, unaddressed
from gateway.upstream.request import UpstreamRequest
from gateway.upstream.transport import UpstreamResponse, UpstreamTransport
from gateway.waiting import within

#: what is read of a stream after its response, and for how long, to return its connection to the pool
DRAIN_BYTES = 64 * 1024
DRAIN_S = 1.0
#: the largest single event of a server's stream
MAX_EVENT_BYTES = 16 * 1024 * 1024
#: how long a learnt revision (and a handshake session) is trusted before the server is probed again
ERA_TTL_S = 600.0
#: pages of a list read whole (tools/list for pinning and the catalogue)
MAX_LIST_PAGES = 50
_ACCEPT = "application/json, text/event-stream"


class Era(msgspec.Struct, frozen=True):
    """What the gateway learnt of one server: the revision to send and, for a handshake-era server, its session."""

    version: str
    session: str | None = None
    learnt: float = 0.0

    @property
    def modern(self) -> bool:
        return self.version in wire.MODERN_VERSIONS


class Answer:
    """A server's answer to one request: ``messages()`` yields the JSON of each message it sent (notifications,
    then the response), as they arrive; ``close()`` drops what is left (always called)."""

    __slots__ = ("status", "streamed", "_body", "_response", "_target", "_limit", "_secrets")

    def __init__(self, status: int, body: bytes | None, response: UpstreamResponse | None, target: ServerTarget,
                 limit: int, secrets: list[str]) -> None:
        self.status = status
        self.streamed = response is not None
        self._body = body
        self._response = response
        self._target = target
        self._limit = limit
        self._secrets = secrets

    async def messages(self) -> AsyncIterator[bytes]:
        if self._body is not None:
            if self._body.strip():
                yield self._body
            return
        response = self._response
        assert response is not None
        splitter = SseSplitter()
        total = 0
        try:
            async for chunk in response.chunks():
                total += len(chunk)
                if total > self._limit:
                    raise failure(self._target, f"streamed more than {self._limit} bytes", self._secrets)
                for _name, data in splitter.feed(chunk):
                    if len(data) > MAX_EVENT_BYTES:
                        raise failure(self._target, f"sent an event over {MAX_EVENT_BYTES} bytes", self._secrets)
                    if data.strip():
                        yield data
            for _name, data in splitter.close():
                if data.strip():
                    yield data
        except response.read_errors as exc:
            raise failure(self._target, response.failure_text(exc), self._secrets) from None
        except GatewayError as exc:
            raise failure(self._target, exc.message, self._secrets) from None
        self._response = None
        response.release()

    async def drain(self, seconds: float = DRAIN_S) -> None:
        """Done with the answer once its response was read: what is left of a stream (its end, usually arriving
        with the response) is read within ``seconds`` and at most ``DRAIN_BYTES``, so the connection goes back to
        the pool; a stream that goes on is closed instead."""
        response = self._response
        if response is None:
            return
        left = DRAIN_BYTES
        failed: tuple[type[BaseException], ...] = (TimeoutError, GatewayError, *response.read_errors)
        try:
            async with asyncio.timeout(seconds):
                while left > 0:
                    chunk = await response.read_some()
                    if not chunk:
                        self._response = None
                        response.release()
                        return
                    left -= len(chunk)
        except failed:
            pass
        self.close()

    def close(self) -> None:
        if self._response is not None:
            self._response.close()
            self._response = None


def failure(target: ServerTarget, what: str, secrets: list[str], code: int = wire.INTERNAL_ERROR) -> wire.RpcError:
    """The JSON-RPC error for a server that failed: ``what`` happened, bounded, with its credentials masked and its
    address left out (callers know a server by its slug; its address is the admin's)."""
    return wire.RpcError(code, scrub_text(bounded(f"MCP server '{target.slug}' {_unaddressed(what, target)}", 1024),
                                          secrets))


def _unaddressed(text: str, target: ServerTarget) -> str:
    return unaddressed(text, target.url, "the server")


def _secrets(target: ServerTarget) -> list[str]:
    return header_secrets(target.headers)


class McpUpstream:
    """Sends JSON-RPC messages to registered MCP servers (see the module docstring)."""

    def __init__(self, transport: UpstreamTransport, *, timeout_s: float, max_bytes: int) -> None:
        self.transport = transport
        self.timeout_s = timeout_s
        self.max_bytes = max_bytes
        self._eras: BoundedCache[tuple[str, str, str], Era] = BoundedCache(4096)
        self._learning: dict[tuple[str, str, str], asyncio.Future[Era]] = {}

    # -- the revision a server speaks ------------------------------------------------------------------------------

    @staticmethod
    def _key(target: ServerTarget) -> tuple[str, str, str]:
        return (target.workspace, target.slug, target.url)

    async def era(self, target: ServerTarget) -> Era:
        key = self._key(target)
        era = self._eras.get(key)
        if era is not None and time.monotonic() - era.learnt < ERA_TTL_S:
            return era
        pending = self._learning.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[Era] = asyncio.get_running_loop().create_future()
        self._learning[key] = future
        try:
            era = await self._learn(target)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: a failure nobody else awaited is not reported as lost
            raise
        finally:
            self._learning.pop(key, None)
        future.set_result(era)
        self._eras.put(key, era)
        return era

    def speaks_modern(self, target: ServerTarget) -> bool:
        """Whether the server was last learnt to speak 2026-07-28 (False before it was called)."""
        era = self._eras.get(self._key(target))
        return era is not None and era.modern

    def forget(self, target: ServerTarget) -> None:
        """Learn the server's revision (and open a new session) on its next call: its record changed, or its
        session expired."""
        key = self._key(target)
        if key in self._eras:
            del self._eras[key]

    async def _learn(self, target: ServerTarget) -> Era:
        probe = wire.Message(jsonrpc="2.0", id=0, method="server/discover", params=wire.with_envelope({}))
        try:
            reply = await self._one(target, probe, Era(wire.MODERN))
        except wire.RpcError as exc:
            if exc.code in (wire.CONNECTION_CLOSED, wire.REQUEST_TIMEOUT):
                raise  # unreachable or silent: no verdict on its revision
            reply = None
        if reply is not None and isinstance(reply.result, dict):
            versions = reply.result.get("supportedVersions")
            if isinstance(versions, list) and wire.MODERN in versions:
                return Era(wire.MODERN, learnt=time.monotonic())
        return await self._handshake(target)

    async def _handshake(self, target: ServerTarget) -> Era:
        hello = wire.Message(jsonrpc="2.0", id=0, method="initialize", params={
            "protocolVersion": wire.LATEST_HANDSHAKE, "capabilities": {}, "clientInfo": wire.SERVER_INFO})
        answer, session = await self._post(target, hello, Era(wire.LATEST_HANDSHAKE), handshake=True)
        reply = await self._reply(target, answer, 0)
        if reply.error is not msgspec.UNSET or not isinstance(reply.result, dict):
            raise failure(target, f"refused the initialize handshake: {_error_text(reply.error)}", _secrets(target))
        version = reply.result.get("protocolVersion")
        if version not in wire.HANDSHAKE_VERSIONS:
            raise failure(target, f"answered initialize with protocol version {version!r}, which the gateway does "
                                  f"not speak ({', '.join(wire.HANDSHAKE_VERSIONS)})", _secrets(target))
        era = Era(version, session, time.monotonic())
        done = wire.Message(jsonrpc="2.0", method="notifications/initialized")
        answer, _ = await self._post(target, done, era)
        answer.close()
        return era

    # -- sending ---------------------------------------------------------------------------------------------------

    async def send(self, target: ServerTarget, message: wire.Message) -> Answer:
        """Send ``message`` (a request or notification, in the client's words: the gateway adds the envelope or
        the session the server needs) and answer with the server's ``Answer``."""
        era = await self.era(target)
        try:
            answer, _ = await self._post(target, message, era)
        except _SessionExpired:
            self.forget(target)
            era = await self.era(target)
            answer, _ = await self._post(target, message, era)
        return answer

    async def request(self, target: ServerTarget, method: str, params: dict[str, Any] | None = None) -> Any:
        """The ``result`` of one request the gateway makes itself (a list read for the catalogue or pinning);
        an error answer is an ``RpcError``."""
        message = wire.Message(jsonrpc="2.0", id=0, method=method, params=params or {})
        reply = await self._reply(target, await self.send(target, message), 0)
        if reply.error is not msgspec.UNSET:
            error = reply.error if isinstance(reply.error, dict) else {}
            given = error.get("code")
            code = given if isinstance(given, int) else wire.INTERNAL_ERROR
            raise failure(target, f"answered {method} with an error: {_error_text(error)}", _secrets(target), code)
        return reply.result

    async def list_all(self, target: ServerTarget, method: str, field: str) -> list[dict[str, Any]]:
        """Every item of a paginated list (``tools/list`` -> ``tools``), following ``nextCursor``."""
        items: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(MAX_LIST_PAGES):
            result = await self.request(target, method, {"cursor": cursor} if cursor else {})
            page = result.get(field) if isinstance(result, dict) else None
            if not isinstance(page, list):
                raise failure(target, f"answered {method} without a {field} list", _secrets(target))
            items.extend(item for item in page if isinstance(item, dict))
            cursor = result.get("nextCursor")
            if not cursor:
                return items
        raise failure(target, f"answered {method} with more than {MAX_LIST_PAGES} pages", _secrets(target))

    async def list_tools(self, target: ServerTarget) -> list[dict[str, Any]]:
        """The server's tools as it lists them now (every page); a GatewayError (502) when it cannot be read, for
        the admin routes."""
        try:
            return await self.list_all(target, "tools/list", "tools")
        except wire.RpcError as exc:
            raise GatewayError(exc.message, status=502, type="upstream_error", param="url") from None

    async def _reply(self, target: ServerTarget, answer: Answer, id: wire.RequestId) -> wire.Message:
        """The response with ``id`` in ``answer`` (notifications before it skipped)."""
        try:
            async for data in answer.messages():
                message = _decoded(target, data)
                if message.is_response and message.id == id:
                    await answer.drain()
                    return message
        finally:
            answer.close()
        raise failure(target, "ended its answer without a response", _secrets(target))

    async def _one(self, target: ServerTarget, message: wire.Message, era: Era) -> wire.Message | None:
        answer, _ = await self._post(target, message, era)
        return await self._reply(target, answer, message.id)  # type: ignore[arg-type]

    async def _post(self, target: ServerTarget, message: wire.Message, era: Era, handshake: bool = False
                    ) -> tuple[Answer, str | None]:
        headers = {"content-type": "application/json", "accept": _ACCEPT, **target.headers}
        method = message.method if isinstance(message.method, str) else ""
        params = message.params
        if era.modern:
            if message.method is not msgspec.UNSET:
                params = wire.with_envelope(params)
                headers[wire.VERSION_HEADER] = era.version
                headers[wire.METHOD_HEADER] = method
                named = wire.NAMED_PARAM.get(method)
                if named and isinstance(params.get(named), str):
                    headers[wire.NAME_HEADER] = params[named]
        else:
            params = wire.without_envelope(params)
            if not handshake:
                headers[wire.VERSION_HEADER] = era.version
                if era.session:
                    headers[wire.SESSION_HEADER] = era.session
        body = wire.encode(msgspec.structs.replace(message, params=params))
        secrets = _secrets(target)
        try:
            response = await within(self.transport.open(UpstreamRequest(target.url, headers, body), True),
                                    self.timeout_s)
        except TimeoutError:
            raise failure(target, f"did not answer within {self.timeout_s:g} s", secrets,
                          wire.REQUEST_TIMEOUT) from None
        except GatewayError as exc:
            code = wire.REQUEST_TIMEOUT if exc.status == 504 else wire.CONNECTION_CLOSED
            raise failure(target, f"could not be reached: {exc.message}", secrets, code) from None
        return await self._answer(target, response, era, handshake, secrets)

    async def _answer(self, target: ServerTarget, response: UpstreamResponse, era: Era, handshake: bool,
                      secrets: list[str]) -> tuple[Answer, str | None]:
        status = response.status
        kind = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        session = response.headers.get(wire.SESSION_HEADER)
        if status == 404 and era.session and not handshake:
            response.close()
            raise _SessionExpired()
        if kind == "text/event-stream" and 200 <= status < 300:
            return Answer(status, None, response, target, self.max_bytes, secrets), session
        try:
            body = await response.read_body()
        except response.read_errors as exc:
            response.close()
            raise failure(target, response.failure_text(exc), secrets) from None
        except GatewayError as exc:
            response.close()
            raise failure(target, exc.message, secrets) from None
        response.release()
        if 200 <= status < 300:
            if body.strip() and kind != "application/json":
                raise failure(target, f"answered with content type {kind or 'none'!r}, not JSON-RPC", secrets)
            return Answer(status, body, None, target, self.max_bytes, secrets), session
        if kind == "application/json":
            try:
                message = wire.decode(body)
            except wire.RpcError:
                message = None
            if message is not None and message.error is not msgspec.UNSET:
                return Answer(status, body, None, target, self.max_bytes, secrets), session
        if status in (401, 403):
            raise failure(target, f"refused the gateway's credentials (HTTP {status}); check the server's headers",
                          secrets)
        text = body[:512].decode("utf-8", "replace")
        raise failure(target, f"answered HTTP {status}: {text}", secrets)


class _SessionExpired(Exception):
    """A handshake-era server no longer knows the gateway's session (404)."""


def _decoded(target: ServerTarget, data: bytes) -> wire.Message:
    try:
        return wire.decode(data)
    except wire.RpcError as exc:
        raise failure(target, f"sent a message that is not JSON-RPC ({exc.message})", _secrets(target)) from None


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        return bounded(str(error.get("message") or error), 512)
    return "no error message"
