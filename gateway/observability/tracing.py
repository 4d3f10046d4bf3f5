"""Trace export: request (and answering-attempt) spans in the client's trace, sent as OTLP/HTTP JSON.

Spans join the client's trace: trace id from ``x-gateway-trace-id`` (else a W3C ``traceparent``, else generated),
the request span's own id from ``x-gateway-span-id`` (else random), its parent from ``x-gateway-parent-span-id``
(else the ``traceparent`` parent id), its name from ``x-gateway-span-name``. OTLP ids must be hex (32 for a trace,
16 for a span): a client id that is not is replaced by a hash of it, and the original is kept as an attribute
(``gateway.trace_id``, ``gateway.span_id``, ``gateway.parent_span_id``).

Export never blocks requests: spans wait in a bounded queue (dropped, and counted, when it is full) and a
background task POSTs them in batches to ``<GATEWAY_OTLP_ENDPOINT>/v1/traces`` with a bounded timeout; a batch the
collector does not accept is dropped and counted.
"""

from __future__ import annotations

import asyncio
import hashlib
import sys
from collections import deque
from random import getrandbits
from typing import Any, Callable

import aiohttp
import msgspec

from gateway import USER_AGENT, __version__
from gateway.background import BackgroundTask
from gateway.observability.entry import timings
from gateway.observability.metrics import SPANS_DROPPED, SPANS_EXPORTED, Metrics
from gateway.waiting import wait_event, within

_HEX = "0123456789abcdef"
_encode = msgspec.json.encode
SPAN_KIND_SERVER = 2
SPAN_KIND_CLIENT = 3
STATUS_OK = 1
STATUS_ERROR = 2
#: the most of an export's answer the exporter reads (the status is all it needs; the read lets the connection be
#: reused); a longer answer is dropped with its connection
EXPORT_ANSWER_MAX_BYTES = 64 * 1024


def _is_hex(value: str, length: int) -> bool:
    return len(value) == length and not value.strip(_HEX) and value.strip("0") != ""


def otlp_id(value: str | None, length: int) -> tuple[str | None, bool]:
    """(an OTLP hex id of ``length`` for the client's value, whether it had to be derived)."""
    if not value:
        return None, False
    low = value.strip().lower()
    if _is_hex(low, length):
        return low, False
    return hashlib.sha256(value.encode("utf-8", "surrogateescape")).hexdigest()[:length], True


def traceparent_parent(traceparent: str | None, trace_id: str) -> str | None:
    """The parent span id of a well-formed ``traceparent`` that belongs to ``trace_id``."""
    if not traceparent:
        return None
    parts = traceparent.strip().lower().split("-")
    if len(parts) == 4 and parts[1] == trace_id and _is_hex(parts[2], 16):
        return parts[2]
    return None


def traces_url(endpoint: str) -> str:
    """``<base>/v1/traces`` for an OTLP/HTTP base URL (a URL already ending in /v1/traces is kept)."""
    base = endpoint.rstrip("/")
    return base if base.endswith("/v1/traces") else base + "/v1/traces"


def _traceparent(raw_headers: Any) -> str | None:
    """The request's ``traceparent`` header (the last one), read from its raw headers."""
    found = None
    for name, value in raw_headers or ():
        if name.lower() == b"traceparent":
            found = value.decode("latin-1")
    return found


def _str_attr(key: str, value: str) -> dict:
    return {"key": key, "value": {"stringValue": value}}


def _int_attr(key: str, value: int) -> dict:
    return {"key": key, "value": {"intValue": str(value)}}


def _attr(key: str, value: Any) -> dict:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    if isinstance(value, float):
        return {"key": key, "value": {"doubleValue": value}}
    return {"key": key, "value": {"stringValue": str(value)}}


def _nanos(seconds: float) -> str:
    return str(int(seconds * 1_000_000_000))


