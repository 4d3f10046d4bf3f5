"""Relaying an upstream stream to the client event by event, and what the relay counts for the request's record.

The record's status is what the stream came to: 200, the error it ended with (in-band or a broken upstream), or 499
when the client left. Its usage is the provider's figures when they arrived; otherwise the recorder estimates them
from the chunks sent, counted here (see observability/estimate.py).
"""

from __future__ import annotations

import asyncio

from gateway.http.disconnect import DisconnectWatch
from gateway.http.errors import GatewayError
from gateway.http.respond import end_stream, send_chunk, start_stream
from gateway.http.types import RawHeaders, Receive, Send
from gateway.observability.estimate import HEAD_BYTES
from gateway.observability.record import RequestRecord
from gateway.pipeline.outcome import StreamOutcome, held_error, stream_broke

DONE = b"data: [DONE]\n\n"


def error_event(error: GatewayError) -> bytes:
    """An in-stream error: ``data: {"error": {...}}``, the form vendorA SDKs raise on."""
    return b"data: " + error.body() + b"\n\n"


class StreamRelay:
    """One stream's relay: the chunks sent up to ``HEAD_BYTES`` (the estimate counts their text exactly), and past
    them only the bytes and events; the record gets them, or the provider's usage, when the relay ends."""

    __slots__ = ("outcome", "record", "head", "kept", "rest_bytes", "rest_events")

    #: what ends a stream, and an in-stream error event (a front door's relay writes its dialect's)
    done = DONE
    error_event = staticmethod(error_event)

    def __init__(self, outcome: StreamOutcome, record: RequestRecord) -> None:
        self.outcome = outcome
        self.record = record
        self.head: list[bytes] = []
        self.kept = 0
        self.rest_bytes = 0
        self.rest_events = 0

    async def run(self, receive: Receive, send: Send, headers: RawHeaders) -> None:
        """Relay the stream; a client that leaves cancels the upstream request."""
        outcome = self.outcome
        record = self.record
        relay_task = asyncio.current_task()
        assert relay_task is not None  # ASGI calls run in a task
        watch = DisconnectWatch(receive, relay_task)
        record.status = outcome.status
        try:
            await start_stream(send, headers, outcome.status)
            if outcome.first:
                data = b"".join(outcome.first)
                await send_chunk(send, data)
                self.head.append(data)
                self.kept = len(data)
            await self._relay_rest(send)
        except asyncio.CancelledError:
            self._left()
            if watch.fired():  # cancelled by our own disconnect watcher: the request is over, not the worker
                relay_task.uncancel()
                return
            raise
        except OSError:
            self._left()
        finally:
            watch.stop()
            outcome.response.release()
            self._count()

    async def _relay_rest(self, send: Send) -> None:
        """The events after the first, then the stream's end: ``[DONE]``, or the error it ended with."""
        outcome = self.outcome
        record = self.record
        tail = b""
        try:
            tail = await self._pump(send)
            held = held_error(outcome.transformer)
            if held is not None:
                raise held
        except GatewayError as error:
            outcome.mask(error)
            record.status = error.status
            record.error = error.message
            await end_stream(send, tail + self.error_event(error) + self.done)
            self.head.append(tail)
            return
        except outcome.response.read_errors as exc:
            broken = stream_broke(exc, outcome.response, outcome.provider)
            record.status = broken.status
            record.error = broken.message
            await end_stream(send, self.error_event(broken) + self.done)
            return
        if record.hooks is not None:  # the cache stores the answer before the last byte leaves
            await record.hooks.stream_ended(record)
        await end_stream(send, tail + self.done)
        self.head.append(tail)

    async def _pump(self, send: Send) -> bytes:
        """Send each upstream read's events as they come; the events left when the upstream ends (the tail)."""
        outcome = self.outcome
        transformer = outcome.transformer
        response = outcome.response
        if outcome.ended or held_error(transformer) is not None:
            return b""
        head = self.head
        async for chunk in response.chunks():
            out = transformer.feed(chunk)
            if out:
                data = b"".join(out)
                await send_chunk(send, data)
                if self.kept < HEAD_BYTES:
                    head.append(data)
                    self.kept += len(data)
                else:
                    self.rest_bytes += len(data)
                    self.rest_events += data.count(b"\n\n")
            if held_error(transformer) is not None:
                response.close()  # the rest of this upstream stream is not wanted
                return b""
        return b"".join(transformer.close())

    def _left(self) -> None:
        self.record.status = 499
        self.record.error = "client disconnected"
        self.outcome.response.close()

    def _count(self) -> None:
        record = self.record
        usage = self.outcome.transformer.usage
        if usage is not None:
            record.usage = usage
            record.usage_source = "reported"
        else:
            record.usage_source = "estimated"
            record.relayed_head = self.head
            record.relayed_rest_bytes = self.rest_bytes
            record.relayed_rest_events = self.rest_events
