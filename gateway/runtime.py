"""Per-worker runtime: the objects every request uses, built once at startup and closed at shutdown.

Every cache lives on an object the runtime owns (the config parser, resolver and planner, the prices, the policy
gate), so a fresh runtime starts with fresh caches.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any, Callable

from gateway.api.config_checks import config_checks
from gateway.config.resolve import ConfigResolver
from gateway.config.validate import ConfigParser
from gateway.controlplane.directory import RecordCache
from gateway.controlplane.keys import ApiKeys, KeyStore
from gateway.controlplane.secrets import SecretBox, open_box
from gateway.lifecycle import Lifecycle, Service, Stage
from gateway.observability.cost import Prices
from gateway.observability.logbackend import LogBackend, WarnOnce
from gateway.observability.looplag import LoopLagMonitor
from gateway.observability.metrics import Metrics
from gateway.observability.recorder import ObservabilityRecorder
from gateway.observability.sqlitelog import SqliteLogs
from gateway.pipeline.pipeline import PipelineParts
from gateway.policies.gate import PolicyGate
from gateway.providers.registry import ProviderRegistry
from gateway.routing.breaker import CircuitBreaker
from gateway.routing.execute import Router
from gateway.routing.plan import Planner
from gateway.settings import Settings, data_path
from gateway.state.base import StateStore
from gateway.state.select import open_store
from gateway.state.watch import RecordWatcher
from gateway.upstream.client import UpstreamClient
from gateway.upstream.exchange import UpstreamExchange
from gateway.upstream.lean import LeanTransport
from gateway.upstream.transport import UpstreamTransport

if TYPE_CHECKING:
    from gateway.pipeline.steps import PipelineSteps


class Runtime:
    def __init__(self, settings: Settings, store: StateStore | None = None, logs: LogBackend | None = None,
                 breaker_clock: Callable[[], float] | None = None) -> None:
        self.settings = settings
        #: this worker's rare-event counts and loop lag, handed to whatever counts them; the recorder flushes it
        self.metrics = Metrics()
        self.store = store or open_store(settings, self.metrics)
        #: polls the store's records version; per-worker caches subscribe to drop entries when records change
        self.watcher = RecordWatcher(self.store, settings.state_watch_interval_ms)
        self.api_keys = ApiKeys(self.store)
        #: gateway keys and the records the request path reads (slugs, saved configs, prompts), per worker
        self.keys = KeyStore(self.api_keys, settings.admin_key)
        self.records = RecordCache(self.store, self._open_box)
        # per kind: a write of another kind (a file, a batch, a policy) leaves these caches as they are; and per key:
        # a key created or revoked drops only its own answer (all of them when the watcher cannot say which changed)
        self.watcher.subscribe(self.keys.invalidate, KeyStore.KINDS, forget=self.keys.forget)
        self.watcher.subscribe(self.records.invalidate, RecordCache.KINDS)
        self.configs = ConfigParser(config_checks())
        self.resolver = ConfigResolver(self.configs)
        self.planner = Planner(self.configs)
        #: the price table's answers: request costs in logs and metrics, and cost limits
        self.prices = Prices(metrics=self.metrics)
        #: active usage and rate limit policies per workspace, reloaded when records change
        self.policies = PolicyGate(self.store, settings, self._key_id, self.prices, self.metrics)
        self.watcher.subscribe(self.policies.invalidate, PolicyGate.KINDS)
        self.client = UpstreamClient(settings)
        self.providers = ProviderRegistry(self.client)
        #: header names never forwarded, whatever a request says (the organisation_headers_to_mask setting)
        self.masked_headers = frozenset(n.lower() for n in settings.organisation_headers_to_mask)
        #: the request path's transport: the lean one (which leaves proxied upstreams and streamed uploads to
        #: ``client``), or ``client`` itself (GATEWAY_UPSTREAM_TRANSPORT=aiohttp)
        self.transport: UpstreamTransport = (
            LeanTransport(settings, self.client) if settings.upstream_transport == "lean" else self.client)
        #: every request-path upstream call goes through it; a test swaps ``exchange.transport`` for a MockTransport
        self.exchange = UpstreamExchange(self.transport, self.masked_headers)
        self.breaker = CircuitBreaker(self.store, breaker_clock) if breaker_clock else CircuitBreaker(self.store)
        self.router = Router(self.breaker, settings.retry_after_max_ms, settings.request_timeout_ms)
        self._steps: PipelineSteps | None = None
        self._mcp: Any = None
        self._agents: Any = None
        self._embeddings_config: Any = None
        if settings.semantic_cache_embeddings.strip() != "local":  # a bad one stops the worker's start
            from gateway.cache.provider_embedder import embeddings_config

            self._embeddings_config = embeddings_config(self.configs, settings.semantic_cache_embeddings)
        warn = WarnOnce()
        #: the request-log store (SQLite, or PostgreSQL with GATEWAY_LOG_STORE_URL): written by the recorder, read by
        #: the log routes
        self.logs = logs if logs is not None else _log_backend(settings, self.metrics, warn)
        self.recorder = ObservabilityRecorder(settings, self.logs, prices=self.prices, metrics=self.metrics, warn=warn)
        self.loop_lag = LoopLagMonitor(observe=self.metrics.observe_loop_lag)
        #: the worker's parts in start order; the services the routes mount (the body watch, the jobs) are added after
        #: these, so they start last and close first
        self.lifecycle = self._lifecycle()
        self.ready = False

    @property
    def state_ready(self) -> bool:
        """False while the store is unreachable and limits fail closed (then /ready answers 503)."""
        return self.store.healthy or self.settings.state_fail_mode == "open"

    def _key_id(self, api_key: str | None) -> str | None:
        """The id of an authenticated gateway key (what the ``api_key`` policy key matches); a key stored without
        one is named by its masked form, ``sha256:<16 hex>`` as in the logs."""
        if not api_key:
            return None
        record = self.keys.known(api_key)
        if record is None:
            return None
        return record.key_id or "sha256:" + hashlib.sha256(api_key.encode()).hexdigest()[:16]

    def _open_box(self) -> SecretBox:
        return open_box(self.settings.secret_key, data_path(self.settings))

    @property
    def steps(self) -> PipelineSteps:
        """The response cache and the guardrails, made when a request or route first needs them: a worker whose
        configs use neither never imports them."""
        if self._steps is None:
            from gateway.guardrails.saved import KIND as GUARDRAIL_KIND
            from gateway.pipeline.steps import PipelineSteps

            embedder = self._provider_embedder if self._embeddings_config is not None else None
            self._steps = PipelineSteps(self.settings, self.store, self.client,
                                        lambda callback: self.watcher.subscribe(callback, (GUARDRAIL_KIND,)),
                                        lambda: self.records.box, embedder)
        return self._steps

    @property
    def mcp(self) -> Any:
        """The MCP gateway's objects (``gateway.mcp.service.McpService``), made on the first MCP request or admin
        call: a worker that serves none never imports them."""
        if self._mcp is None:
            from gateway.mcp.guard import CallGuard
            from gateway.mcp.service import McpService

            guard = CallGuard(self.configs.parse, self.records, lambda: self.steps.runner)
            self._mcp = McpService(self.settings, self.transport, self.store, guard)
        return self._mcp

    @property
    def agents(self) -> Any:
        """The A2A agent data path's objects (``gateway.agents.service.AgentService``), made on the first agent call
        or card read: a worker that serves none never imports them."""
        if self._agents is None:
            from gateway.agents.guard import AgentGuard
            from gateway.agents.service import AgentService

            guard = AgentGuard(self.configs.parse, self.records, lambda: self.steps.runner)
            self._agents = AgentService(self.settings, self.transport, guard)
        return self._agents

    def _provider_embedder(self) -> Any:
        """The semantic cache's embedder over the GATEWAY_SEMANTIC_CACHE_EMBEDDINGS config (its router, adapters
        and upstream client are this worker's)."""
        from gateway.cache.provider_embedder import ProviderEmbedder

        settings = self.settings
        return ProviderEmbedder(self._embeddings_config, settings.semantic_cache_embedding_model, self,
                                capacity=settings.semantic_cache_threads + settings.semantic_cache_queue)

    def pipeline_parts(self) -> PipelineParts:
        """What the inference pipeline uses of this worker (one for every endpoint's ``Pipeline``)."""
        settings = self.settings
        return PipelineParts(self.keys, self.records, self.resolver, self.planner, self.policies, self.router,
                             self.providers, self.exchange, self.recorder, lambda: self.steps,
                             settings.max_body_bytes, settings.log_bodies)

    def _lifecycle(self) -> Lifecycle:
        """The worker's own parts in the order they start; they close in the reverse order (the state store last but
        for the key cache), and a start that fails closes what had started."""
        parts: list[Service] = [
            Stage("key cache", close=self.keys.close), self.store, self.watcher, self.transport,
            Stage("providers", close=self.providers.close),
            Stage("loop lag", start=self.loop_lag.start, close=self.loop_lag.stop), self.policies, self.recorder,
            Stage("pipeline steps", close=self._close_steps),
        ]
        lifecycle = Lifecycle()
        for part in parts:
            lifecycle.add(part)
        return lifecycle

    async def _close_steps(self) -> None:
        """Stop the cache and guardrail steps, when a request made them (their log lines reach the recorder)."""
        if self._steps is not None:
            await self._steps.close()

    async def start(self) -> None:
        await self.lifecycle.start()
        self.ready = True

    async def close(self) -> None:
        self.ready = False
        await self.lifecycle.close()


def _log_backend(settings: Settings, metrics: Metrics, warn: WarnOnce) -> LogBackend:
    """The worker's request-log store: PostgreSQL when GATEWAY_LOG_STORE_URL is set (asyncpg is imported only
    then), else the SQLite file in the data directory."""
    if settings.log_store_url:
        from gateway.observability.pglog.backend import PgLogs

        return PgLogs.for_settings(settings, metrics, warn)
    return SqliteLogs.for_settings(settings, warn)
