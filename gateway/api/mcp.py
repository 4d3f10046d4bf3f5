"""The MCP endpoints: ``/v1/mcp`` (every MCP server of the caller's workspace, names ``<slug>__<name>``) and
``/v1/mcp/{slug}`` (one server as it is), over Streamable HTTP in both protocol eras (docs/mcp.md).

Per request, in order: the gateway key (the one authentication function; MCP clients send it as ``Authorization:
Bearer <gateway key>``) with the ``mcp.invoke`` scope, else 401 with ``WWW-Authenticate: Bearer`` or 403, as
JSON-RPC errors; the body (at most GATEWAY_MAX_BODY_BYTES) as one JSON-RPC message; the client's era: the
2026-07-28 envelope in ``params._meta`` (its version and routing headers checked), or ``initialize`` and the
session it opens (``gateway/mcp/sessions.py``); then the method (``gateway/mcp/relay.py``). A request for a server
is sent on and its answer relayed as it comes (``gateway/mcp/forward.py``: the gateway's own request ids,
cancellations, the stream or the one JSON response). Every error is a JSON-RPC error with the request's id. A
``tools/call`` is also admitted by the workspace's rate-limit policies (server as ``provider`` ``mcp:<slug>``, tool
as ``model``) and written as a request record (``gateway/mcp/records.py``).
"""

from __future__ import annotations

import time
from typing import Any, Awaitable, Callable

import msgspec

from gateway.api.admin import own_workspace_key
from gateway.controlplane.keys import KeyRecord, KeyStore
from gateway.http.body import read_request_body
from gateway.http.context import RequestContext, build_context
from gateway.http.errors import GatewayError
from gateway.http.types import ASGIApp, Receive, Scope, Send
from gateway.mcp import wire
from gateway.mcp.catalog import Permit, allow_all
from gateway.mcp.forward import owner_of, send_answer
from gateway.mcp.records import McpCall, refused_call
from gateway.mcp.relay import Forward, Reply, initialize_result
from gateway.mcp.service import McpService
from gateway.mcp.target import ServerTarget

SCOPE = "mcp.invoke"
_CHALLENGE = (b"www-authenticate", b'Bearer realm="gateway", error="invalid_token"')


class Targets:
    """Where the endpoint finds the caller's servers (the control plane's per-worker read side)."""

    def __init__(self, one: Callable[[str, str], Any], every: Callable[[str], Any]) -> None:
        self.one = one
        self.every = every


