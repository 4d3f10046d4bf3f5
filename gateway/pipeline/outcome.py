"""What one attempt produces: a JSON answer or an upstream stream whose first events are read, and how reading
such a stream fails (an in-band error held back, a broken connection, a read timeout)."""

from __future__ import annotations

from typing import Any

from gateway.http.errors import GatewayError, UpstreamTimeout, UpstreamUnreachable
from gateway.upstream.exchange import masked
from gateway.upstream.request import UpstreamRequest
from gateway.upstream.transport import UpstreamResponse


class JsonOutcome:
    """A whole answer: unified JSON ``body``, the provider's usage, and the status to answer with (200; 246 when a
    guardrail failed without denying), and the fields the answering target dropped (``x-gateway-dropped-params``)."""

    __slots__ = ("body", "usage", "model", "provider", "status", "dropped")

    def __init__(self, body: bytes, usage: Any, model: str | None, provider: str, status: int = 200,
                 dropped: bytes | None = None) -> None:
        self.body = body
        self.usage = usage
        self.model = model
        self.provider = provider
        self.status = status
        self.dropped = dropped


class StreamOutcome:
    """A stream to relay: the upstream ``response`` and its ``transformer``, the ``first`` events already read, and
    the status to start the stream with, and the fields the answering target dropped (``x-gateway-dropped-params``);
    the request ``sent`` to the ``target`` (whose credentials an in-band error met later has masked)."""

    __slots__ = ("response", "transformer", "first", "provider", "model", "ended", "status", "dropped", "sent",
                 "target")

    def __init__(self, response: UpstreamResponse, transformer: Any, first: list[bytes], provider: str,
                 model: str | None, ended: bool, status: int = 200, dropped: bytes | None = None,
                 sent: UpstreamRequest | None = None, target: Any = None) -> None:
        self.response = response
        self.transformer = transformer
        self.first = first
        self.provider = provider
        self.model = model
        #: the upstream stream already ended (and the transformer was closed) while reading the first events
        self.ended = ended
        self.status = status
        self.dropped = dropped
        self.sent = sent
        self.target = target

    def mask(self, error: GatewayError) -> GatewayError:
        """``error`` met while reading the stream, with the credentials the request carried masked."""
        return masked(error, self.sent, self.target) if self.sent is not None else error


def held_error(transformer: Any) -> GatewayError | None:
    """An in-band error a transformer held back so the events before it could go out first (see InBandErrorHolder)."""
    return getattr(transformer, "held_error", None)


def stream_broke(exc: BaseException, response: UpstreamResponse, provider: str,
                 when: str = "before the stream ended") -> GatewayError:
    """An upstream stream that failed while being read (one of ``response.read_errors``): a read timeout (504) or a
    broken connection (502)."""
    if isinstance(exc, TimeoutError):
        return UpstreamTimeout(f"timed out reading the {provider} stream {when} (read timeout)",
                               extra={"provider": provider})
    detail = response.failure_text(exc)
    return UpstreamUnreachable(f"the {provider} stream broke off {when}: the upstream {detail}",
                               extra={"provider": provider})
