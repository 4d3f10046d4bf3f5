"""The request log entry: what the background task derives from a record once (timings, tokens, cost, masked
headers) and the JSON entry built from it.

Everything here runs off the request path (the recorder's background task), except ``attach_bodies``, which the
pipeline calls only when ``GATEWAY_LOG_BODIES=1``. The (masked) request headers are part of the entry for failed
requests and with ``GATEWAY_LOG_BODIES=1``; a successful request's line leaves them out (they cost a third of the
per-record work and are rarely needed for a request that worked).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Callable

import msgspec

from gateway.http.context import client_headers
from gateway.observability.cost import Prices
from gateway.observability.estimate import estimate, relayed_text_chars, text_chars
from gateway.observability.masking import Masker
from gateway.observability.record import RequestRecord

_encode = msgspec.json.encode
_decode = msgspec.json.decode


def attach_bodies(record: RequestRecord, state: Any, response_body: bytes | None) -> None:
    """Put the bodies on the record (pipeline, only with GATEWAY_LOG_BODIES=1): the request as the gateway decoded
    it and the JSON answer (streamed answers are not buffered, so not logged)."""
    if state is not None:
        try:
            record.request_body = _encode(state.params())
        except Exception:  # noqa: BLE001 - a body that does not decode is simply not logged
            pass
    if response_body is not None:
        record.response_body = response_body


def tokens(usage: Any) -> tuple[int, int, int]:
    """(input, output, total) tokens of a usage Struct or dict (0 when absent)."""
    if usage is None:
        return 0, 0, 0
    if isinstance(usage, dict):
        tin = usage.get("prompt_tokens") or usage.get("input_tokens") or 0
        tout = usage.get("completion_tokens") or usage.get("output_tokens") or 0
        total = usage.get("total_tokens") or 0
    else:
        tin = getattr(usage, "prompt_tokens", 0) or 0
        tout = getattr(usage, "completion_tokens", 0) or 0
        total = getattr(usage, "total_tokens", 0) or 0
    tin = tin if isinstance(tin, int) else 0
    tout = tout if isinstance(tout, int) else 0
    total = total if isinstance(total, int) else 0
    return tin, tout, total or tin + tout


def estimated_usage(rec: Any) -> Any:
    """The gateway's estimate for a record that asked for one (see ``gateway.observability.estimate``)."""
    if rec.answer is not None:
        chars = text_chars(rec.answer)
    else:
        head = rec.relayed_head
        chars = relayed_text_chars(b"".join(head) if head else None, rec.relayed_rest_bytes,
                                   rec.relayed_rest_events)
    return estimate(rec.request, chars)


def timings(rec: Any) -> tuple[float | None, float | None]:
    """(upstream seconds, gateway-added seconds) of a record.

    Upstream time is the answering exchange: to the parsed answer for JSON, to the stream's end for streams
    (None when the last upstream answered an error). The added time is total minus upstream, only for requests
    answered in one attempt (retries, fallbacks and backoff are not the gateway's overhead); a request that never
    reached an upstream is all gateway time.
    """
    upstream: float | None = None
    if rec.upstream_started:
        if rec.upstream_s:
            upstream = rec.upstream_s
        elif rec.stream and rec.ttft_s is not None:  # relayed, whether it ended well, broke off or was left
            upstream = max(0.0, rec.started + rec.total_s - rec.upstream_started)
    added: float | None = None
    if not rec.retries and not rec.fallbacks:
        if upstream is not None:
            added = max(0.0, rec.total_s - upstream)
        elif not rec.upstream_started:
            added = rec.total_s
    return upstream, added


class LogEntry(msgspec.Struct):
    """One request log line (and one ``GET /v1/logs`` item, which adds ``id``)."""

    time: str
    timestamp: float
    trace_id: str
    span_id: str | None
    parent_span_id: str | None
    span_name: str | None
    workspace: str | None
    endpoint: str
    provider: str | None
    model: str | None
    status: int
    stream: bool
    latency_ms: float
    upstream_latency_ms: float | None
    gateway_latency_ms: float | None
    ttft_ms: float | None
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    usage_source: str
    cost_usd: float
    cache_status: str
    retries: int
    fallbacks: int
    breaker_opens: int
    target: str | None
    metadata: dict[str, Any] | None
    error: str | None
    request_headers: Any = msgspec.UNSET
    request_body: Any = msgspec.UNSET
    response_body: Any = msgspec.UNSET
    #: the hooks' and guardrails' results (async ones too) and the feedback they recorded, when any ran
    hook_results: Any = msgspec.UNSET
    #: what an images or audio answer counted where the provider reported no tokens: ``{"images": n}`` or
    #: ``{"audio_seconds": s}`` (docs/images-and-audio.md)
    units: Any = msgspec.UNSET