class McpEndpoint:
    """``POST``, ``GET`` (405: the gateway opens no server-initiated stream) and ``DELETE`` (ends a handshake-era
    session) on both paths."""

    def __init__(self, keys: KeyStore, targets: Targets, service: Callable[[], McpService], max_body: int,
                 recorder: Any, policies: Any) -> None:
        self.keys = keys
        self.targets = targets
        self._service = service
        self.max_body = max_body
        self.recorder = recorder
        self.policies = policies

    def routes(self) -> list[tuple[str, str, ASGIApp]]:
        out: list[tuple[str, str, ASGIApp]] = []
        for path in ("/v1/mcp", "/v1/mcp/{slug}"):
            out += [("POST", path, self.post), ("GET", path, self.get), ("DELETE", path, self.delete)]
        return out

    @property
    def service(self) -> McpService:
        return self._service()

    # -- the routes ------------------------------------------------------------------------------------------------

    async def get(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            key = await self._caller(build_context(scope["headers"]), scope)
            await self._servers(key, _endpoint(scope))
        except wire.RpcError as exc:
            await send_answer(send, exc.status, exc.body(None), _challenge(exc))
            return
        refusal = wire.error_body(None, wire.INVALID_REQUEST, "Method Not Allowed: the gateway opens no "
                                  "server-initiated stream; POST requests")
        await send_answer(send, 405, refusal, [(b"allow", b"POST, DELETE")])

    async def delete(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            ctx = build_context(scope["headers"])
            key = await self._caller(ctx, scope)
            await self._servers(key, _endpoint(scope))
            session_id = _header(scope, wire.SESSION_HEADER)
            if not session_id:
                raise wire.RpcError(wire.INVALID_REQUEST, "Bad Request: DELETE needs the Mcp-Session-Id header")
            sessions = self.service.sessions
            if await sessions.find(session_id, key.key_id, _endpoint(scope)) is None:
                raise wire.RpcError(wire.INVALID_REQUEST, "Session not found", status=404)
            await sessions.close(session_id)
        except wire.RpcError as exc:
            await send_answer(send, exc.status, exc.body(None), _challenge(exc))
            return
        await send_answer(send, 200, b"")

    async def post(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        message: wire.Message | None = None
        session_header: list[tuple[bytes, bytes]] = []
        try:
            ctx = build_context(scope["headers"])
            key = await self._caller(ctx, scope)
            try:
                body = await read_request_body(scope, receive, self.max_body)
            except GatewayError as exc:
                raise wire.RpcError(wire.INVALID_REQUEST, exc.message, status=exc.status) from None
            endpoint = _endpoint(scope)
            single, targets = await self._servers(key, endpoint)
            message = wire.decode(body)
            service = self.service
            if message.method == "initialize":
                await self._initialize(send, message, key, endpoint)
                return
            if message.is_response:  # an answer to a server-to-client request: the gateway sends none
                await send_answer(send, 202, b"")
                return
            version = wire.envelope_version(message.params)
            if version is not None:
                modern = True
                _check_envelope(scope, message, version)
            else:
                modern = False
                session_id = _header(scope, wire.SESSION_HEADER)
                if not session_id:
                    raise wire.RpcError(wire.INVALID_REQUEST, "Bad Request: send initialize first and then its "
                                                              "Mcp-Session-Id, or the 2026-07-28 envelope in "
                                                              "params._meta")
                if await service.sessions.find(session_id, key.key_id, endpoint) is None:
                    raise wire.RpcError(wire.INVALID_REQUEST, "Session not found", status=404)
                session_header = [(wire.SESSION_HEADER.encode(), session_id.encode())]
            if message.is_notification:
                await self._notification(message, key, endpoint)
                await send_answer(send, 202, b"", session_header)
                return
            outcome = await service.relay.answer(message, targets, single, _permit(key), modern)
        except wire.RpcError as exc:
            data = exc.body(_id(message))
            await send_answer(send, exc.status, data, _challenge(exc) + session_header)
            if message is not None and message.method == "tools/call":
                refused_call(ctx, key, message, single, len(body), started, exc, len(data)).done(self.recorder)
            return
        if isinstance(outcome, Reply):
            await send_answer(send, 200, wire.result_body(message.id, outcome.result), session_header)  # type: ignore
            return
        await self._forward(scope, receive, send, ctx, key, outcome, len(body), started, session_header, modern)

    # -- the steps -------------------------------------------------------------------------------------------------

    async def _caller(self, ctx: RequestContext, scope: Scope) -> KeyRecord:
        """The caller's key (``mcp.invoke``); the endpoints serve the key's own workspace, so a query naming
        another is the 404 of a workspace it cannot see."""
        try:
            return await own_workspace_key(self.keys, ctx, scope, SCOPE, "the MCP endpoints")
        except GatewayError as exc:
            raise wire.RpcError.of(exc) from None

    async def _servers(self, key: KeyRecord, endpoint: str
                       ) -> tuple[ServerTarget | None, dict[str, ServerTarget]]:
        """The servers the key reaches: its workspace's, and of those only the ones its ``mcp_tools`` list names
        (whole or by a tool) when it has one; a server it does not reach is the 404 of a missing one."""
        if endpoint:
            target = await self.targets.one(key.workspace, endpoint)
            if target is None or not _reaches(key, target.slug):
                raise wire.RpcError(wire.INVALID_REQUEST, f"no MCP server '{endpoint}' in this key's workspace",
                                    status=404)
            return target, {target.slug: target}
        return None, {t.slug: t for t in await self.targets.every(key.workspace) if _reaches(key, t.slug)}

    async def _initialize(self, send: Send, message: wire.Message, key: KeyRecord, endpoint: str) -> None:
        asked = message.param("protocolVersion")
        version = asked if asked in wire.HANDSHAKE_VERSIONS else wire.LATEST_HANDSHAKE
        session_id = await self.service.sessions.open(key.key_id, key.workspace, endpoint, version)
        await send_answer(send, 200, wire.result_body(_id(message), initialize_result(version)),
                    [(wire.SESSION_HEADER.encode(), session_id.encode())])

    async def _notification(self, message: wire.Message, key: KeyRecord, endpoint: str) -> None:
        """A client's notification: ``notifications/cancelled`` stops the key's request it names
        (``gateway/mcp/forward.py``); the others concern the gateway's session and end here."""
        if message.method == "notifications/cancelled":
            named = message.param("requestId")
            if isinstance(named, (int, str)):
                await self.service.forwarder.cancel(owner_of(key.key_id, endpoint, named))

    async def _guarded(self, ctx: RequestContext, key: KeyRecord, forward: Forward
                       ) -> tuple[wire.Message, Callable[[bytes], Awaitable[bytes]] | None]:
        """The tool call as its input guardrails leave it (redacted, or refused with their error), and what the
        output guardrails do to the tool's response (None: no config with guardrails)."""
        guard = self.service.guard
        message = forward.message
        config = await guard.config(ctx, forward.target.config, key.workspace)
        if config is None:
            return message, None
        params = message.params if isinstance(message.params, dict) else {}
        request = guard.request(ctx, key.workspace, forward.tool or "", params)
        redacted = await guard.before(config, request)
        if redacted is not None:
            message = msgspec.structs.replace(message, params=redacted)

        async def finish(response: bytes) -> bytes:
            return await guard.after(config, request, response)

        return message, finish

    async def _forward(self, scope: Scope, receive: Receive, send: Send, ctx: RequestContext, key: KeyRecord,
                       forward: Forward, body_len: int, started: float,
                       session_header: list[tuple[bytes, bytes]], modern: bool) -> None:
        message = forward.message
        call = McpCall(ctx, key, forward, body_len, started) if forward.tool is not None else None
        finish: Callable[[bytes], Awaitable[bytes]] | None = None
        try:
            if call is not None:
                await call.admit(self.policies)
                message, finish = await self._guarded(ctx, key, forward)
            if modern and not (await self.service.upstream.era(forward.target)).modern:
                finish = _lifted(str(message.method), finish)
        except (wire.RpcError, GatewayError) as exc:
            error = exc if isinstance(exc, wire.RpcError) else wire.RpcError.of(exc)
            data = error.body(message.id)  # type: ignore[arg-type]
            await send_answer(send, error.status, data, session_header)
            if call is not None:
                call.ended(error.status, len(data), error.code).done(self.recorder)
            return
        wants_stream = b"text/event-stream" in (_header(scope, "accept") or "").encode()
        owner = owner_of(key.key_id, _endpoint(scope), message.id)
        relayed = await self.service.forwarder.relay(send, receive, forward.target, message, owner, session_header,
                                                     finish, wants_stream)
        if call is not None:
            record = call.record
            record.stream = relayed.streamed
            if relayed.upstream_s is not None:
                record.upstream_started, record.upstream_s = relayed.sent_at, relayed.upstream_s
            call.ended(relayed.status, relayed.bytes_out, relayed.error_code).done(self.recorder)


def _lifted(method: str, then: Callable[[bytes], Awaitable[bytes]] | None) -> Callable[[bytes], Awaitable[bytes]]:
    """``then`` (if any) after a handshake-era server's response is made a 2026-07-28 one (``as_modern_response``)."""

    async def finish(data: bytes) -> bytes:
        data = wire.as_modern_response(method, data)
        return data if then is None else await then(data)

    return finish


def _check_envelope(scope: Scope, message: wire.Message, version: str) -> None:
    if version not in wire.MODERN_VERSIONS:
        raise wire.RpcError(wire.UNSUPPORTED_VERSION, "Unsupported protocol version",
                            data={"supported": list(wire.MODERN_VERSIONS), "requested": version})
    if _header(scope, wire.VERSION_HEADER) != version:
        raise wire.RpcError(wire.HEADER_MISMATCH, "MCP-Protocol-Version header does not match the request envelope's "
                                                  "protocol version")
    if _header(scope, wire.METHOD_HEADER) != message.method:
        raise wire.RpcError(wire.HEADER_MISMATCH, "Mcp-Method header does not match the request's method")
    named = wire.NAMED_PARAM.get(message.method) if isinstance(message.method, str) else None
    if named is not None and _header(scope, wire.NAME_HEADER) != message.param(named):
        raise wire.RpcError(wire.HEADER_MISMATCH, f"Mcp-Name header does not match params.{named}")


def _reaches(key: KeyRecord, slug: str) -> bool:
    """Whether the key's ``mcp_tools`` list (if any) names the server, whole or by one of its tools."""
    tools = key.mcp_tools
    return tools is None or slug in tools or any(entry.startswith(slug + "/") for entry in tools)


def _permit(key: KeyRecord) -> Permit:
    """The key's MCP tool list as the catalogue's permit (``KeyRecord.may_use_tool``)."""
    return allow_all if key.mcp_tools is None else key.may_use_tool


def _endpoint(scope: Scope) -> str:
    params = scope.get("path_params")
    return str(params.get("slug") or "") if params else ""


def _header(scope: Scope, name: str) -> str | None:
    wanted = name.encode()
    for key, value in scope["headers"]:
        if key == wanted:
            return value.decode("latin-1")
    return None


def _id(message: wire.Message | None) -> Any:
    if message is None or message.id is msgspec.UNSET:
        return None
    return message.id


def _challenge(exc: wire.RpcError) -> list[tuple[bytes, bytes]]:
    return [_CHALLENGE] if exc.status == 401 else []


__all__ = ["McpEndpoint", "Targets"]
