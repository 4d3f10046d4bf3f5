"""The record of one request, filled by the pipeline and handed off the request path to logs and metrics."""

from __future__ import annotations

from typing import Any


class RequestRecord:
    """Everything logs and metrics want to know about one request."""

    __slots__ = (
        "trace_id", "span_id", "parent_span_id", "span_name", "workspace", "endpoint", "provider", "model",
        "status", "stream", "started", "upstream_started", "upstream_s", "ttft_s", "total_s", "usage",
        "cache_status", "retries", "fallbacks", "breaker_opens", "target_path", "metadata", "error",
        "request_headers", "sensitive_headers", "request_body", "response_body", "usage_source", "request",
        "answer", "relayed_head", "relayed_rest_bytes", "relayed_rest_events", "budget", "hooks",
    )

    def __init__(self, trace_id: str, endpoint: str, started: float) -> None:
        self.trace_id = trace_id
        self.span_id: str | None = None
        self.parent_span_id: str | None = None
        self.span_name: str | None = None
        self.workspace: str | None = None
        self.endpoint = endpoint
        self.provider: str | None = None
        self.model: str | None = None
        self.status = 0
        self.stream = False
        self.started = started
        self.upstream_started = 0.0
        self.upstream_s = 0.0
        self.ttft_s: float | None = None
        self.total_s = 0.0
        self.usage: Any = None
        self.cache_status = "DISABLED"
        self.retries = 0
        self.fallbacks = 0
        self.breaker_opens = 0
        self.target_path: str | None = None
        self.metadata: dict[str, Any] | None = None
        self.error: str | None = None
        #: the ASGI header list as received (``gateway.http.context.client_headers`` turns it into a dict)
        self.request_headers: list[tuple[bytes, bytes]] | tuple | None = None
        self.sensitive_headers: frozenset[str] = frozenset()
        self.request_body: bytes | None = None
        self.response_body: bytes | None = None
        #: where the tokens come from: "reported" (``usage``, the provider's), "estimated" (the recorder works
        #: them out from ``request`` and ``answer`` or the relayed_* counts, see observability/estimate.py), "none"
        self.usage_source = "none"
        #: the decoded request sent upstream, and a JSON answer that had no usage (for the estimate)
        self.request: Any = None
        self.answer: bytes | None = None
        #: the chunks a stream relayed, up to estimate.HEAD_BYTES, and the bytes and events relayed past them (for
        #: the estimate of a stream without the provider's usage)
        self.relayed_head: list[bytes] | None = None
        self.relayed_rest_bytes = 0
        self.relayed_rest_events = 0
        #: what usage and rate limit policies reserved for this request (settled after the answer), or None
        self.budget: Any = None
        #: the request's cache and guardrail steps (``gateway.pipeline.steps.RequestSteps``) when its config has any:
        #: they finish the record (and give the log line its ``hook_results``)
        self.hooks: Any = None


class Recorder:
    """Takes finished records without blocking; the default keeps nothing (logs and metrics plug in here)."""

    def record(self, record: RequestRecord) -> None:
        return None

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None
