"""Running a routing tree: strategies (single, loadbalance, fallback, conditional), retries, per-attempt
request_timeout and the circuit breaker, around an ``attempt`` callable that makes one upstream try.

Failures are GatewayErrors. Fallback moves to the next target on any failure by default, or only on the failing
target's ``on_status_codes`` / the strategy's ``on_status_codes``; timeouts, connection failures and open breakers
always fall back. When every target fails, the last target's error is returned with
``x-gateway-fallback-exhausted: true``. A guardrail's deny (446) ends the request: it is never retried, never
counted by a breaker and never a reason to fall back.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

from gateway.http.errors import (
    CircuitOpen,
    GatewayError,
    GuardrailDenied,
    RequestTimeout,
    UpstreamTimeout,
    UpstreamUnreachable,
)
from gateway.routing.breaker import CircuitBreaker, counts_as_failure
from gateway.routing.conditions_in_use import first_match
from gateway.routing.plan import Node
from gateway.routing.retry import backoff_s, retry_after_s, should_retry


class RunState:
    """What one request's run did: the answering target's path, its retries, counters for logs and metrics."""

    __slots__ = ("path", "retries", "fallbacks", "breaker_opens", "timeout_ms", "params", "metadata", "attempts")

    def __init__(self, timeout_ms: int | None, metadata: dict, params: Callable[[], dict]) -> None:
        self.path = "config"
        self.retries = 0
        self.fallbacks = 0
        self.breaker_opens = 0
        self.attempts = 0
        self.timeout_ms = timeout_ms
        self.metadata = metadata
        self.params = params


Attempt = Callable[[Node], Awaitable[Any]]
_EXHAUSTED = (b"x-gateway-fallback-exhausted", b"true")


def _exhausted(error: GatewayError) -> bool:
    return error.headers is not None and _EXHAUSTED in error.headers


def _target_name(node: Node) -> str:
    """How a message names a target: its provider, and its place when the config has targets."""
    provider = node.config.provider or "the upstream"
    if node.path == "config":
        return provider
    return f"{provider} ({node.path[len('config.'):]})"
_ALWAYS_FALLBACK = (RequestTimeout, UpstreamTimeout, UpstreamUnreachable, CircuitOpen)


def needs_router(node: Node, state: RunState, default_timeout_ms: int | None) -> bool:
    """False when the request is one plain attempt at a lone target (the hot path: no frames to add)."""
    return not (node.direct and state.timeout_ms is None and default_timeout_ms is None)


class Router:
    def __init__(
        self,
        breaker: CircuitBreaker,
        retry_after_max_ms: int,
        default_timeout_ms: int | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.breaker = breaker
        self.default_timeout_ms = default_timeout_ms
        self.retry_after_max_s = retry_after_max_ms / 1000
        self.sleep = sleep

    async def run(self, node: Node, attempt: Attempt, state: RunState) -> Any:
        """Run ``node``. Callers may skip this for a ``direct`` node when no request_timeout applies (see
        ``needs_router``): the attempt is then made as it would be here, one call with nothing around it."""
        mode = node.mode
        if mode is None:
            return await self._leaf(node, attempt, state)
        if mode == "fallback":
            return await self._fallback(node, attempt, state)
        if mode == "loadbalance":
            return await self.run(await self._pick_weighted(node), attempt, state)
        if mode == "conditional":
            match = first_match(node.compiled, state.metadata, state.params())
            index = node.then_index[match] if match >= 0 else node.default_index
            return await self.run(node.children[index], attempt, state)
        return await self.run(node.children[0], attempt, state)

    async def _pick_weighted(self, node: Node) -> Node:
        if not node.has_breakers:
            return node.pick_weighted()
        for _ in range(len(node.children) * 2):
            child = node.pick_weighted()
            if child.config.cb_config is None or not await self.breaker.is_open(child.breaker_key):
                return child
        return node.pick_weighted()

    async def _fallback(self, node: Node, attempt: Attempt, state: RunState) -> Any:
        last: GatewayError | None = None
        children = node.children
        for i, child in enumerate(children):
            try:
                return await self.run(child, attempt, state)
            except GuardrailDenied:
                raise
            except GatewayError as error:
                last = error
                codes = node.fallback_codes[i]
                if codes and error.status not in codes and not isinstance(error, _ALWAYS_FALLBACK):
                    raise
                if i + 1 < len(children):
                    state.fallbacks += 1
        assert last is not None
        if len(children) > 1 and not _exhausted(last):  # a nested fallback may have said so already
            last.headers = (last.headers or []) + [_EXHAUSTED]
        raise last

    async def _leaf(self, node: Node, attempt: Attempt, state: RunState) -> Any:
        config = node.config
        breaker = config.cb_config
        state.path = node.path
        state.retries = 0
        if breaker is not None and await self.breaker.is_open(node.breaker_key):
            raise CircuitOpen(f"circuit breaker open for {node.path}; skipped until its cooldown ends")
        retry = config.retry
        max_retries = retry.attempts if retry is not None else 0
        timeout_ms = state.timeout_ms or config.request_timeout or self.default_timeout_ms
        n = 0
        while True:
            state.attempts += 1
            try:
                if timeout_ms:
                    try:
                        async with asyncio.timeout(timeout_ms / 1000):
                            outcome = await attempt(node)
                    except TimeoutError:
                        raise RequestTimeout(
                            f"request_timeout of {timeout_ms} ms ran out waiting for {_target_name(node)}"
                        ) from None
                else:
                    outcome = await attempt(node)
            except GuardrailDenied:
                raise
            except GatewayError as error:
                if breaker is not None and counts_as_failure(error.status, breaker.failure_status_codes):
                    if await self.breaker.record_failure(
                        node.breaker_key, breaker.failure_threshold, breaker.cooldown_interval
                    ):
                        state.breaker_opens += 1
                if n >= max_retries or not should_retry(error, retry.on_status_codes if retry else None):
                    raise
                wait = backoff_s(n)
                if retry is not None and retry.use_retry_after_headers:
                    asked = retry_after_s(error)
                    if asked is not None:
                        if asked > self.retry_after_max_s:
                            raise
                        wait = asked
                await self.sleep(wait)
                n += 1
                state.retries = n
                continue
            if breaker is not None:
                await self.breaker.record_success(node.breaker_key)
            return outcome
