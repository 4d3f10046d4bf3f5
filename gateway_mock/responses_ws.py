"""Mock of the Responses API's WebSocket mode: one socket, one ``response.create`` per turn, the stream's events back.

Wire facts relied on (the openai SDK 3.57's ``responses.connect()``, ``types/responses/responses_client_event.py``
and ``responses_server_event.py``, and the WebSocket mode guide):

- vendorA: ``GET /v1/responses`` upgraded (the SDK appends ``/responses`` to its base URL, no query of its own),
  ``Authorization: Bearer <key>``; no subprotocol. cloudB: ``/openai/v1/responses`` with ``api-key`` (or
  ``Authorization: Bearer``). No credential refuses the upgrade with a 401 in the provider's error body.
- The client sends JSON text frames ``{"type": "response.create", ...the POST /v1/responses body...}``; ``stream``
  is implicit (ignored here), ``background`` is refused, ``stream_id`` (WebSocket only) names a lane and is echoed on
  every event of that response, ``generate: false`` prepares a response without output (its id chains like any).
- The server answers each with the Responses stream's events as JSON frames (``type``, ``sequence_number`` from 0
  per response, the same fields as the SSE stream: ``response.created``, ``response.in_progress``,
  ``response.output_item.added``, ``response.content_part.added``, ``response.output_text.delta``...,
  ``response.completed`` with ``response.usage`` ``{input_tokens, input_tokens_details: {cached_tokens},
  output_tokens, output_tokens_details: {reasoning_tokens}, total_tokens}``), built by ``vendorA_responses``.
- ``previous_response_id`` continues from a response stored by the mock (any connection, ``store`` true) or created
  earlier on this connection (even with ``store: false``); its input and output tokens count again as input. An
  unknown one is answered ``{"type": "error", "status": 400, "error": {"type": "invalid_request_error", "code":
  "previous_response_not_found", "message", "param": "previous_response_id"}}``. Every refused event gets an
  ``error`` event of that shape and the socket stays open; turns are answered one at a time, in order.

Scenario knobs (``kit.py``): a refused upgrade, a close midway through the first turn, an oversized first delta,
binary frames, a delay before each turn, cached tokens; ``stream_error: "middle"`` ends a turn with an ``error``
event (``error.type`` ``server_error``) instead of ``response.completed``.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import msgspec

from gateway_mock.cloudB import azure_error
from gateway_mock.kit import MockRequest
from gateway_mock.vendorA_responses import Refused, new_response, numbered, response_events
from gateway_mock.websocket import Socket, bearer


class Connection:
    """One Responses WebSocket: the responses it made (for ``previous_response_id``) and its turns."""

    def __init__(self, req: MockRequest, socket: Socket) -> None:
        self.req = req
        self.socket = socket
        self.local: dict[str, dict] = {}
        self.turns = 0

    async def error(self, code: str | None, message: str, param: str | None, stream_id: Any = None,
                    error_type: str = "invalid_request_error", status: int = 400) -> None:
        event: dict[str, Any] = {"type": "error", "status": status,
                                 "error": {"type": error_type, "code": code, "message": message, "param": param}}
        if stream_id is not None:
            event["stream_id"] = stream_id
        await self.socket.send_json(event)

    async def run(self) -> None:
        while (frame := await self.socket.receive()) is not None:
            try:
                event = msgspec.json.decode(frame)
            except msgspec.DecodeError as exc:
                await self.error("invalid_json", f"The event is not valid JSON: {exc}", None)
                continue
            if not isinstance(event, dict):
                await self.error("invalid_type", "An event must be a JSON object.", None)
                continue
            kind = event.get("type")
            if kind != "response.create":
                param_problem = "Missing required parameter: 'type'." if kind is None else \
                    f"Invalid value: {kind!r}. Supported values are: 'response.create'."
                await self.error("invalid_value" if kind else "missing_required_parameter", param_problem, "type",
                                 event.get("stream_id"))
                continue
            await self.turn(event)

    async def turn(self, event: dict) -> None:
        step = self.req.step
        stream_id = event.get("stream_id")
        body = {k: v for k, v in event.items() if k not in ("type", "stream_id", "stream", "stream_options")}
        if body.get("background"):
            await self.error("invalid_value", "'background' is not supported over WebSocket.", "background",
                             stream_id)
            return
        context = 0
        previous_id = body.get("previous_response_id")
        if previous_id is not None:
            previous = self.local.get(previous_id) or self.req.state.responses.get(previous_id)
            if previous is None:
                await self.error("previous_response_not_found", f"Previous response with id '{previous_id}' not "
                                 f"found.", "previous_response_id", stream_id)
                return
            usage = previous.get("usage") or {}
            context = int(usage.get("input_tokens") or 0) + int(usage.get("output_tokens") or 0)
        try:
            response, _ = new_response(self.req, body, context, step.cached_tokens)
        except Refused as refused:
            await self.error(refused.code, refused.message, refused.param, stream_id)
            return
        if body.get("generate") is False:
            response.update(output=[], usage={"input_tokens": context, "input_tokens_details": {"cached_tokens": 0},
                                              "output_tokens": 0, "output_tokens_details": {"reasoning_tokens": 0},
                                              "total_tokens": context})
        self.local[response["id"]] = response
        self.turns += 1
        if step.delay_ms:
            await asyncio.sleep(step.delay_ms / 1000)
        await self._stream(response, stream_id, first=self.turns == 1)

    async def _stream(self, response: dict, stream_id: Any, first: bool) -> None:
        step = self.req.step
        half = len(self.req.reply_words()) // 2
        deltas = 0
        for number, doc in enumerate(response_events(self.req, response)):
            kind = doc["type"]
            if kind == "error":
                doc = {"type": "error", "error": {"type": "server_error", "code": doc.get("code"),
                                                  "message": doc.get("message"), "param": None}}
            if kind.endswith(".delta"):
                if first and step.close_code is not None and deltas == half:
                    await self.socket.close(step.close_code, "mock: scripted close")
                    raise ConnectionResetError("closed by the scenario")
                if step.chunk_delay_ms:
                    await asyncio.sleep(step.chunk_delay_ms / 1000)
                if first and deltas == 0 and step.oversized_bytes:
                    doc = {**doc, "delta": doc["delta"] + " " * max(0, step.oversized_bytes - len(doc["delta"]))}
                deltas += 1
            event = numbered(doc, number)
            if stream_id is not None:
                event["stream_id"] = stream_id
            await self.socket.send_json(event)


def _vendor_error(message: str, error_type: str = "invalid_request_error", code: str | None = None) -> bytes:
    return msgspec.json.encode({"error": {"message": message, "type": error_type, "param": None, "code": code}})


async def _serve(req: MockRequest, socket: Socket) -> None:
    socket.binary = req.step.binary_frames
    await socket.accept()
    step = req.step
    if step.close_code is not None and step.close_at == "open":
        await socket.close(step.close_code, "mock: scripted close")
        return
    try:
        await Connection(req, socket).run()
    except ConnectionResetError:
        return


async def vendor_responses(req: MockRequest, socket: Socket) -> None:
    step = req.step
    if step.status >= 400:
        await socket.refuse(step.status, _vendor_error(step.message or f"mock upstream error {step.status}",
                                                       step.error_type or "server_error"))
        return
    if not bearer(req):
        await socket.refuse(401, _vendor_error("No API key: send it as 'Authorization: Bearer <key>'.",
                                               code="invalid_api_key"))
        return
    await _serve(req, socket)


async def cloud_responses(req: MockRequest, socket: Socket) -> None:
    step = req.step
    if step.status >= 400:
        body = azure_error(step.error_type or str(step.status), step.message or f"mock cloudB error {step.status}")
        await socket.refuse(step.status, msgspec.json.encode(body))
        return
    if not req.headers.get("api-key") and not bearer(req):
        await socket.refuse(401, msgspec.json.encode(azure_error(
            "401", "Access denied due to missing subscription key. Make sure to include the 'api-key' header.")))
        return
    await _serve(req, socket)


WS_ROUTES = [
    (re.compile(r"^(?:/v1)?/responses$"), vendor_responses),
    (re.compile(r"^/openai/v1/responses$"), cloud_responses),
]