def masked_request_headers(rec: Any, masker: Masker) -> tuple[dict[str, str], list[str]]:
    """A record's request headers as its log line shows them (masked), and the clear secrets found in them (hidden
    wherever else they could appear: error text, bodies, a span's status)."""
    return masker.headers(client_headers(rec.request_headers or ()), rec.sensitive_headers)


class Derived:
    """What the background task works out once per record and shares between logs, metrics and traces."""

    __slots__ = ("wall_start", "upstream_s", "added_s", "tokens_in", "tokens_out", "tokens_total", "cost",
                 "headers", "secrets")

    def __init__(self, rec: Any, wall_offset: float, masker: Masker, prices: Prices) -> None:
        self.headers: dict[str, str] | msgspec.UnsetType
        self.secrets: list[str]
        self.wall_start = rec.started + wall_offset
        self.upstream_s, self.added_s = timings(rec)
        usage = rec.usage
        if usage is None and rec.usage_source == "estimated":
            usage = estimated_usage(rec)
        self.tokens_in, self.tokens_out, self.tokens_total = tokens(usage)
        self.cost = prices.cost_usd(rec.provider, rec.model, self.tokens_in, self.tokens_out)
        if rec.error is not None or rec.request_body is not None or rec.response_body is not None:
            # failed requests and verbose (GATEWAY_LOG_BODIES) logs carry the masked request headers; the clear
            # secrets found in them are scrubbed from the error text and bodies
            self.headers, self.secrets = masked_request_headers(rec, masker)
        else:
            self.headers, self.secrets = msgspec.UNSET, []


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)


def _body(data: bytes | None, masker: Masker, secrets: list[str]) -> Any:
    if data is None:
        return msgspec.UNSET
    data = masker.scrub_bytes(data, secrets)
    try:
        return _decode(data)
    except msgspec.DecodeError:
        return data.decode("utf-8", "replace")


def iso_time(ts: float) -> str:
    """UTC ISO 8601 with milliseconds (``2025-01-31T12:00:00.123Z``)."""
    second = int(ts)
    return "%s.%03dZ" % (datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S"), int((ts - second) * 1000))


class IsoClock:
    """``iso_time`` that formats each second once (the recorder's: records come in time order)."""

    __slots__ = ("_second", "_text")

    def __init__(self) -> None:
        self._second = -1
        self._text = ""

    def iso(self, ts: float) -> str:
        second = int(ts)
        if self._second != second:
            self._second = second
            self._text = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        return "%s.%03dZ" % (self._text, int((ts - second) * 1000))


def build_entry(rec: Any, d: Derived, masker: Masker, iso: Callable[[float], str] = iso_time) -> LogEntry:
    error = rec.error
    if error and d.secrets:
        error = masker.scrub(error, d.secrets)
    wall = d.wall_start
    return LogEntry(
        iso(wall), round(wall, 6), rec.trace_id, rec.span_id, rec.parent_span_id, rec.span_name,
        rec.workspace, rec.endpoint, rec.provider, rec.model, rec.status, rec.stream, round(rec.total_s * 1000, 3),
        _ms(d.upstream_s), _ms(d.added_s), _ms(rec.ttft_s), d.tokens_in, d.tokens_out, d.tokens_total,
        rec.usage_source,
        round(d.cost, 8), rec.cache_status, rec.retries, rec.fallbacks, rec.breaker_opens, rec.target_path,
        rec.metadata, error, d.headers,
        _body(rec.request_body, masker, d.secrets) if rec.request_body is not None else msgspec.UNSET,
        _body(rec.response_body, masker, d.secrets) if rec.response_body is not None else msgspec.UNSET,
        _hook_results(rec),
        _units(rec.usage),
    )


def _units(usage: Any) -> Any:
    if isinstance(usage, dict) and ("images" in usage or "audio_seconds" in usage):
        return {k: usage[k] for k in ("images", "audio_seconds") if k in usage}
    return msgspec.UNSET


def _hook_results(rec: Any) -> Any:
    hooks = getattr(rec, "hooks", None)
    if hooks is None:
        return msgspec.UNSET
    view = hooks.log_view()
    return msgspec.UNSET if view is None else view


def encode_entry(entry: LogEntry) -> bytes:
    return _encode(entry)
