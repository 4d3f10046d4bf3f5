"""The ASGI callable: one route table dispatching by (method, path); lifespan opens and closes the runtime;
WebSocket upgrades dispatched by path through a table of their own (``/v1/realtime`` and the Responses WebSocket
mode's ``/v1/responses``: gateway/realtime/).

Handlers are imported here, at import time, so a module of the package that fails to import stops the worker (and so
the server) with its traceback. The front doors' routes are built on their first request instead (their dialects
are sizeable modules a chat worker never uses), which keeps an idle worker smaller; their tests import them.
"""

from __future__ import annotations

import gc
import logging
from typing import Any, Callable, Protocol

from gateway import settings as settings_module
from gateway.api.configs import ConfigRoutes
from gateway.api.console import mount_console
from gateway.api.guardrails import GuardrailRoutes
from gateway.api.health import HealthEndpoint, ReadyEndpoint
from gateway.api.keys import KeyRoutes
from gateway.api.logs import LogsEndpoint
from gateway.api.mcp_servers import McpServerRoutes, ReadTools
from gateway.api.metrics import MetricsEndpoint
from gateway.api.models import ModelRoutes
from gateway.api.policies import PolicyRoutes
from gateway.api.prompts import PromptRoutes
from gateway.api.providers import ProviderRoutes
from gateway.http import early_stop
from gateway.http.bodywatch import WATCH_STATE, BodyWatch
from gateway.http.errors import GatewayError, MethodNotAllowed, NotFound, internal_error
from gateway.http.respond import CACHE_DISABLED, send_error, with_cache_status
from gateway.http.routes import Deferred, RouteTable
from gateway.http.types import ASGIApp, Receive, Scope, Send
from gateway.http.websocket import ClientSocket
from gateway.job_routes import mount_jobs
from gateway.lifecycle import Stage
from gateway.mcp.target import ServerTarget
from gateway.pipeline.media import media_routes
from gateway.pipeline.pipeline import Pipeline, PipelineParts
from gateway.providers.base import CHAT, COMPLETIONS, EMBEDDINGS, MODERATIONS, RERANK
from gateway.runtime import Runtime
from gateway.schema.chat import parse_chat
from gateway.schema.completions import parse_completion
from gateway.schema.embeddings import parse_embeddings
from gateway.schema.moderations import parse_moderation
from gateway.schema.rerank import parse_rerank

#: a full garbage collection once this many middle-generation collections have run (CPython's default is 10): with
#: thousands of streams open, each full collection walks every live stream's objects, and at the default a burst of
#: 5,000 streams ran about twenty of them (first byte p50 3.0 s; 1.8 s at 100). CPython still collects fully only once
#: the long-lived objects grew by a quarter, so garbage cycles wait a little longer, not without bound.
FULL_COLLECTION_AFTER = 100


class _Routes(Protocol):
    def routes(self) -> list[tuple[str, str, ASGIApp]]: ...


def _admin_groups(runtime: Runtime) -> tuple[_Routes, ...]:
    """The admin route groups, each given the runtime's objects it uses (the steps are made at first use)."""
    keys, records, settings = runtime.keys, runtime.records, runtime.settings
    return (
        PolicyRoutes(keys, runtime.store, runtime.policies, settings),
        KeyRoutes(runtime.api_keys, keys),
        ProviderRoutes(keys, records),
        ConfigRoutes(keys, records, runtime.configs, runtime.resolver, lambda: runtime.steps.runner),
        PromptRoutes(keys, records),
        ModelRoutes(keys, records, runtime.resolver, runtime.configs.inheritance, runtime.exchange),
        GuardrailRoutes(keys, records, lambda: runtime.steps.saved),
        McpServerRoutes(keys, records, _read_mcp_tools(runtime), runtime.client.resolver.check),
    )


def _read_mcp_tools(runtime: Runtime) -> ReadTools:
    """The MCP data path's read of a server's tools (``runtime.mcp``, made on its first use)."""

    async def read(target: ServerTarget) -> list[dict[str, Any]]:
        return await runtime.mcp.upstream.list_tools(target)

    return read