def request_spans(rec: Any, stats: Any, scrub: Callable[[str], str]) -> list[dict]:
    """The request span, and a client span for the answering upstream attempt when there was one.

    ``stats`` is what the recorder worked out for the record's log row (``rollups.RequestStats``: its wall-clock
    start, tokens and cost); ``scrub`` hides secrets in free text (the error message: called only when there is one).
    """
    trace_id, trace_derived = otlp_id(rec.trace_id, 32)
    if trace_id is None:
        trace_id, trace_derived = "%032x" % getrandbits(128), False
    span_id, span_derived = otlp_id(rec.span_id, 16)
    span_id = span_id or "%016x" % getrandbits(64)
    parent_id, parent_derived = otlp_id(rec.parent_span_id, 16)
    if parent_id is None:
        parent_id = traceparent_parent(_traceparent(rec.request_headers), trace_id)
    start = stats.ts
    end = start + rec.total_s
    attributes = [
        _str_attr("gateway.endpoint", rec.endpoint),
        _int_attr("http.response.status_code", rec.status),
        _attr("gateway.cache_status", rec.cache_status),
        _int_attr("gateway.retries", rec.retries),
        _int_attr("gateway.fallbacks", rec.fallbacks),
        {"key": "gateway.stream", "value": {"boolValue": bool(rec.stream)}},
    ]
    for key, value in (
        ("gateway.provider", rec.provider), ("gen_ai.request.model", rec.model), ("gateway.workspace", rec.workspace),
        ("gateway.target", rec.target_path),
    ):
        if value:
            attributes.append(_attr(key, value))
    if trace_derived:
        attributes.append(_attr("gateway.trace_id", rec.trace_id))
    if span_derived:
        attributes.append(_attr("gateway.span_id", rec.span_id))
    if parent_derived:
        attributes.append(_attr("gateway.parent_span_id", rec.parent_span_id))
    if stats.tokens_in or stats.tokens_out:
        attributes.append(_attr("gen_ai.usage.input_tokens", stats.tokens_in))
        attributes.append(_attr("gen_ai.usage.output_tokens", stats.tokens_out))
        attributes.append(_attr("gateway.cost_usd", stats.cost))
    if rec.ttft_s is not None:
        attributes.append(_attr("gateway.ttft_ms", round(rec.ttft_s * 1000, 3)))
    if rec.metadata:
        for key, value in rec.metadata.items():
            if isinstance(value, (str, int, float, bool)):
                attributes.append(_attr(f"gateway.metadata.{key}", value))
    status: dict[str, Any] = {"code": STATUS_OK if 200 <= rec.status < 400 else STATUS_ERROR}
    if rec.error:
        status = {"code": STATUS_ERROR, "message": scrub(rec.error)}
    span: dict[str, Any] = {
        "traceId": trace_id,
        "spanId": span_id,
        "name": rec.span_name or f"gateway {rec.endpoint}",
        "kind": SPAN_KIND_SERVER,
        "startTimeUnixNano": _nanos(start),
        "endTimeUnixNano": _nanos(end),
        "attributes": attributes,
        "status": status,
    }
    if parent_id:
        span["parentSpanId"] = parent_id
    spans = [span]
    if rec.upstream_started:
        up_start = rec.upstream_started - rec.started + start
        upstream_s = timings(rec)[0]
        up_end = up_start + upstream_s if upstream_s is not None else end
        spans.append({
            "traceId": trace_id,
            "spanId": "%016x" % getrandbits(64),
            "parentSpanId": span_id,
            "name": f"upstream {rec.provider or ''}".rstrip(),
            "kind": SPAN_KIND_CLIENT,
            "startTimeUnixNano": _nanos(up_start),
            "endTimeUnixNano": _nanos(max(up_start, up_end)),
            "attributes": [_attr("gateway.provider", rec.provider or ""),
                           _attr("gateway.target", rec.target_path or ""), _attr("gateway.retries", rec.retries)],
            "status": {"code": status["code"]},
        })
    return spans


_BODY_END = b"]}]}]}"


