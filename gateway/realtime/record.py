"""One WebSocket session as the rest of the house sees a request: one request record when it ends (``/v1/logs``, the
log stream, aggregates, the console, metrics) and the policy hold it settles.

The record's ``endpoint`` is the dialect's (``realtime``; ``responses.websocket`` for the Responses API's WebSocket
mode, whose record takes its ``model`` from the last response when the client named none in the query), its
``provider`` and ``model`` the session's target, its ``status`` 101 for a session that was accepted (whatever closed
it) or the refusal's HTTP status; ``usage`` is the sum of the responses' usage (``gateway/realtime/usage.py``,
``usage_source`` ``reported``) and its ``metadata`` (beside the client's ``x-gateway-metadata``) holds
``realtime_close_code``, ``realtime_close_reason``, ``realtime_closed_by`` (``client``, ``upstream`` or
``gateway``), ``realtime_messages_in`` / ``_out``, ``realtime_bytes_in`` / ``_out`` (in: from the client),
``realtime_responses`` and the usage details (``realtime_cached_tokens``, ``realtime_input_text_tokens``,
``realtime_input_audio_tokens``, ``realtime_output_text_tokens``, ``realtime_output_audio_tokens``; for a Responses
session ``realtime_cached_tokens`` and ``realtime_reasoning_tokens``: the ``realtime_`` keys name a session's facts
in both dialects). A session that did not end cleanly (lost provider, oversized message, a gateway fault) carries
the reason as its ``error``. The upgrade's headers are kept as every record keeps them (masked; the
``sec-websocket-protocol`` header, which may carry the gateway key, is among the sensitive ones).

Latency: an accepted session's record times its open handshake, not its length (a 10-minute session would skew
its workspace's latency percentiles, the duration histograms and the aggregates): ``latency_ms`` is the upgrade's
arrival to the session's accept, ``upstream_latency_ms`` the provider's handshake inside it (so the gateway-added
time is the gateway's own work to open it), and the session's whole length is ``realtime_duration_ms`` in its
``metadata``. A refused upgrade (or one the client left before its accept) is timed whole, as any request.

The policy hold: an accepted session's hold is settled response by response (``watch``, ``budget.py``), which then
settles what is left when it ends; any other hold (a refused or never-accepted session's) is settled to the
record's usage as a request's is.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from gateway.http.context import RequestContext
from gateway.http.errors import GatewayError
from gateway.observability.record import RequestRecord
from gateway.policies.parts import HoldParts
from gateway.realtime.budget import BudgetWatch
from gateway.realtime.relay import Ending, Traffic
from gateway.realtime.usage import REALTIME_ENDS, SessionUsage

ENDPOINT = "realtime"
#: the status of a session that was accepted (the upgrade's ``101 Switching Protocols``)
ACCEPTED = 101


class SessionLog:
    """The record of one session (or of its refused upgrade), its traffic, usage and policy hold."""

    __slots__ = ("record", "traffic", "usage", "hold", "policies", "parts", "ctx", "open_s")

    def __init__(self, started: float, endpoint: str = ENDPOINT, usage_ends: tuple[str, ...] = REALTIME_ENDS) -> None:
        self.record = RequestRecord("", endpoint, started)
        self.traffic = Traffic()
        self.usage = SessionUsage(usage_ends)
        self.hold: Any = None
        self.policies: Any = None
        #: the hold settled response by response (``watch``), which then settles its rest at the end
        self.parts: HoldParts | None = None
        self.ctx: RequestContext | None = None
        #: seconds from the upgrade's arrival to the session's accept (None until accepted)
        self.open_s: float | None = None

    def know(self, ctx: RequestContext) -> None:
        """The upgrade request's context: trace and span ids, headers (masked when logged)."""
        self.ctx = ctx
        record = self.record
        record.trace_id = ctx.trace_id
        record.span_id = ctx.span_id
        record.parent_span_id = ctx.parent_span_id
        record.span_name = ctx.span_name
        record.request_headers = ctx.raw_headers
        record.sensitive_headers = ctx.sensitive_headers

    def connected(self) -> None:
        """The provider's socket is open: the record's upstream time is its handshake."""
        record = self.record
        record.upstream_s = time.perf_counter() - record.upstream_started

    def opened(self) -> None:
        """The client's upgrade was accepted: the record's latency is the open handshake (``done``)."""
        self.open_s = time.perf_counter() - self.record.started

    def watch(self, provider: str, model: str | None,
              event: Callable[[str], str] | None = None) -> BudgetWatch | None:
        """The accepted session's hold settled response by response, with its budgets checked (``budget.py``); None
        when no policy holds tokens or cost for it."""
        if self.policies is None:
            return None
        self.parts = self.policies.parts(self.hold, provider, model)
        return BudgetWatch.of(self.policies.store, self.parts, event)

    def refused(self, error: GatewayError) -> SessionLog:
        record = self.record
        record.status = error.status
        record.error = error.message
        record.metadata = self._client_metadata() or None
        return self

    def ended(self, ending: Ending) -> SessionLog:
        record = self.record
        record.status = ACCEPTED
        record.stream = True
        record.error = ending.error
        usage = self.usage
        record.usage = usage.as_record_usage()
        record.usage_source = "reported" if record.usage is not None else "none"
        traffic = self.traffic
        meta = self._client_metadata()
        meta.update(realtime_close_code=ending.code, realtime_close_reason=ending.reason,
                    realtime_closed_by=ending.by, realtime_messages_in=traffic.messages_in,
                    realtime_messages_out=traffic.messages_out, realtime_bytes_in=traffic.bytes_in,
                    realtime_bytes_out=traffic.bytes_out, realtime_responses=usage.responses)
        if usage.reported and usage.ends is not REALTIME_ENDS:
            meta.update(realtime_cached_tokens=usage.cached, realtime_reasoning_tokens=usage.reasoning)
        elif usage.reported:
            meta.update(realtime_cached_tokens=usage.cached, realtime_input_text_tokens=usage.input_text,
                        realtime_input_audio_tokens=usage.input_audio, realtime_output_text_tokens=usage.output_text,
                        realtime_output_audio_tokens=usage.output_audio)
        record.metadata = meta
        if not record.model and usage.model:
            record.model = usage.model
        return self

    def _client_metadata(self) -> dict[str, Any]:
        ctx = self.ctx
        return dict(ctx.metadata or {}) if ctx is not None else {}

    def done(self, recorder: Any) -> None:
        """Hand off the record (and settle the session's policy hold to its usage)."""
        record = self.record
        duration = time.perf_counter() - record.started
        if self.open_s is None:  # refused, or left before its accept: the whole exchange
            record.total_s = duration
        else:  # the open handshake: a session's length would skew every latency aggregate of its workspace
            record.total_s = self.open_s
            if record.metadata is not None:
                record.metadata["realtime_duration_ms"] = round(duration * 1000, 3)
        if self.parts is not None:
            self.parts.finish(record)
            self.parts = self.hold = None
        elif self.hold is not None:
            self.policies.finish(self.hold, record)
            self.hold = None
        recorder.record(record)