def _mcp_routes(runtime: Runtime) -> list[tuple[str, str, ASGIApp]]:
    """``/v1/mcp`` and ``/v1/mcp/{slug}``: their module is imported on the first MCP request."""
    built: list[Any] = []

    def endpoint() -> Any:
        if not built:
            from gateway.api.mcp import McpEndpoint, Targets

            records = runtime.records
            built.append(McpEndpoint(runtime.keys, Targets(records.mcp_target, records.mcp_targets),
                                     lambda: runtime.mcp, runtime.settings.max_body_bytes, runtime.recorder,
                                     runtime.policies))
        return built[0]

    routes: list[tuple[str, str, ASGIApp]] = []
    for path in ("/v1/mcp", "/v1/mcp/{slug}"):
        routes.append(("POST", path, Deferred(lambda: endpoint().post)))
        routes.append(("GET", path, Deferred(lambda: endpoint().get)))
        routes.append(("DELETE", path, Deferred(lambda: endpoint().delete)))
    return routes


def _guardrail_check_routes(runtime: Runtime) -> list[tuple[str, str, ASGIApp]]:
    """``POST /v1/guardrails/check`` and ``/v1/guardrails/{guardrail_id}/check``: their module (and the guardrails
    package) imported on the first check."""
    built: list[Any] = []

    def endpoint() -> Any:
        if not built:
            from gateway.api.guardrail_check import GuardrailCheckEndpoint, Guardrails

            guardrails = Guardrails(lambda: runtime.steps.runner, lambda: runtime.steps.saved)
            built.append(GuardrailCheckEndpoint(runtime.keys, guardrails, runtime.settings.max_body_bytes,
                                                runtime.recorder, runtime.policies))
        return built[0]

    return [("POST", "/v1/guardrails/check", Deferred(lambda: endpoint().inline)),
            ("POST", "/v1/guardrails/{guardrail_id}/check", Deferred(lambda: endpoint().saved))]


def _agent_admin_routes(runtime: Runtime) -> list[tuple[str, str, ASGIApp]]:
    """The agents' control-plane routes (``/v1/agents``, ``/v1/agents/{slug}`` and its refresh): their module is
    imported on the first request to one of them."""
    built: list[Any] = []

    def group() -> Any:
        if not built:
            from gateway.api.agents_admin import AgentRoutes

            built.append(AgentRoutes(runtime.keys, runtime.records, runtime.client, runtime.client.resolver.check))
        return built[0]

    def handler(name: str) -> ASGIApp:
        return Deferred(lambda: getattr(group(), name))

    return [(method, path, handler(name)) for method, path, name in _AGENT_ADMIN_ROUTES]


def _agent_routes(runtime: Runtime) -> list[tuple[str, str, ASGIApp]]:
    """An agent's card and JSON-RPC endpoint (``GET /v1/agents/{slug}/.well-known/agent-card.json``,
    ``POST /v1/agents/{slug}``): their module is imported on the first request to one of them."""
    built: list[Any] = []

    def endpoint() -> Any:
        if not built:
            from gateway.api.agents import AgentEndpoint

            built.append(AgentEndpoint(runtime.keys, runtime.records.agent_target, lambda: runtime.agents,
                                       runtime.settings.max_body_bytes, runtime.recorder, runtime.policies,
                                       runtime.settings.public_url))
        return built[0]

    return [("GET", "/v1/agents/{slug}/.well-known/agent-card.json", Deferred(lambda: endpoint().card)),
            ("POST", "/v1/agents/{slug}", Deferred(lambda: endpoint().post))]


