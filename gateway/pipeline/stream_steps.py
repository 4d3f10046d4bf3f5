"""Streams in the cache and guardrail steps: the stand-in upstream of a replayed stream, the tap that assembles a
relayed stream, reading a whole stream before anything is sent (an output guardrail that can deny or redact), and
``hook_results`` in a stream's first chunk."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, ClassVar

import msgspec

from gateway.cache.stream import StreamAssembler
from gateway.guardrails import HookResults, attach_hook_results_to_event
from gateway.http.errors import BadUpstreamResponse, GatewayError
from gateway.pipeline.outcome import StreamOutcome, held_error, stream_broke
from gateway.upstream.transport import UpstreamResponse

#: the most a held stream may hold before it fails (502)
HOLD_MAX_BYTES = 16 * 1024 * 1024


class EndedUpstream:
    """The transformer of a replayed stream: nothing left to turn, its usage known."""

    __slots__ = ("usage", "held_error")

    def __init__(self, usage: Any = None) -> None:
        self.usage = usage
        self.held_error = None

    def close(self) -> list[bytes]:
        return []


class EndedResponse(UpstreamResponse):
    """The upstream answer of a replayed stream: every event is known, nothing is left to read, close or release."""

    __slots__ = ()

    status = 200
    #: a read never fails: there is none
    read_errors: ClassVar[tuple[type[BaseException], ...]] = ()

    @property
    def headers(self) -> Mapping[str, str]:
        return {}

    async def read_body(self) -> bytes:
        return b""

    async def read_some(self) -> bytes:
        return b""

    async def chunks(self, size: int = 0) -> AsyncIterator[bytes]:
        return
        yield b""  # an async generator that ends at once

    def release(self) -> None:
        return None

    def close(self) -> None:
        return None

    @staticmethod
    def failure_text(exc: BaseException) -> str:
        return "failed"


class AnswerTap:
    """A stream transformer that also hands every event it yields to an assembler (the relay sees no change)."""

    __slots__ = ("inner", "assembler", "complete")

    def __init__(self, inner: Any, assembler: StreamAssembler) -> None:
        self.inner = inner
        self.assembler = assembler
        #: the upstream stream ended and the transformer closed without an error
        self.complete = False

    def feed(self, chunk: bytes) -> list[bytes]:
        out = self.inner.feed(chunk)
        for event in out:
            self.assembler.feed(event)
        return out

    def close(self) -> list[bytes]:
        out = self.inner.close()
        for event in out:
            self.assembler.feed(event)
        self.complete = True
        return out

    @property
    def usage(self) -> Any:
        return self.inner.usage

    @property
    def held_error(self) -> Any:
        return held_error(self.inner)


def replayed(events: list[bytes], provider: str, model: str | None, usage: Any = None,
             status: int = 200) -> StreamOutcome:
    """A stream outcome whose events are all known: relayed as they are, with nothing upstream left to read."""
    return StreamOutcome(EndedResponse(), EndedUpstream(usage), events, provider, model, True, status)


def with_usage(doc: dict[str, Any] | None, usage: Any) -> dict[str, Any] | None:
    """An assembled answer with the provider's usage (a stream relayed without its usage chunk still had one)."""
    if doc is not None and "usage" not in doc and usage is not None:
        doc["usage"] = msgspec.to_builtins(usage)
    return doc


def first_with(first: list[bytes], results: HookResults) -> list[bytes]:
    if not first:
        return [attach_hook_results_to_event(b"", results)]
    return [attach_hook_results_to_event(first[0], results), *first[1:]]


async def read_whole(outcome: StreamOutcome) -> list[bytes]:
    """Every event of an upstream stream whose first events were read (the response is closed after). Fails as
    relaying would: the in-band error, a broken connection or read timeout, or a stream over HOLD_MAX_BYTES."""
    events = list(outcome.first)
    transformer = outcome.transformer
    response = outcome.response
    size = sum(len(e) for e in events)
    try:
        if not outcome.ended and held_error(transformer) is None:
            async for chunk in response.chunks():
                out = transformer.feed(chunk)
                events.extend(out)
                size += sum(len(e) for e in out)
                if size > HOLD_MAX_BYTES:
                    raise BadUpstreamResponse(
                        f"the {outcome.provider} stream is larger than {HOLD_MAX_BYTES} bytes, the most an "
                        "output guardrail holds", extra={"provider": outcome.provider})
                if held_error(transformer) is not None:
                    break
            else:
                events.extend(transformer.close())
        held = held_error(transformer)
        if held is not None:
            raise held
    except GatewayError as error:
        outcome.mask(error)
        raise
    except response.read_errors as exc:
        raise stream_broke(exc, response, outcome.provider) from None
    finally:
        response.close()
        response.release()
    return events
