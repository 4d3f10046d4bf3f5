"""The gateway as an A2A client: one JSON-RPC request sent to a registered agent's endpoint through the worker's
upstream transport (the SSRF guard and the pinned address at every connection; redirects are never followed: a 3xx
is an answer like any other non-2xx), as MCP servers are called.

The request goes as the client sent it, with the agent's headers (``AgentTarget.headers``, opened from the sealed
record) and the client's A2A headers (``A2A-Version``, ``A2A-Extensions``, ``X-A2A-Extensions``); a request in a 1.0
method's name without ``A2A-Version`` is sent with ``A2A-Version: 1.0``, since an agent reads a request without it
as 0.3 and refuses 1.0's methods. What an agent answers is bounded: the head must come within
GATEWAY_AGENT_TIMEOUT_MS, a JSON answer is read whole up to GATEWAY_MAX_UPSTREAM_BODY_BYTES, a stream is relayed as
it comes with each event at most ``MAX_EVENT_BYTES`` (or that setting, if smaller) and silences at most
GATEWAY_UPSTREAM_READ_TIMEOUT_MS. Whatever fails (a refused address, unreachable, a timeout, an answer that is not
JSON-RPC, a huge one, an HTTP error) is an ``RpcError`` (-32603) naming the agent by its slug, its text bounded,
the agent's header values masked and its address left out.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

from gateway._speedups.sse_in_use import SseSplitter
from gateway.agents import wire
from gateway.http.errors import GatewayError
from gateway.schema.agent_target import AgentTarget
from gateway.upstream.error_text import bounded, header_secrets, scrub_text, unaddressed
from gateway.upstream.request import UpstreamRequest
from gateway.upstream.transport import UpstreamResponse, UpstreamTransport
from gateway.waiting import within

#: the largest single event of an agent's stream
MAX_EVENT_BYTES = 16 * 1024 * 1024
#: how much of an agent's HTTP error body its error text quotes
QUOTED_BYTES = 512
_JSON = "application/json"
_SSE = "text/event-stream"


def failure(target: AgentTarget, what: str) -> wire.RpcError:
    """The JSON-RPC error for an agent that failed: ``what`` happened, bounded, its credentials masked and its
    address left out."""
    text = bounded(f"agent '{target.slug}' {unaddressed(what, target.endpoint, 'the agent')}", 1024)
    return wire.RpcError(wire.INTERNAL_ERROR, scrub_text(text, header_secrets(target.headers)))


class Answer:
    """An agent's answer: ``body`` (one JSON-RPC response) or, for a stream, ``events()`` as they arrive;
    ``close()`` drops what is left (always called)."""

    __slots__ = ("body", "streamed", "_response", "_target", "_limit")

    def __init__(self, body: bytes | None, response: UpstreamResponse | None, target: AgentTarget,
                 limit: int) -> None:
        self.body = body
        self.streamed = response is not None
        self._response = response
        self._target = target
        self._limit = limit

    async def events(self) -> AsyncIterator[tuple[bytes | None, bytes, wire.Head]]:
        """The stream's events, ``(name, data, response)``, each as soon as its end arrives (empty ones skipped); an
        event that is not a JSON-RPC response ends the stream with an error."""
        response = self._response
        assert response is not None
        splitter = SseSplitter()
        unfinished = 0  # bytes fed since an event last ended: at least what the splitter holds
        try:
            async for chunk in response.chunks():
                unfinished += len(chunk)
                events = splitter.feed(chunk)
                if events:
                    unfinished = len(chunk)
                elif unfinished > self._limit:
                    raise failure(self._target, f"sent a stream event over {self._limit} bytes")
                for name, data in events:
                    if len(data) > self._limit:
                        raise failure(self._target, f"sent a stream event over {self._limit} bytes")
                    if data.strip():
                        yield name, data, self._response_in(data)
            for name, data in splitter.close():
                if data.strip():
                    yield name, data, self._response_in(data)
        except response.read_errors as exc:
            raise failure(self._target, response.failure_text(exc)) from None
        except GatewayError as exc:
            raise failure(self._target, exc.message) from None
        self._response = None
        response.release()

    def _response_in(self, data: bytes) -> wire.Head:
        head = wire.head_of(data)
        if head is None:
            raise failure(self._target, "sent a stream event that is not a JSON-RPC response")
        return head

    def close(self) -> None:
        if self._response is not None:
            self._response.close()
            self._response = None


class AgentUpstream:
    """Sends JSON-RPC requests to registered agents (see the module docstring)."""

    def __init__(self, transport: UpstreamTransport, *, timeout_s: float, max_bytes: int) -> None:
        self.transport = transport
        self.timeout_s = timeout_s
        self.event_limit = min(MAX_EVENT_BYTES, max_bytes)

    async def send(self, target: AgentTarget, method: str, body: bytes, passed: Mapping[str, str]) -> Answer:
        """Send ``body`` (the client's request for ``method``) with the client's A2A headers ``passed``."""
        streaming = method in wire.STREAMING
        headers = {"content-type": _JSON, "accept": f"{_SSE}, {_JSON}" if streaming else _JSON}
        headers.update(passed)
        if wire.VERSION_HEADER not in headers and method[:1].isupper():
            headers[wire.VERSION_HEADER] = "1.0"
        headers.update(target.headers)
        try:
            response = await within(self.transport.open(UpstreamRequest(target.endpoint, headers, body), streaming),
                                    self.timeout_s)
        except TimeoutError:
            raise failure(target, f"did not answer within {self.timeout_s:g} s") from None
        except GatewayError as exc:
            raise failure(target, f"could not be reached: {exc.message}") from None
        return await self._answer(target, response)

    async def _answer(self, target: AgentTarget, response: UpstreamResponse) -> Answer:
        status = response.status
        kind = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if kind == _SSE and 200 <= status < 300:
            return Answer(None, response, target, self.event_limit)
        try:
            body = await response.read_body()
        except response.read_errors as exc:
            response.close()
            raise failure(target, response.failure_text(exc)) from None
        except GatewayError as exc:
            response.close()
            raise failure(target, exc.message) from None
        response.release()
        head = wire.head_of(body) if kind == _JSON else None
        if 200 <= status < 300:
            if head is None:
                raise failure(target, f"answered with a body that is not a JSON-RPC response (content type "
                                      f"{kind or 'none'!r})")
            return Answer(body, None, target, self.event_limit)
        if head is not None and head.error is not None:
            return Answer(body, None, target, self.event_limit)  # a JSON-RPC error sent with an HTTP error status
        if status in (401, 403):
            raise failure(target, f"refused the gateway's credentials (HTTP {status}); check the agent's headers")
        quoted = body[:QUOTED_BYTES].decode("utf-8", "replace")
        raise failure(target, f"answered HTTP {status}: {quoted}")
