"""The A2A agent endpoints (docs/agents.md): ``GET /v1/agents/{slug}/.well-known/agent-card.json`` (the agent's card
with the gateway as its endpoint and the gateway key as its credential: ``gateway/agents/card.py``) and
``POST /v1/agents/{slug}`` (the agent's JSON-RPC endpoint, relayed: ``gateway/agents/relay.py``). The control
plane's routes for agents (``POST /v1/agents``, ``GET``/``PUT``/``DELETE /v1/agents/{slug}``) are another module's.

Both need a gateway key (the one authentication function: ``x-gateway-api-key`` or ``Authorization: Bearer``)
with the ``agents.invoke`` scope, and serve the key's own workspace: an agent of another workspace is the 404 of one
that does not exist. The card's errors are the gateway's one error format; the JSON-RPC endpoint answers every error
as a JSON-RPC error with the request's id (the body is read first, at most GATEWAY_MAX_BODY_BYTES): a refused key
401 (with ``WWW-Authenticate: Bearer``) or 403, an unknown agent 404, a body too large 413, a spent rate limit 429,
the others (a malformed request, a guardrail's deny, an agent that failed) HTTP 200 as A2A servers answer them.

Per call, in order: the body, the key, the agent, the request (JSON-RPC 2.0, a string ``method``, an ``id``), the
workspace's rate-limit policies (agent as ``provider`` ``agent:<slug>``, its card's name as ``model``), input
guardrails on a sent message's text, then the relay; every call that found its agent is a request record
(``gateway/agents/records.py``).

The gateway's own URL for an agent is ``GATEWAY_PUBLIC_URL`` + ``/v1/agents/<slug>`` when that is set; else
``<scheme>://<host>/v1/agents/<slug>`` built from the request: the first ``X-Forwarded-Proto`` and
``X-Forwarded-Host`` values when a proxy in front set them, else the request's scheme and ``Host``. Only the
caller reads the card built from them, so a caller that sets them misleads only itself.
"""

from __future__ import annotations

import re
import time
from typing import Any, Awaitable, Callable

from gateway.agents import wire
from gateway.agents.card import CARD_METHODS, served_card, served_result
from gateway.agents.records import AgentCall
from gateway.agents.service import AgentService
from gateway.api.admin import own_workspace_key
from gateway.controlplane.keys import KeyRecord, KeyStore
from gateway.guardrails import GuardrailRunner
from gateway.http.body import read_request_body
from gateway.http.context import RequestContext, build_context
from gateway.http.errors import GatewayError, NotFound
from gateway.http.respond import JSON_HEADERS, send_bytes
from gateway.http.types import ASGIApp, Receive, Scope, Send
from gateway.schema.agent_target import AgentTarget

SCOPE = "agents.invoke"
CARD_PATH = "/v1/agents/{slug}/.well-known/agent-card.json"
RPC_PATH = "/v1/agents/{slug}"
_CHALLENGE = (b"www-authenticate", b'Bearer realm="gateway", error="invalid_token"')
_HOST = re.compile(r"^[A-Za-z0-9.\-]+(:[0-9]{1,5})?$|^\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?$")

Targets = Callable[[str, str], Awaitable[AgentTarget | None]]


