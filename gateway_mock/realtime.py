"""Mock of the Realtime API over WebSocket: vendorA's and cloudB's upgrade forms, one conversation per session.

Wire facts relied on (the openai SDK 3.57's ``realtime.connect()`` and ``lib/azure.py``, its ``types/realtime``
and the Realtime WebSocket guide):

- vendorA: ``GET /v1/realtime?model=<model>`` upgraded, ``Authorization: Bearer <key>``. A browser cannot set
  headers, so it offers the subprotocols ``realtime`` and ``openai-insecure-api-key.<key>``; the server echoes
  ``realtime``. Here either credential is enough; neither is a 401 refusal of the upgrade (vendorA's error body).
- cloudB (``AzureOpenAI``): ``GET /openai/realtime?api-version=<v>&deployment=<name>`` with ``api-key: <key>`` (or
  ``Authorization: Bearer <Entra token>``); the GA form ``/openai/v1/realtime?model=<deployment>`` takes the same
  headers and no api-version. No key is a 401, no api-version a 404, no deployment a 400 (cloudB's error body).
- Every event is a JSON text frame with ``type``; server events carry an ``event_id``. Client events: ``session.update``
  (``session.type`` required: ``realtime``), ``input_audio_buffer.append`` (``audio``: base64 PCM16, 24 kHz mono),
  ``.commit``, ``.clear``, ``conversation.item.create`` / ``.delete`` / ``.retrieve``, ``response.create``
  (optional ``response``: ``output_modalities`` ``["text"]`` or ``["audio"]``, ``instructions``,
  ``conversation: "none"`` for out-of-band), ``response.cancel``.
- Server events (GA names): ``session.created`` on open, ``session.updated``, ``input_audio_buffer.committed`` /
  ``.cleared``, ``conversation.item.added`` then ``conversation.item.done``, ``response.created``,
  ``rate_limits.updated``, ``response.output_item.added``, ``response.content_part.added``, then per word either
  ``response.output_text.delta`` or ``response.output_audio.delta`` (base64 PCM) with
  ``response.output_audio_transcript.delta``, their ``.done`` events, ``response.content_part.done``,
  ``response.output_item.done`` and ``response.done`` whose ``response.usage`` is ``{total_tokens, input_tokens,
  output_tokens, input_token_details: {cached_tokens, text_tokens, audio_tokens, image_tokens,
  cached_tokens_details: {text_tokens, audio_tokens, image_tokens}}, output_token_details: {text_tokens,
  audio_tokens}}``. ``response.cancel`` ends the response with ``response.done``, ``status: "cancelled"``.
- A bad event is answered with ``{"type": "error", "event_id", "error": {"type", "code", "message", "param",
  "event_id"}}`` (the client's event id) and the session goes on; a second ``response.create`` while one runs is
  ``conversation_already_has_active_response``, a cancel with none ``response_cancel_not_active``, committing an
  empty buffer ``input_audio_buffer_commit_empty``.

The mock's usage derives from the session: input text tokens from every text, transcript and instruction in the
conversation (``count_tokens``), input audio tokens one per 100 ms of audio (4,800 bytes of PCM16 at 24 kHz),
output text tokens from the reply (the transcript for audio), output audio tokens from the PCM sent. The input
audio buffer holds at most 15 MiB; a binary frame from the client is read as the same JSON. A step's ``tool_call``
with function tools in the session (or the ``response``) answers a ``function_call`` item instead
(``response.function_call_arguments.delta`` / ``.done``, arguments sampled from the tool's schema; their tokens are
output text tokens). Scenario knobs: see ``kit.py`` (close, oversized, binary, slow, cached tokens).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import re
import time
import uuid
from typing import Any, Awaitable, Callable
from urllib.parse import parse_qs

import msgspec

from gateway_mock.cloudB import azure_error
from gateway_mock.kit import MockRequest, count_tokens
from gateway_mock.schema_sample import sample
from gateway_mock.websocket import Socket, bearer, chosen_subprotocol

BYTES_PER_AUDIO_TOKEN = 4_800
MAX_AUDIO_BUFFER_BYTES = 15 * 1024 * 1024
INSECURE_KEY_PREFIX = "openai-insecure-api-key."
_CLIENT_EVENTS = ("session.update", "input_audio_buffer.append", "input_audio_buffer.commit",
                  "input_audio_buffer.clear", "conversation.item.create", "conversation.item.delete",
                  "conversation.item.retrieve", "response.create", "response.cancel")


def _id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:20]}"


def fake_pcm(n_bytes: int, seed: int) -> bytes:
    """``n_bytes`` of PCM16 (a deterministic sawtooth): what an audio delta carries."""
    samples = bytearray()
    for i in range(n_bytes // 2):
        samples += (((i * 97 + seed * 13) % 2000) - 1000).to_bytes(2, "little", signed=True)
    return bytes(samples)


class Refusal(Exception):
    """A bad client event: answered with an ``error`` event, the session goes on."""

    def __init__(self, code: str, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.param = code, message, param


class Turn:
    """One response in progress: what it has sent so far, for its ``response.done``."""

    def __init__(self, response: dict, item: dict, modality: str, input_text: int, input_audio: int) -> None:
        self.response = response
        self.item = item
        self.modality = modality
        self.input_text = input_text
        self.input_audio = input_audio
        self.text = ""
        self.audio_bytes = 0
        #: set once its last events are being written: too late to cancel
        self.finishing = False
        self.task: asyncio.Task[None] | None = None
        #: the function tool this response calls (a step's ``tool_call``), else None
        self.tool: dict | None = None


class Session:
    """One Realtime session: its configuration, conversation, input audio buffer and the response in progress."""

    def __init__(self, req: MockRequest, socket: Socket, model: str) -> None:
        self.req = req
        self.socket = socket
        self.config: dict[str, Any] = {
            "type": "realtime", "object": "realtime.session", "id": _id("sess"), "model": model,
            "output_modalities": ["audio"], "instructions": "", "max_output_tokens": "inf",
            "audio": {"input": {"format": {"type": "audio/pcm", "rate": 24000}, "transcription": None,
                                "noise_reduction": None,
                                "turn_detection": {"type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 300,
                                                   "silence_duration_ms": 200}},
                      "output": {"format": {"type": "audio/pcm", "rate": 24000}, "voice": "alloy", "speed": 1.0}},
            "tools": [], "tool_choice": "auto", "tracing": None, "prompt": None, "include": None,
            "expires_at": int(time.time()) + 3600,
        }
        self.conversation_id = _id("conv")
        self.items: list[dict] = []
        #: audio bytes of each conversation item (the events never carry them back)
        self.item_audio: dict[str, int] = {}
        self.buffer = bytearray()
        self.turn: Turn | None = None
        self.responses = 0
        self.handlers: dict[str, Callable[[dict], Awaitable[None]]] = {
            "session.update": self.update, "input_audio_buffer.append": self.append,
            "input_audio_buffer.commit": self.commit, "input_audio_buffer.clear": self.clear,
            "conversation.item.create": self.create_item, "conversation.item.delete": self.delete_item,
            "conversation.item.retrieve": self.retrieve_item, "response.create": self.create_response,
            "response.cancel": self.cancel_response,
        }

    async def emit(self, kind: str, **fields: Any) -> None:
        await self.socket.send_json({"type": kind, "event_id": _id("event"), **fields})

    async def error(self, code: str, message: str, param: str | None, client_event_id: str | None) -> None:
        await self.emit("error", error={"type": "invalid_request_error", "code": code, "message": message,
                                        "param": param, "event_id": client_event_id})

    async def run(self) -> None:
        step = self.req.step
        await self.emit("session.created", session=self.config)
        if step.close_code is not None and step.close_at == "open":
            await self.socket.close(step.close_code, "mock: scripted close")
            return
        try:
            while (frame := await self.socket.receive()) is not None:
                await self.handle(frame)
        finally:
            if self.turn is not None and self.turn.task is not None:
                self.turn.task.cancel()
                with contextlib.suppress(BaseException):
                    await self.turn.task

    async def handle(self, frame: str | bytes) -> None:
        try:
            event = msgspec.json.decode(frame)
        except msgspec.DecodeError as exc:
            await self.error("invalid_json", f"The event is not valid JSON: {exc}", None, None)
            return
        if not isinstance(event, dict):
            await self.error("invalid_type", "An event must be a JSON object.", None, None)
            return
        event_id = event.get("event_id") if isinstance(event.get("event_id"), str) else None
        kind = event.get("type")
        handler = self.handlers.get(kind) if isinstance(kind, str) else None
        try:
            if kind is None:
                raise Refusal("missing_required_parameter", "Missing required parameter: 'type'.", "type")
            if handler is None:
                supported = ", ".join(f"'{name}'" for name in _CLIENT_EVENTS)
                raise Refusal("invalid_value", f"Invalid value: '{kind}'. Supported values are: {supported}.", "type")
            await handler(event)
        except Refusal as refusal:
            await self.error(refusal.code, refusal.message, refusal.param, event_id)

    # -- session and input

    async def update(self, event: dict) -> None:
        session = event.get("session")
        if not isinstance(session, dict):
            raise Refusal("missing_required_parameter", "Missing required parameter: 'session'.", "session")
        if session.get("type") != "realtime":
            raise Refusal("invalid_value", "Invalid value for 'session.type': expected 'realtime'.", "session.type")
        modalities = session.get("output_modalities")
        if modalities is not None:
            _check_modalities(modalities, "session.output_modalities")
        _merge(self.config, session)
        await self.emit("session.updated", session=self.config)

    async def append(self, event: dict) -> None:
        audio = event.get("audio")
        if not isinstance(audio, str):
            raise Refusal("missing_required_parameter", "Missing required parameter: 'audio'.", "audio")
        try:
            chunk = base64.b64decode(audio, validate=True)
        except (binascii.Error, ValueError):
            raise Refusal("invalid_value", "Invalid 'audio': expected base64-encoded audio bytes.", "audio") from None
        if len(self.buffer) + len(chunk) > MAX_AUDIO_BUFFER_BYTES:
            raise Refusal("input_audio_buffer_too_large",
                          f"The input audio buffer holds at most {MAX_AUDIO_BUFFER_BYTES} bytes.", "audio")
        self.buffer += chunk

    async def commit(self, event: dict) -> None:
        if len(self.buffer) < BYTES_PER_AUDIO_TOKEN:
            ms = len(self.buffer) / 48
            raise Refusal("input_audio_buffer_commit_empty",
                          f"Error committing input audio buffer: buffer too small. Expected at least 100ms of audio, "
                          f"but buffer only has {ms:.2f}ms of audio.")
        item: dict[str, Any] = {"id": _id("item"), "object": "realtime.item", "type": "message", "status": "completed",
                                "role": "user", "content": [{"type": "input_audio", "transcript": None}]}
        previous = self.items[-1]["id"] if self.items else None
        self.item_audio[item["id"]] = len(self.buffer)
        self.buffer.clear()
        await self.emit("input_audio_buffer.committed", previous_item_id=previous, item_id=item["id"])
        await self._add(item)

    async def clear(self, event: dict) -> None:
        self.buffer.clear()
        await self.emit("input_audio_buffer.cleared")

    async def create_item(self, event: dict) -> None:
        item = event.get("item")
        if not isinstance(item, dict):
            raise Refusal("missing_required_parameter", "Missing required parameter: 'item'.", "item")
        kind = item.get("type")
        if kind not in ("message", "function_call", "function_call_output"):
            raise Refusal("invalid_value", f"Invalid value for 'item.type': {kind!r}.", "item.type")
        added: dict[str, Any] = {**item, "id": item.get("id") or _id("item"), "object": "realtime.item",
                                 "status": "completed"}
        audio = 0
        if kind == "message":
            if item.get("role") not in ("user", "assistant", "system"):
                raise Refusal("invalid_value", f"Invalid value for 'item.role': {item.get('role')!r}.", "item.role")
            if not isinstance(item.get("content"), list):
                raise Refusal("missing_required_parameter", "Missing required parameter: 'item.content'.",
                              "item.content")
            content = []
            for part in item["content"]:
                if isinstance(part, dict) and isinstance(part.get("audio"), str):
                    audio += len(part["audio"]) * 3 // 4
                    part = {k: v for k, v in part.items() if k != "audio"}
                content.append(part)
            added["content"] = content
        self.item_audio[added["id"]] = audio
        await self._add(added)

    async def delete_item(self, event: dict) -> None:
        item_id = event.get("item_id")
        if not any(item["id"] == item_id for item in self.items):
            raise Refusal("item_not_found", f"Item with item_id '{item_id}' not found.", "item_id")
        self.items = [item for item in self.items if item["id"] != item_id]
        await self.emit("conversation.item.deleted", item_id=item_id)

    async def retrieve_item(self, event: dict) -> None:
        for item in self.items:
            if item["id"] == event.get("item_id"):
                await self.emit("conversation.item.retrieved", item=item)
                return
        raise Refusal("item_not_found", f"Item with item_id '{event.get('item_id')}' not found.", "item_id")

    async def _add(self, item: dict, done: bool = True) -> str | None:
        """Add ``item`` to the conversation (``conversation.item.added``, and ``.done`` unless it is still being
        written); returns the id of the item before it."""
        previous = self.items[-1]["id"] if self.items else None
        self.items.append(item)
        await self.emit("conversation.item.added", previous_item_id=previous, item=item)
        if done:
            await self.emit("conversation.item.done", previous_item_id=previous, item=item)
        return previous

    # -- responses

    async def create_response(self, event: dict) -> None:
        if self.turn is not None:
            raise Refusal("conversation_already_has_active_response",
                          f"Conversation already has an active response in progress: {self.turn.response['id']}. "
                          f"Wait until the response is finished before creating a new one.")
        params = event.get("response") or {}
        if not isinstance(params, dict):
            raise Refusal("invalid_type", "Invalid type for 'response': expected an object.", "response")
        modalities = params.get("output_modalities") or self.config["output_modalities"]
        _check_modalities(modalities, "response.output_modalities")
        in_conversation = params.get("conversation") != "none"
        given = params.get("input")
        context: list = given if isinstance(given, list) else self.items
        instructions = params.get("instructions") or self.config.get("instructions") or ""
        texts = [instructions] + [_item_text(item) for item in context if isinstance(item, dict)]
        joined = " ".join(t for t in texts if t)
        input_audio = sum(self.item_audio.get(str(item.get("id")), 0) for item in context if isinstance(item, dict))
        tool = self._tool_to_call(params)
        item: dict[str, Any] = {"id": _id("item"), "object": "realtime.item", "type": "message",
                                "status": "in_progress", "role": "assistant", "content": []}
        if tool is not None:
            item = {"id": item["id"], "object": "realtime.item", "type": "function_call", "status": "in_progress",
                    "name": tool["name"], "call_id": _id("call"), "arguments": ""}
        response = {"object": "realtime.response", "id": _id("resp"), "status": "in_progress", "status_details": None,
                    "output": [], "conversation_id": self.conversation_id if in_conversation else None,
                    "output_modalities": modalities, "max_output_tokens": params.get("max_output_tokens", "inf"),
                    "audio": {"output": self.config["audio"]["output"]}, "usage": None,
                    "metadata": params.get("metadata")}
        turn = Turn(response, item, modalities[0], count_tokens(joined) if joined else 0,
                    -(-input_audio // BYTES_PER_AUDIO_TOKEN))
        turn.tool = tool
        self.turn = turn
        self.responses += 1
        await self.emit("response.created", response=response)
        await self.emit("rate_limits.updated", rate_limits=[
            {"name": "requests", "limit": 5000, "remaining": 4999, "reset_seconds": 0.012},
            {"name": "tokens", "limit": 40000, "remaining": 40000 - turn.input_text, "reset_seconds": 0.5}])
        turn.task = asyncio.ensure_future(self._respond(turn, in_conversation, self.responses == 1))

    def _tool_to_call(self, params: dict) -> dict | None:
        """The function tool a step's ``tool_call`` calls (``tool_name``'s, else the first), if any is offered."""
        given = params.get("tools")
        tools: list = given if isinstance(given, list) else self.config.get("tools") or []
        functions = [t for t in tools if isinstance(t, dict) and t.get("type") == "function" and t.get("name")]
        if not self.req.step.tool_call or not functions:
            return None
        named = [t for t in functions if t["name"] == self.req.step.tool_name]
        return (named or functions)[0]

    async def cancel_response(self, event: dict) -> None:
        turn = self.turn
        wanted = event.get("response_id")
        if turn is None or turn.task is None or turn.finishing or (wanted and wanted != turn.response["id"]):
            raise Refusal("response_cancel_not_active", "Cancellation failed: no active response found.")
        turn.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await turn.task
        self.turn = None
        await self._done(turn, "cancelled", {"type": "cancelled", "reason": "client_cancelled"})

    async def _respond(self, turn: Turn, in_conversation: bool, first: bool) -> None:
        try:
            await self._stream(turn, in_conversation, first)
        except ConnectionResetError:
            return
        turn.finishing = True
        if not self.socket.closed:
            await self._done(turn, "completed", None)
        self.turn = None

    async def _stream(self, turn: Turn, in_conversation: bool, first: bool) -> None:
        item, ids = turn.item, {"response_id": turn.response["id"], "item_id": turn.item["id"]}
        where = {**ids, "output_index": 0, "content_index": 0}
        await self.emit("response.output_item.added", response_id=ids["response_id"], output_index=0, item=item)
        previous = await self._add(item, done=False) if in_conversation else None
        if turn.tool is not None:
            await self._call(turn, where)
        else:
            await self._speak(turn, where, first)
        item["status"] = "completed"
        self.item_audio[item["id"]] = turn.audio_bytes
        if in_conversation:
            await self.emit("conversation.item.done", previous_item_id=previous, item=item)
        await self.emit("response.output_item.done", response_id=ids["response_id"], output_index=0, item=item)

    async def _call(self, turn: Turn, where: dict) -> None:
        """A function call's arguments, sampled from the tool's schema, in two deltas."""
        if self.req.step.delay_ms:
            await asyncio.sleep(self.req.step.delay_ms / 1000)
        arguments = json.dumps(sample((turn.tool or {}).get("parameters")))
        call = {"response_id": where["response_id"], "item_id": where["item_id"], "output_index": 0,
                "call_id": turn.item["call_id"]}
        half = len(arguments) // 2
        for piece in (arguments[:half], arguments[half:]):
            await self.emit("response.function_call_arguments.delta", **call, delta=piece)
            turn.text += piece
        await self.emit("response.function_call_arguments.done", **call, name=turn.item["name"], arguments=arguments)
        turn.item["arguments"] = arguments

    async def _speak(self, turn: Turn, where: dict, first: bool) -> None:
        """An assistant message: text deltas, or audio deltas with their transcript."""
        step, item, audio = self.req.step, turn.item, turn.modality == "audio"
        await self.emit("response.content_part.added", **where,
                        part={"type": "audio", "transcript": ""} if audio else {"type": "text", "text": ""})
        if step.delay_ms:
            await asyncio.sleep(step.delay_ms / 1000)
        words = self.req.reply_words()
        for index, word in enumerate(words):
            if first and step.close_code is not None and index == len(words) // 2:
                await self.socket.close(step.close_code, "mock: scripted close")
                raise ConnectionResetError("closed by the scenario")
            if step.chunk_delay_ms:
                await asyncio.sleep(step.chunk_delay_ms / 1000)
            oversized = step.oversized_bytes if first and index == 0 else 0
            if audio:
                pcm = fake_pcm(max(BYTES_PER_AUDIO_TOKEN, oversized * 3 // 4), index)
                await self.emit("response.output_audio.delta", **where, delta=base64.b64encode(pcm).decode())
                turn.audio_bytes += len(pcm)
                await self.emit("response.output_audio_transcript.delta", **where, delta=word)
            else:
                word = word + " " * max(0, oversized - len(word))
                await self.emit("response.output_text.delta", **where, delta=word)
            turn.text += word
        if audio:
            await self.emit("response.output_audio.done", **where)
            await self.emit("response.output_audio_transcript.done", **where, transcript=turn.text)
        else:
            await self.emit("response.output_text.done", **where, text=turn.text)
        item["content"] = [{"type": "output_audio", "transcript": turn.text} if audio else
                           {"type": "output_text", "text": turn.text}]
        await self.emit("response.content_part.done", **where, part={"type": "audio", "transcript": turn.text}
                        if audio else {"type": "text", "text": turn.text})

    async def _done(self, turn: Turn, status: str, details: dict | None) -> None:
        if status != "completed":
            turn.item["status"] = "incomplete"
        if status != "completed" and turn.tool is None:
            turn.item["content"] = [{"type": "output_audio", "transcript": turn.text} if turn.modality == "audio"
                                    else {"type": "output_text", "text": turn.text}]
        output_text = count_tokens(turn.text) if turn.text else 0
        output_audio = -(-turn.audio_bytes // BYTES_PER_AUDIO_TOKEN)
        input_total = turn.input_text + turn.input_audio
        cached = min(self.req.step.cached_tokens, input_total)
        cached_text = min(cached, turn.input_text)
        usage = {"total_tokens": input_total + output_text + output_audio, "input_tokens": input_total,
                 "output_tokens": output_text + output_audio,
                 "input_token_details": {"text_tokens": turn.input_text, "audio_tokens": turn.input_audio,
                                         "image_tokens": 0, "cached_tokens": cached,
                                         "cached_tokens_details": {"text_tokens": cached_text,
                                                                   "audio_tokens": cached - cached_text,
                                                                   "image_tokens": 0}},
                 "output_token_details": {"text_tokens": output_text, "audio_tokens": output_audio}}
        turn.response.update(status=status, status_details=details, output=[turn.item], usage=usage)
        await self.emit("response.done", response=turn.response)


def _check_modalities(value: Any, param: str) -> None:
    if not isinstance(value, list) or len(value) != 1 or value[0] not in ("text", "audio"):
        raise Refusal("invalid_value", f"Invalid value for '{param}': expected ['text'] or ['audio'].", param)


def _item_text(item: dict) -> str:
    content = item.get("content")
    parts: list = content if isinstance(content, list) else []
    texts = [str(p.get("text") or p.get("transcript") or "") for p in parts if isinstance(p, dict)]
    if item.get("type") == "function_call_output":
        texts.append(str(item.get("output") or ""))
    return " ".join(t for t in texts if t)


def _merge(target: dict, update: dict) -> None:
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = value


def _vendor_error(message: str, error_type: str = "invalid_request_error", code: str | None = None) -> bytes:
    return msgspec.json.encode({"error": {"message": message, "type": error_type, "param": None, "code": code}})


def _query(req: MockRequest) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(req.query, keep_blank_values=True).items()}


async def _serve(req: MockRequest, socket: Socket, model: str) -> None:
    socket.binary = req.step.binary_frames
    await socket.accept(chosen_subprotocol(socket.subprotocols, "realtime"))
    try:
        await Session(req, socket, model).run()
    except ConnectionResetError:
        return


async def vendor_realtime(req: MockRequest, socket: Socket) -> None:
    step = req.step
    if step.status >= 400:
        await socket.refuse(step.status, _vendor_error(step.message or f"mock upstream error {step.status}",
                                                       step.error_type or "server_error"))
        return
    insecure = [p for p in socket.subprotocols if p.startswith(INSECURE_KEY_PREFIX) and len(p) > len(
        INSECURE_KEY_PREFIX)]
    if not bearer(req) and not insecure:
        await socket.refuse(401, _vendor_error(
            "No API key: send it as 'Authorization: Bearer <key>' (or, from a browser, in the "
            "'openai-insecure-api-key.<key>' subprotocol).", code="invalid_api_key"))
        return
    model = _query(req).get("model")
    if not model:
        await socket.refuse(400, _vendor_error("Missing required parameter: 'model'.", code="missing_model"))
        return
    await _serve(req, socket, model)


async def cloud_realtime(req: MockRequest, socket: Socket) -> None:
    step, query = req.step, _query(req)
    ga = req.path.startswith("/openai/v1/")
    if step.status >= 400:
        body = azure_error(step.error_type or str(step.status), step.message or f"mock cloudB error {step.status}")
        await socket.refuse(step.status, msgspec.json.encode(body))
        return
    if not req.headers.get("api-key") and not bearer(req):
        await socket.refuse(401, msgspec.json.encode(azure_error(
            "401", "Access denied due to missing subscription key. Make sure to include the 'api-key' header.")))
        return
    if not ga and not query.get("api-version"):
        await socket.refuse(404, msgspec.json.encode(azure_error("404", "Resource not found")))
        return
    deployment = query.get("model") if ga else query.get("deployment")
    if not deployment:
        name = "model" if ga else "deployment"
        await socket.refuse(400, msgspec.json.encode(azure_error("BadRequest", f"Missing required query '{name}'.")))
        return
    await _serve(req, socket, deployment)


WS_ROUTES = [
    (re.compile(r"^(?:/v1)?/realtime$"), vendor_realtime),
    (re.compile(r"^/openai(?:/v1)?/realtime$"), cloud_realtime),
]