#: the agents' control-plane routes as gateway/api/agents_admin.py's ROUTES lists them (a test checks they match),
#: named here so that module is imported only on their first request
_AGENT_ADMIN_ROUTES: tuple[tuple[str, str, str], ...] = (
    ("POST", "/v1/agents", "create"), ("GET", "/v1/agents", "list"), ("GET", "/v1/agents/{slug}", "get"),
    ("PUT", "/v1/agents/{slug}", "update"), ("DELETE", "/v1/agents/{slug}", "delete"),
    ("POST", "/v1/agents/{slug}/refresh", "refresh"),
)


def _realtime_routes(runtime: Runtime, app: ASGIApp) -> tuple[list[tuple[str, str, ASGIApp]], dict[str, ASGIApp],
                                                               Stage]:
    """The Realtime routes: ``POST /v1/realtime/client_secrets`` and the WebSockets ``/v1/realtime`` and
    ``/v1/responses`` (by path), their modules imported on their first request, and the stage that closes the open
    sessions with the worker. ``app``: the worker's own app, through which a translated Responses WebSocket session
    runs its turns."""
    built: dict[str, Any] = {}

    def secrets() -> Any:
        if "secrets" not in built:
            from gateway.realtime.secrets import ClientSecrets

            built["secrets"] = ClientSecrets(runtime.store, lambda: runtime.records.box)
        return built["secrets"]

    def socket(name: str) -> ASGIApp:
        if name not in built:
            from gateway.jobs.dispatch import InProcessDispatcher
            from gateway.realtime.dialect import REALTIME, RESPONSES
            from gateway.realtime.endpoint import LiveSessions, RealtimeEndpoint
            from gateway.realtime.translate import Translator

            settings = runtime.settings
            if "sessions" not in built:  # one set of open sessions for both routes
                built["sessions"] = LiveSessions(settings.shutdown_grace_s)
            built[name] = RealtimeEndpoint(runtime.keys, runtime.records, runtime.resolver, runtime.planner,
                                           runtime.policies, runtime.client, runtime.recorder, settings,
                                           built["sessions"], secrets(), runtime.metrics,
                                           RESPONSES if name == "responses" else REALTIME,
                                           Translator(InProcessDispatcher(app), runtime.providers)
                                           if name == "responses" else None)
        return built[name]

    def mint() -> ASGIApp:
        from gateway.api.realtime_secrets import ClientSecretsEndpoint

        return ClientSecretsEndpoint(runtime.keys, runtime.records, runtime.resolver, runtime.planner, secrets(),
                                     runtime.settings.max_body_bytes)

    async def close() -> None:
        for name in ("socket", "responses"):
            if name in built:
                await built[name].close()

    sockets: dict[str, ASGIApp] = {"/v1/realtime": Deferred(lambda: socket("socket")),
                                   "/v1/responses": Deferred(lambda: socket("responses"))}
    return ([("POST", "/v1/realtime/client_secrets", Deferred(mint))], sockets, Stage("realtime sessions", close=close))