class OtlpExporter:
    """Batches spans and POSTs them as OTLP/HTTP JSON from a background task; never waits on behalf of a request."""

    def __init__(self, endpoint: str, max_queue: int = 8192, batch_size: int = 512, interval_s: float = 1.0,
                 timeout_s: float = 5.0, service_name: str = "gateway", metrics: Metrics | None = None) -> None:
        self.url = traces_url(endpoint)
        #: where exported and dropped spans are counted (a private one when none is given)
        self.metrics = metrics if metrics is not None else Metrics()
        self.max_queue = max_queue
        self.batch_size = batch_size
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        #: spans encoded as they are queued: bytes hold less memory than the span's dicts and are never scanned by
        #: the garbage collector while they wait; a batch is their join
        self._queue: deque[bytes] = deque()
        resource = {"attributes": [_attr("service.name", service_name), _attr("service.version", __version__)]}
        scope = {"name": "gateway", "version": __version__}
        #: an export body is this, the spans joined by commas, and ``_BODY_END``
        self._body_start = (b'{"resourceSpans":[{"resource":' + _encode(resource) + b',"scopeSpans":[{"scope":'
                            + _encode(scope) + b',"spans":[')
        self._session: aiohttp.ClientSession | None = None
        self._exporter = BackgroundTask("otlp-exporter")
        self._wake: asyncio.Event | None = None
        self._closing = False
        self._warned = False

    def add(self, spans: list[dict]) -> None:
        """Queue spans (event loop only); when the queue is full they are dropped and counted."""
        queue = self._queue
        if len(queue) + len(spans) > self.max_queue:
            self.metrics.count(SPANS_DROPPED, ("queue_full",), len(spans))
            return
        queue.extend(map(_encode, spans))
        if len(queue) >= self.batch_size and self._wake is not None:
            self._wake.set()

    async def start(self) -> None:
        # no cookie jar: a collector (or a proxy in front of it) setting cookies gets none back, as upstreams do not
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout_s),
                                              headers={"user-agent": USER_AGENT}, cookie_jar=aiohttp.DummyCookieJar())
        self._wake = asyncio.Event()
        self._exporter = BackgroundTask("otlp-exporter")  # an exporter started again exports again
        self._exporter.start(self._run)

    async def _run(self) -> None:
        assert self._wake is not None
        while not self._closing:
            await wait_event(self._wake, self.interval_s)
            self._wake.clear()
            while self._queue and not self._closing:
                await self._export(self._take())

    def _take(self) -> list[bytes]:
        queue = self._queue
        return [queue.popleft() for _ in range(min(self.batch_size, len(queue)))]

    async def _export(self, spans: list[bytes]) -> None:
        body = self._body_start + b",".join(spans) + _BODY_END
        try:
            assert self._session is not None
            async with self._session.post(self.url, data=body,
                                          headers={"content-type": "application/json"}) as response:
                await _drain(response)
                ok = 200 <= response.status < 300
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            ok = False
            self._warn(f"{exc.__class__.__name__}: {exc}")
        if ok:
            self.metrics.count(SPANS_EXPORTED, (), len(spans))
        else:
            self.metrics.count(SPANS_DROPPED, ("export_failed",), len(spans))

    def _warn(self, message: str) -> None:
        if not self._warned:
            self._warned = True
            print(f"gateway: trace export to {self.url} failed ({message}); spans are dropped and counted in "
                  "gateway_trace_spans_dropped_total", file=sys.stderr, flush=True)

    async def close(self) -> None:
        """Stop the task and try once more to send what is queued (the whole close bounded by the timeout)."""
        self._closing = True
        if self._wake is not None:
            self._wake.set()
        try:
            await within(self._finish(), self.timeout_s)
        except TimeoutError:
            self.metrics.count(SPANS_DROPPED, ("export_failed",), len(self._queue))
            self._queue.clear()
        finally:
            await self._exporter.close()  # past the timeout: cancelled (an export in flight is dropped)
            if self._session is not None:
                await self._session.close()
                self._session = None

    async def _finish(self) -> None:
        await self._exporter.join()
        while self._queue:
            await self._export(self._take())


async def _drain(response: aiohttp.ClientResponse) -> None:
    """Read an export's answer to its end (so the connection can be reused), or close the connection once it passes
    EXPORT_ANSWER_MAX_BYTES (a collector that answers endlessly holds nothing of the exporter's memory)."""
    size = 0
    while chunk := await response.content.readany():
        size += len(chunk)
        if size > EXPORT_ANSWER_MAX_BYTES:
            response.close()
            return
