"""The Responses API's WebSocket mode for a provider that does not serve it (anthropic, cloudA, cloudC...): the
gateway accepts the upgrade itself (no provider socket) and runs each ``response.create`` through its own Responses
door (``POST /v1/responses``, ``stream: true``, in process: ``gateway/jobs/dispatch.py``), writing the door's
stream events to the socket as they come.

Wire facts relied on (the openai SDK 3.57's ``responses.connect()``, ``types/responses/responses_client_event.py``
and ``responses_server_event.py``, the WebSocket mode guide; the mock ``gateway_mock/responses_ws.py`` follows
them):

- Client events are JSON text frames. ``response.create`` carries the ``POST /v1/responses`` body's fields beside
  ``type``; ``stream`` is implicit (the turn always streams), ``background`` is not supported over a WebSocket, and
  ``stream_id`` is WebSocket-only: it names the response's lane. The SDK also sends ``response.steer`` (input for a
  running response), which only the provider's own mode serves.
- Server events are the Responses stream's events (the same ``type`` and fields as the SSE stream's ``data``), one
  JSON text frame each; every event of a response whose ``response.create`` named a ``stream_id`` echoes it.
- An error is ``{"type": "error", "status": <HTTP status>, "error": {"type", "code", "message", "param"}}`` (with
  ``stream_id`` when the request named one; ``sequence_number`` when it happened inside a response's stream), and
  the socket stays open.
- Lanes: requests with the same ``stream_id`` are processed first-in first-out; lanes are independent (a new lane
  may fork from another lane's response by ``previous_response_id``). A request without ``stream_id`` is on the
  default lane.
- The mode works with ``store: false``: the connection keeps its latest responses in memory, so a turn continues
  one by ``previous_response_id`` with nothing stored. ``generate: false`` prepares a response without output (a
  warm-up of tools, instructions and messages) whose id a later turn chains from.

What the gateway does:

- Each ``response.create`` is one in-process ``POST /v1/responses`` with ``stream: true``, as the session's key
  (``IN_PROCESS_KEY``) with the upgrade's provider and config headers (``x-gateway-config``, ``x-gateway-provider``,
  a provider key in ``Authorization`` beside ``x-gateway-api-key``, the provider's own headers) and the session's
  trace id: authentication, config, routing, retries, fallbacks, guardrails, policies, cache and the request record
  are exactly a POST's. The door stores each translated response for its workspace, so ``previous_response_id``
  works across turns (and sockets) as it does over HTTP. A response made with ``store: false`` is not stored: as
  the mode does, the socket itself remembers the conversations of its latest ``MAX_UNSTORED`` such responses (each
  at most the message size limit, relative to the stored response it continued, if any), and a turn continuing one
  is sent that conversation before its own input (its events still name the ``previous_response_id`` it named).
- ``generate: false`` is answered by the gateway itself (``turn.prepared_events``: ``response.created`` and
  ``response.completed``, no output, zero usage, no request and no provider call); its input is remembered like a
  ``store: false`` response's and sent with the turn that continues it.
- The answer's SSE events (``turn.py``; split by the compiled splitter, ``gateway._speedups.sse_in_use``) are
  written in order,
  as they arrive, each event's ``data`` as one text frame (``stream_id`` added when the request named one). An
  in-band ``error`` event becomes the mode's error event. A non-2xx answer becomes one ``error`` event with the
  status and the gateway error's ``type``, ``code``, ``message`` and ``param``, and the session goes on, except
  for a spent budget (``usage_limit_exceeded``: then close **1008** ``usage limit exceeded``, as ``budget.py``) and
  a gateway key refused (401: close **1008** ``gateway key refused``): every later turn would meet the same.
- Lanes run one turn at a time each, first-in first-out, concurrently with each other. Bounds: ``MAX_LANES``
  lanes with work at once, ``MAX_WAITING`` ``response.create`` waiting or running in a session; one over either
  is answered with an ``error`` event (status 429, code ``too_many_requests``) and dropped.
- A frame that is not a JSON object, an event other than ``response.create``, a ``background`` response or a
  ``stream_id`` that is not a string is answered with an ``error`` event (status 400) naming the field.
- The message size limit, the idle timeout and the shutdown are the forwarding relay's (``relay.py``): a frame over
  the limit closes 1009, no message either way and no turn waiting or running for the idle timeout closes 1001
  ``idle timeout`` (a turn is bounded by its request's own timeouts), the worker stopping closes 1001 ``gateway
  shutting down``; pings are answered by the server.
- When the session ends (the client left, a limit, the shutdown), every running turn sees its client disconnect
  (its relay stops, its record says 499) and is awaited at most ``CLOSE_WAIT_S``, then cancelled: no task outlives
  the session.

Accounting: each turn is a request of its own (its record, its policy admission and settlement). The session's
record sums the turns' usage into its metadata (``realtime_usage``) and lists their ids
(``realtime_response_ids``) but carries no token counts of its own, so budgets, aggregates and costs count each
token once (``mark_record``).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from typing import Any

import msgspec

from gateway.controlplane.keys import KeyRecord
from gateway.http.errors import InvalidRequest
from gateway.http.websocket import ClientSocket
from gateway.jobs.dispatch import Headers, InProcessDispatcher
from gateway.observability.record import RequestRecord
from gateway.providers.base import CHAT, RESPONSES
from gateway.providers.registry import ProviderRegistry
from gateway.realtime.relay import (
    CLOSE_WAIT_S,
    IDLE,
    STOPPING,
    Ending,
    Traffic,
    client_message,
    first_ending,
)
from gateway.realtime.turn import Conversation, TurnSink, error_event, member, prepared_events
from gateway.realtime.usage import SessionUsage
from gateway.waiting import wait_event

log = logging.getLogger("gateway.realtime")

#: the door each turn runs through
TURN_PATH = "/v1/responses"
#: lanes with work at once, per session
MAX_LANES = 8
#: ``response.create`` events waiting or running, per session
MAX_WAITING = 32
#: the most response ids a session's record lists
MAX_IDS = 100
#: the ``store: false`` (and prepared) responses a session keeps to continue (the latest)
MAX_UNSTORED = 4
#: the client events' fields that are the WebSocket's, not the POST body's
_ENVELOPE = ("type", "stream_id", "stream")
#: upgrade headers a turn does not carry: the WebSocket's, the body's, the span's own ids (each turn is a span of
#: the session's trace)
_DROPPED = frozenset({b"host", b"connection", b"upgrade", b"content-length", b"content-type", b"accept",
                      b"accept-encoding", b"transfer-encoding", b"cookie", b"origin", b"x-gateway-trace-id",
                      b"x-gateway-span-id", b"x-gateway-span-name", b"x-gateway-parent-span-id"})
_GATEWAY_KEY = b"x-gateway-api-key"


class Translator:
    """What a translated session needs of its worker: the in-process dispatcher (the worker's own app) and the
    provider registry (which providers the Responses door can serve)."""

    __slots__ = ("dispatcher", "providers")

    def __init__(self, dispatcher: InProcessDispatcher, providers: ProviderRegistry) -> None:
        self.dispatcher = dispatcher
        self.providers = providers

    def check(self, provider: str) -> None:
        """A 400 naming ``provider`` unless the Responses door serves it (it translates for a provider with chat);
        an unknown provider is the registry's 400."""
        adapter = self.providers.get(provider)
        if CHAT not in adapter.endpoints and RESPONSES not in adapter.endpoints:
            raise InvalidRequest(f"provider '{provider}' has no chat API, so the Responses API (and its WebSocket "
                                 "mode) cannot be served by it", param="provider")


def turn_headers(raw: Any, trace_id: str, span_id: str | None) -> Headers:
    """The headers of every turn of a session: the upgrade's, less the WebSocket's and the gateway key (the turn
    runs as the session's key record), with the session's trace id. When the upgrade carried a provider key in
    ``Authorization`` or ``x-api-key`` beside ``x-gateway-api-key``, the gateway key stays, so the door reads those
    as the provider's, as on a POST; without ``x-gateway-api-key`` they were the gateway key and are dropped."""
    headers = [(bytes(name).lower(), bytes(value)) for name, value in raw]
    names = {name for name, _ in headers}
    provider_key_beside = _GATEWAY_KEY in names and (b"authorization" in names or b"x-api-key" in names)
    dropped = set(_DROPPED)
    if not provider_key_beside:
        dropped |= {_GATEWAY_KEY, b"authorization", b"x-api-key"}
    kept = [(name, value) for name, value in headers if name not in dropped and not name.startswith(b"sec-websocket")]
    kept += [(b"content-type", b"application/json"), (b"accept", b"text/event-stream"),
             (b"x-gateway-trace-id", trace_id.encode("latin-1"))]
    if span_id:
        kept.append((b"x-gateway-parent-span-id", span_id.encode("latin-1")))
    return kept


def mark_record(record: RequestRecord, session: TranslatedSession) -> None:
    """The session's record of a translated session: the turns' summed usage moved into its metadata (each turn's
    own record counts it), the responses' ids listed."""
    meta = record.metadata if record.metadata is not None else {}
    meta["realtime_translated"] = True
    meta["realtime_response_ids"] = session.response_ids
    if record.usage is not None:
        meta["realtime_usage"] = record.usage
    record.metadata = meta
    record.usage = None
    record.usage_source = "none"


class _Lane:
    __slots__ = ("queue", "task")

    def __init__(self) -> None:
        self.queue: collections.deque[dict[str, Any]] = collections.deque()
        self.task: asyncio.Future[None] | None = None


class _Created(msgspec.Struct, gc=False):
    id: str | None = None


class _CreatedEvent(msgspec.Struct, gc=False):
    response: _Created | None = None


_decode_created = msgspec.json.Decoder(_CreatedEvent).decode
_encode = msgspec.json.encode


class TranslatedSession:
    """One accepted socket whose turns run through the Responses door (see the module docstring)."""

    __slots__ = ("socket", "dispatcher", "key", "headers", "max_bytes", "idle_s", "stopping", "usage", "traffic",
                 "response_ids", "decided", "left", "lanes", "waiting", "unstored", "_reader", "_write", "_last",
                 "_loop")

    def __init__(self, socket: ClientSocket, dispatcher: InProcessDispatcher, key: KeyRecord, headers: Headers,
                 max_bytes: int, idle_s: float, stopping: asyncio.Event, usage: SessionUsage,
                 traffic: Traffic) -> None:
        self.socket = socket
        self.dispatcher = dispatcher
        self.key = key
        self.headers = headers
        self.max_bytes = max_bytes
        self.idle_s = idle_s
        self.stopping = stopping
        self.usage = usage
        self.traffic = traffic
        #: the ids of the responses the turns created, in order (at most MAX_IDS)
        self.response_ids: list[str] = []
        #: the ending a turn or the watch chose
        self.decided: Ending | None = None
        self._loop = asyncio.get_running_loop()
        #: done when the session ends: every running turn then sees its client disconnect
        self.left: asyncio.Future[None] = self._loop.create_future()
        self.lanes: dict[str | None, _Lane] = {}
        self.waiting = 0
        #: the conversations of this socket's latest ``store: false`` and prepared responses, by id
        self.unstored: collections.OrderedDict[str, Conversation] = collections.OrderedDict()
        self._reader: asyncio.Future[Ending] | None = None
        self._write = asyncio.Lock()
        self._last = self._loop.time()

    async def run(self) -> Ending:
        watch = asyncio.ensure_future(self._watch())
        self._reader = reader = asyncio.ensure_future(self._read())
        try:
            await asyncio.wait([watch, reader], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (watch, reader):
                task.cancel()
            await asyncio.gather(watch, reader, return_exceptions=True)
            await self._stop_turns()
        ending = self.decided or first_ending([watch, reader])
        await self.socket.close(ending.code, ending.reason)
        return ending

    # --- the client's side -------------------------------------------------------------------------------------

    async def _read(self) -> Ending:
        socket, traffic, limit = self.socket, self.traffic, self.max_bytes
        while True:
            frame = await client_message(socket, traffic, limit)
            if isinstance(frame, Ending):
                return frame
            self._last = self._loop.time()
            await self._take(frame)

    async def _take(self, frame: str | bytes) -> None:
        """One client event: a turn queued on its lane, or an ``error`` event saying why not."""
        try:
            event = msgspec.json.decode(frame)
        except msgspec.DecodeError as exc:
            await self.send(error_event(400, "invalid_request_error", "invalid_json",
                                        f"the event is not valid JSON: {exc}", None))
            return
        if not isinstance(event, dict):
            await self.send(error_event(400, "invalid_request_error", "invalid_type", "an event must be a JSON "
                                        "object", None))
            return
        stream_id = event.get("stream_id")
        if stream_id is not None and not isinstance(stream_id, str):
            await self.send(error_event(400, "invalid_request_error", "invalid_type", "stream_id must be a string",
                                        "stream_id"))
            return
        kind = event.get("type")
        if kind != "response.create":
            message = ("missing type: a client event is {\"type\": \"response.create\", ...}" if kind is None else
                       f"event type {kind!r} is not served for this provider (the gateway translates "
                       "'response.create' only)")
            await self.send(error_event(400, "invalid_request_error", "invalid_value", message, "type", stream_id))
            return
        if event.get("background"):
            await self.send(error_event(400, "invalid_request_error", "invalid_value", "background is not supported "
                                        "over a WebSocket", "background", stream_id))
            return
        await self._queue(stream_id, event)

    async def _queue(self, stream_id: str | None, event: dict[str, Any]) -> None:
        lane = self.lanes.get(stream_id)
        if self.waiting >= MAX_WAITING or (lane is None and len(self.lanes) >= MAX_LANES):
            what = (f"{MAX_WAITING} response.create events are waiting or running" if self.waiting >= MAX_WAITING
                    else f"{MAX_LANES} lanes (stream_id) have work")
            refused = error_event(429, "rate_limit_error", "too_many_requests", f"{what} on this socket: wait for "
                                  "a response to end before sending more", "stream_id" if lane is None else None,
                                  stream_id)
            await self.send(refused)
            return
        body = {k: v for k, v in event.items() if k not in _ENVELOPE}
        body["stream"] = True
        if lane is None:
            lane = self.lanes[stream_id] = _Lane()
            lane.queue.append(body)
            lane.task = asyncio.ensure_future(self._lane(stream_id, lane))
        else:
            lane.queue.append(body)
        self.waiting += 1

    async def _send_quietly(self, frame: str) -> None:
        with contextlib.suppress(ConnectionError):
            await self.send(frame)

    async def send(self, frame: str) -> None:
        """One frame to the client (frames of concurrent lanes one after another); ``ConnectionError`` when the
        client has left."""
        async with self._write:
            await self.socket.send(frame)
        self._last = self._loop.time()

    # --- the turns ---------------------------------------------------------------------------------------------

    async def _lane(self, stream_id: str | None, lane: _Lane) -> None:
        """The lane's turns, first-in first-out, until it has none (then it is gone: a later one starts it again)."""
        queue = lane.queue
        while queue and not self.left.done():
            body = queue.popleft()
            try:
                await self._turn(stream_id, body)
            finally:
                self.waiting -= 1
        if self.lanes.get(stream_id) is lane:
            del self.lanes[stream_id]

    async def _turn(self, stream_id: str | None, body: dict[str, Any]) -> None:
        previous = body.get("previous_response_id")
        conversation = self._continue(body)
        try:
            if body.get("generate") is False:
                await self._prepare(stream_id, body, previous, conversation)
            else:
                await self._turn_through_door(stream_id, body, conversation if body.get("store") is False else None,
                                              previous)
        except ConnectionError:  # the client left: the turn's relay saw it and recorded it
            return
        except Exception as exc:
            log.exception("realtime: a translated Responses turn failed", exc_info=exc)
            await self._send_quietly(error_event(500, "server_error", "internal_error", "the gateway failed to run "
                                                 "this response", None, stream_id))

    async def _turn_through_door(self, stream_id: str | None, body: dict[str, Any], remembered: Conversation | None,
                                 previous: Any) -> None:
        """The turn as a POST through the door, its answer written as it comes (``TurnSink``); ``remembered``: the
        conversation of a ``store: false`` turn, kept with its output; ``previous``: the ``previous_response_id``
        the client named, which its events name even when the door was sent another."""
        body.pop("generate", None)
        sink = TurnSink(self, stream_id, remembered)
        if isinstance(previous, str) and body.get("previous_response_id") != previous:
            sink.previous = (member(body.get("previous_response_id")), member(previous))
        await self.dispatcher.stream("POST", TURN_PATH, self.headers, _encode(body), self.key, sink, self.left)
        await sink.end()

    def _continue(self, body: dict[str, Any]) -> Conversation | None:
        """The turn's conversation (``Conversation``: the stored response it continues, the items since), when its
        input is one the door takes. A turn continuing a response this socket remembers (``store: false`` or
        prepared: the door keeps neither) is sent that response's items before its own, continuing the stored
        response that one continued, if any."""
        given = body.get("input", [])
        items = [{"role": "user", "content": given}] if isinstance(given, str) else given
        if not isinstance(items, list):
            return None
        previous = body.get("previous_response_id")
        earlier = self.unstored.get(previous) if isinstance(previous, str) else None
        if earlier is None:
            return previous, items  # none, or a stored response: the door continues it
        base, before = earlier
        body["input"] = items = [*before, *items]
        if base is None:
            del body["previous_response_id"]
        else:
            body["previous_response_id"] = base
        return base, items

    def remember(self, response_id: str, conversation: Conversation) -> None:
        """The conversation of a ``store: false`` or prepared response, for a later turn of this socket (the latest
        ``MAX_UNSTORED``, each at most the message size limit)."""
        if len(_encode(conversation[1])) > self.max_bytes:
            return
        unstored = self.unstored
        unstored[response_id] = conversation
        while len(unstored) > MAX_UNSTORED:
            unstored.popitem(last=False)

    async def _prepare(self, stream_id: str | None, body: dict[str, Any], previous: Any,
                       conversation: Conversation | None) -> None:
        """``generate: false``: the response's events from the gateway itself, its input kept for the next turn."""
        if conversation is None:  # an input the door would refuse: let it say why
            body.pop("generate", None)
            await self._turn_through_door(stream_id, body, None, None)
            return
        for name, data in prepared_events(body, previous if isinstance(previous, str) else None, stream_id):
            self.saw(name, data)
            if name == b"response.completed":
                self.remember(msgspec.json.decode(data)["response"]["id"], conversation)
            await self.send(data.decode())

    def end_session(self, ending: Ending) -> None:
        """A turn's answer ends the session (a spent budget, a refused key)."""
        if self.decided is None:
            self.decided = ending
        if self._reader is not None:
            self._reader.cancel()

    async def _stop_turns(self) -> None:
        """Every running turn sees its client leave, is awaited at most CLOSE_WAIT_S, then cancelled."""
        if not self.left.done():
            self.left.set_result(None)
        tasks = [lane.task for lane in self.lanes.values() if lane.task is not None]
        if not tasks:
            return
        _, late = await asyncio.wait(tasks, timeout=CLOSE_WAIT_S)
        for task in late:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _watch(self) -> Ending:
        """The idle timeout and the worker's stop (as the forwarding relay's); a turn waiting or running keeps the
        session from idling (its request's own timeouts bound it)."""
        while True:
            remaining = self._last + self.idle_s - self._loop.time()
            if remaining <= 0 and self.waiting:
                self._last = self._loop.time()
                remaining = self.idle_s
            if remaining <= 0:
                return Ending(1001, IDLE, "gateway")
            if await wait_event(self.stopping, remaining):
                self.decided = Ending(1001, STOPPING, "gateway")
                await self.socket.close(1001, STOPPING)
                return self.decided

    def saw(self, name: bytes | None, data: bytes) -> None:
        """What the session keeps of one event of a turn: its traffic, the usage of a response's end, the id of a
        response created."""
        traffic = self.traffic
        traffic.messages_out += 1
        traffic.bytes_out += len(data)
        self.usage.read(data)
        if name == b"response.created" and len(self.response_ids) < MAX_IDS:
            with contextlib.suppress(msgspec.DecodeError):
                created = _decode_created(data).response
                if created is not None and created.id:
                    self.response_ids.append(created.id)