class GatewayApp:
    """Raw ASGI app. ``runtime`` is built at lifespan startup (or injected by tests)."""

    def __init__(self, runtime: Runtime | None = None) -> None:
        self.runtime = runtime
        self.routes = RouteTable()
        #: the WebSocket routes, by path
        self.sockets: dict[str, ASGIApp] = {}
        #: the worker's bound on slow request bodies, handed to requests in the lifespan state
        self.body_watch: BodyWatch | None = None
        if runtime is not None:
            self._mount(runtime)

    def _mount(self, runtime: Runtime) -> None:
        self.routes = RouteTable()
        self.body_watch = BodyWatch(runtime.settings.body_timeout_ms / 1000)
        runtime.lifecycle.add(self.body_watch)  # swept while the runtime runs
        parts = runtime.pipeline_parts()
        self.add("POST", "/v1/chat/completions", Pipeline(parts, CHAT, parse_chat))
        self.add("POST", "/v1/completions", Pipeline(parts, COMPLETIONS, parse_completion))
        self.add("POST", "/v1/embeddings", Pipeline(parts, EMBEDDINGS, parse_embeddings))
        self.add("POST", "/v1/moderations", Pipeline(parts, MODERATIONS, parse_moderation))
        self.add("POST", "/v1/rerank", Pipeline(parts, RERANK, parse_rerank))
        for method, path, media in media_routes(parts, runtime.settings):
            self.add(method, path, media)
        for path, build in _doors(parts, runtime.store).items():
            self.add("POST", path, Deferred(build), sets_cache_status=True)
        mount_jobs(self, runtime)
        self.add("GET", "/v1/logs", LogsEndpoint(runtime.keys, runtime.logs))
        if runtime.settings.console:
            mount_console(self, _console_routes(runtime))
        for group in _admin_groups(runtime):
            for method, path, handler in group.routes():
                self.add(method, path, handler)
        for method, path, handler in _mcp_routes(runtime) + _guardrail_check_routes(runtime):
            self.add(method, path, handler)
        for method, path, handler in _agent_admin_routes(runtime):
            self.add(method, path, handler)
        for method, path, handler in _agent_routes(runtime):
            self.add(method, path, handler)
        self.add("POST", "/v1/prompts/{prompt_id}/completions",
                 Pipeline(parts, CHAT, parse_chat, prompt_route=True, scope="prompts.run"))
        self.add("GET", "/metrics", MetricsEndpoint(runtime.keys, runtime.settings.metrics_public))
        self.add("GET", "/health", HealthEndpoint(runtime.store, runtime.settings.state_fail_mode,
                                                  runtime.logs.health))
        self.add("GET", "/ready", ReadyEndpoint(lambda: runtime.ready and runtime.state_ready))
        realtime_http, self.sockets, sessions = _realtime_routes(runtime, self)
        for method, path, handler in realtime_http:
            self.add(method, path, handler)
        runtime.lifecycle.add(sessions)  # open sessions close (1001) before the runtime's parts

    def add(self, method: str, path: str, handler: ASGIApp, sets_cache_status: bool = False) -> None:
        """Route ``method`` on ``path`` (``{name}`` segments are path parameters) to ``handler``. Every answer
        carries ``x-gateway-cache-status``: an inference pipeline (or a handler that ``sets_cache_status``) sets it,
        other handlers get ``DISABLED``."""
        own = sets_cache_status or isinstance(handler, Pipeline)
        self.routes.add(method, path, handler if own else with_cache_status(handler))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            handler = self.routes.exact(scope["method"], scope["path"])
            if handler is None:
                handler, params, allowed = self._route(scope)
                if handler is None:
                    await self._no_route(scope, send, allowed)
                    return
                scope["path_params"] = params
            try:
                await handler(scope, receive, send)
            except GatewayError as error:
                await send_error(send, error, [CACHE_DISABLED])
            except Exception as exc:  # noqa: BLE001 - a bug still answers in the one error format
                await send_error(send, internal_error(exc), [CACHE_DISABLED])
            return
        if kind == "lifespan":
            await self._lifespan(scope, receive, send)
        elif kind == "websocket":
            await self._socket(scope, receive, send)

    async def _socket(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A WebSocket upgrade, by path (a trailing slash ignored); an unknown path is refused with a 404."""
        path = scope["path"]
        handler = self.sockets.get(path) or self.sockets.get(path.rstrip("/"))
        if handler is not None:
            await handler(scope, receive, send)
            return
        socket = ClientSocket(scope, receive, send)
        if await socket.wait_connect():
            await socket.refuse(NotFound(f"no WebSocket route for {path}"))

    def _route(self, scope: Scope) -> tuple[ASGIApp | None, dict[str, str] | None, list[str]]:
        """``(handler, path_params, allowed_methods)`` of a path that is no exact route; a path with trailing
        slashes is served as the route without them (``/v1/chat/completions/``)."""
        method, path = scope["method"], scope["path"]
        found = self.routes.match(method, path)
        if found[0] is None and len(path) > 1 and path.endswith("/"):
            stripped = self.routes.match(method, path.rstrip("/"))
            if stripped[0] is not None or stripped[2]:
                return stripped
        return found

    async def _no_route(self, scope: Scope, send: Send, methods: list[str]) -> None:
        path = scope["path"]
        if methods:
            allow = ", ".join(sorted(methods)).encode()
            error = MethodNotAllowed(f"{scope['method']} is not allowed on {path}; allowed: {allow.decode()}")
            await send_error(send, error, [(b"allow", allow), CACHE_DISABLED])
        else:
            await send_error(send, NotFound(f"no route for {scope['method']} {path}"), [CACHE_DISABLED])

    async def _lifespan(self, scope: Scope, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                early_stop.hand_on()  # a stop signal met before the server's handlers were installed
                try:
                    if self.runtime is None:
                        settings_module.keep_files_private()  # also when served by another command than ours
                        settings = settings_module.for_worker()
                        self.runtime = Runtime(settings)
                        self._mount(self.runtime)
                    await self.runtime.start()
                    _share_with_requests(scope, self.body_watch)
                    # what start-up made lives as long as the worker: the collector need not scan it again
                    gc.collect()
                    gc.freeze()
                    young, middle, _ = gc.get_threshold()
                    gc.set_threshold(young, middle, FULL_COLLECTION_AFTER)
                except Exception as exc:
                    logging.getLogger("gateway").error("worker start-up failed", exc_info=exc)
                    await send({"type": "lifespan.startup.failed", "message": f"{exc.__class__.__name__}: {exc}"})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self.runtime is not None:
                    self.runtime.ready = False
                    await self.runtime.close()
                await send({"type": "lifespan.shutdown.complete"})
                return


app = GatewayApp()


def _share_with_requests(scope: Scope, body_watch: BodyWatch | None) -> None:
    """Put what every request's body reader needs in the lifespan state, which the server copies into each
    request's ``scope["state"]`` (the body watch: gateway/http/bodywatch.py)."""
    state = scope.get("state")
    if state is not None and body_watch is not None:
        state[WATCH_STATE] = body_watch


def _doors(parts: PipelineParts, store: Any) -> dict[str, Callable[[], ASGIApp]]:
    """The front doors' routes (docs/front-doors.md), each built, its dialect imported, on its first request."""

    def responses() -> ASGIApp:
        from gateway.pipeline.dialects.door import door_pipeline
        from gateway.pipeline.dialects.responses import ResponsesDialect

        return door_pipeline(parts, ResponsesDialect(), store)

    def messages() -> ASGIApp:
        from gateway.pipeline.dialects.door import door_pipeline
        from gateway.pipeline.dialects.messages import MessagesDialect

        return door_pipeline(parts, MessagesDialect())

    def count_tokens() -> ASGIApp:
        from gateway.pipeline.dialects.door import door_pipeline
        from gateway.pipeline.dialects.messages import CountTokensDialect

        return door_pipeline(parts, CountTokensDialect())

    return {"/v1/responses": responses, "/v1/messages": messages, "/v1/messages/count_tokens": count_tokens}


def _console_routes(runtime: Runtime) -> list[tuple[str, str, ASGIApp]]:
    """The console's API routes, each handed the worker objects it uses (imported only when the console is on)."""
    from gateway.api.aggregates import AggregatesEndpoint
    from gateway.api.logstream import LogStreamEndpoint
    from gateway.api.playground import ValidateConfigEndpoint

    keys, logs = runtime.keys, runtime.logs
    validate = ValidateConfigEndpoint(keys, runtime.records, runtime.configs.checks, runtime.settings.max_body_bytes,
                                      lambda: runtime.steps.runner)
    stream = LogStreamEndpoint(keys, logs)
    runtime.lifecycle.add(stream)  # its tail closes with the worker
    return [("GET", "/v1/logs/stream", stream),
            ("GET", "/v1/logs/aggregates", AggregatesEndpoint(keys, logs)),
            ("POST", "/v1/configs/validate", validate)]