class AgentEndpoint:
    """The card and the JSON-RPC endpoint of every agent (see the module docstring)."""

    def __init__(self, keys: KeyStore, targets: Targets, service: Callable[[], AgentService], max_body: int,
                 recorder: Any, policies: Any, public_url: str | None = None) -> None:
        self.keys = keys
        #: GATEWAY_PUBLIC_URL without its trailing slash: the base of the URLs the cards name, when set
        self.public_url = public_url.rstrip("/") if public_url else None
        self.targets = targets
        self._service = service
        self.max_body = max_body
        self.recorder = recorder
        self.policies = policies

    def routes(self) -> list[tuple[str, str, ASGIApp]]:
        return [("GET", CARD_PATH, self.card), ("POST", RPC_PATH, self.post)]

    @property
    def service(self) -> AgentService:
        return self._service()

    async def card(self, scope: Scope, receive: Receive, send: Send) -> None:
        key = await self._caller(build_context(scope["headers"]), scope)
        target = await self._agent(key, _slug(scope))
        data = served_card(target.card, target.endpoint, own_url(scope, target.slug, self.public_url))
        await send_bytes(send, 200, data, [*JSON_HEADERS, (b"cache-control", b"no-store")])

    async def post(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        request: wire.Request | None = None
        call: AgentCall | None = None
        body = b""
        try:
            ctx = build_context(scope["headers"])
            try:
                body = await read_request_body(scope, receive, self.max_body)
            except GatewayError as exc:
                raise wire.RpcError.of(exc) from None
            request = _lenient(body)
            try:
                key = await self._caller(ctx, scope)
                target = await self._agent(key, _slug(scope))
            except GatewayError as exc:
                raise wire.RpcError.of(exc) from None
            method = request.method if request is not None and isinstance(request.method, str) else ""
            call = AgentCall(ctx, key, target, method, len(body), started)
            request = wire.decode(body)
            call.task_id = wire.task_of_request(request)
            try:
                await call.admit(self.policies)
            except GatewayError as exc:
                raise wire.RpcError.of(exc) from None
            body, finish = await self._guarded(ctx, target, request, body)
            if request.method in CARD_METHODS:
                finish = _card_rewrite(request.method, target, own_url(scope, target.slug, self.public_url), finish)
        except wire.RpcError as exc:
            data = exc.body(wire.id_of(request))
            await send_bytes(send, exc.status, data, [*JSON_HEADERS, _CHALLENGE] if exc.status == 401 else JSON_HEADERS)
            if call is not None:
                call.refused(exc, len(data)).done(self.recorder)
            return
        assert call is not None  # a call reaches the relay only with its record
        relayed = await self.service.relay.relay(send, receive, target, request, body, _passed(scope), finish)
        record = call.record
        record.stream = relayed.streamed
        if relayed.upstream_s is not None:
            record.upstream_started, record.upstream_s = relayed.sent_at, relayed.upstream_s
        call.task_id = call.task_id or relayed.task_id
        call.ended(relayed.status, relayed.bytes_out, relayed.error_code, relayed.error).done(self.recorder)

    # -- the steps -------------------------------------------------------------------------------------------------

    async def _caller(self, ctx: RequestContext, scope: Scope) -> KeyRecord:
        """The caller's key (``agents.invoke``); a query naming another workspace is the 404 of one it cannot
        see."""
        return await own_workspace_key(self.keys, ctx, scope, SCOPE, "the agent endpoints")

    async def _agent(self, key: KeyRecord, slug: str) -> AgentTarget:
        target = await self.targets(key.workspace, slug) if slug else None
        if target is None:
            raise NotFound(f"no agent '{slug}' in this key's workspace", param="slug")
        return target

    async def _guarded(self, ctx: RequestContext, target: AgentTarget, request: wire.Request, body: bytes
                       ) -> tuple[bytes, Callable[[bytes], Awaitable[bytes]] | None]:
        """The body to send (its message's text as input guardrails leave it, or their deny's error) and what the
        output guardrails do to a JSON answer (None: no config with guardrails, or a stream)."""
        if request.method not in wire.SENDING:
            return body, None
        guard = self.service.guard
        config = await guard.config(ctx, target.config, target.workspace)
        if config is None:
            return body, None
        judged = guard.request(ctx, target.workspace, target.slug, wire.params_of(request))
        redacted = await guard.before(config, judged)
        if redacted is not None:
            body = wire.encode({"jsonrpc": "2.0", "id": request.id, "method": request.method, "params": redacted})
        if request.method in wire.STREAMING or not GuardrailRunner.has_after(config):
            return body, None

        async def finish(response: bytes) -> bytes:
            return await guard.after(config, judged, response)

        return body, finish


def _card_rewrite(method: str, target: AgentTarget, url: str,
                  then: Callable[[bytes], Awaitable[bytes]] | None) -> Callable[[bytes], Awaitable[bytes]]:
    """``then`` (if any) after an extended card in the answer is rewritten as the public card is."""

    async def finish(data: bytes) -> bytes:
        head = wire.head_of(data)
        if head is not None and isinstance(head.result, dict):
            data = wire.encode({"jsonrpc": "2.0", "id": head.id,
                                "result": served_result(method, head.result, target.endpoint, url)})
        return data if then is None else await then(data)

    return finish


def _lenient(body: bytes) -> wire.Request | None:
    """The request as far as it can be read (for the id of an error answered before it is checked)."""
    try:
        return wire.decode(body)
    except wire.RpcError:
        return wire.Request(id=wire.id_in(body))


def own_url(scope: Scope, slug: str, public_url: str | None = None) -> str:
    """The gateway's URL for the agent ``slug``: under ``public_url`` (GATEWAY_PUBLIC_URL) when set, else as the
    caller reaches it (see the module docstring)."""
    if public_url:
        return f"{public_url}/v1/agents/{slug}"
    scheme = _first(scope, b"x-forwarded-proto").lower()
    if scheme not in ("http", "https"):
        scheme = str(scope.get("scheme") or "http")
    host = _first(scope, b"x-forwarded-host")
    if not _HOST.match(host):
        host = _first(scope, b"host")
    if not _HOST.match(host):
        server = scope.get("server") or ("127.0.0.1", 80)
        host = f"{server[0]}:{server[1]}"
    return f"{scheme}://{host}/v1/agents/{slug}"


def _first(scope: Scope, name: bytes) -> str:
    for key, value in scope["headers"]:
        if key == name:
            return value.decode("latin-1").split(",", 1)[0].strip()
    return ""


def _passed(scope: Scope) -> dict[str, str]:
    """The client's A2A headers the agent gets."""
    wanted = {name.encode() for name in wire.PASSED_HEADERS}
    return {key.decode(): value.decode("latin-1") for key, value in scope["headers"] if key in wanted}


def _slug(scope: Scope) -> str:
    params = scope.get("path_params")
    return str(params.get("slug") or "") if params else ""


__all__ = ["AgentEndpoint", "own_url"]
