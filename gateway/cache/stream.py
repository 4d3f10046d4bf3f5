"""Streams and the cache: a streamed answer assembled into the JSON answer it stands for, and a JSON answer
replayed as a stream.

One cached form serves both kinds of request: a streamed answer is stored as the ``chat.completion`` (or
``text_completion``) JSON its chunks add up to, and a streamed request served from the cache gets that answer
back as unified SSE chunks: for chat, per choice a chunk with the role, one with the content (with the choice's
``logprobs``), one per tool call, and one with the ``finish_reason``; for completions, per choice one chunk with
the text and one with the ``finish_reason``; then, when the request asked for it (``stream_options.include_usage``),
a usage chunk with empty ``choices``. ``[DONE]`` is the pipeline's.

Only what can be replayed faithfully is assembled: chunk deltas with other members (thinking ``content_blocks``,
audio, ...), text-completion ``logprobs``, a stream without ``[DONE]`` or with an error event leave the assembler
``broken``, and such an answer is not cached. A JSON answer with message members the replay cannot carry is served
from the cache only to non-streamed requests.
"""

from __future__ import annotations

from typing import Any

import msgspec

from gateway.providers.base import CHAT

_decode = msgspec.json.decode
_encode = msgspec.json.encode

#: delta members assembled by concatenating their text
_TEXT_DELTAS = ("content", "refusal", "reasoning_content")
_CHAT_DELTAS = frozenset({"role", "tool_calls", "function_call", *_TEXT_DELTAS})
_REPLAYABLE_MESSAGE = frozenset({"role", "content", "refusal", "tool_calls", "annotations", "reasoning_content"})


class _Choice:
    __slots__ = ("index", "role", "texts", "tool_calls", "finish_reason", "logprobs", "refusal_logprobs")

    def __init__(self, index: int) -> None:
        self.index = index
        self.role = "assistant"
        self.texts: dict[str, list[str]] = {}
        self.tool_calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: Any = None
        self.logprobs: list[Any] | None = None
        self.refusal_logprobs: list[Any] | None = None


class StreamAssembler:
    """Collects the unified SSE chunks of a chat or completions stream; ``answer()`` is the JSON they stand for."""

    __slots__ = ("endpoint", "meta", "choices", "usage", "broken", "_buffer")

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.meta: dict[str, Any] = {}
        self.choices: dict[int, _Choice] = {}
        self.usage: Any = None
        #: something was seen that cannot be replayed faithfully (the answer is then not cached)
        self.broken = False
        self._buffer = b""

    def feed(self, data: bytes) -> None:
        """Take relayed bytes (whole or partial SSE events)."""
        buffer = self._buffer + data if self._buffer else data
        end = buffer.rfind(b"\n\n")
        if end < 0:
            self._buffer = buffer
            return
        self._buffer = buffer[end + 2:]
        for event in buffer[:end].split(b"\n\n"):
            for line in event.split(b"\n"):
                if line.startswith(b"data:"):
                    self._chunk(line[5:].strip())

    def _chunk(self, payload: bytes) -> None:
        if not payload or payload == b"[DONE]":
            return
        try:
            doc = _decode(payload)
        except msgspec.DecodeError:
            self.broken = True
            return
        if not isinstance(doc, dict) or "error" in doc:
            self.broken = True
            return
        if not self.meta:
            self.meta = {k: doc.get(k) for k in ("id", "created", "model", "system_fingerprint") if k in doc}
        if doc.get("usage"):
            self.usage = doc["usage"]
        for item in doc.get("choices") or ():
            if not isinstance(item, dict):
                self.broken = True
                return
            index = item.get("index", 0)
            choice = self.choices.get(index)
            if choice is None:
                choice = self.choices[index] = _Choice(index)
            if self.endpoint == CHAT:
                self._chat_choice(choice, item)
            else:
                self._text_choice(choice, item)
            if item.get("finish_reason") is not None:
                choice.finish_reason = item["finish_reason"]

    def _chat_choice(self, choice: _Choice, item: dict[str, Any]) -> None:
        delta = item.get("delta") or {}
        if not isinstance(delta, dict):
            self.broken = True
            return
        if not delta.keys() <= _CHAT_DELTAS or "function_call" in delta:
            self.broken = True  # the text and tool calls are still gathered (guardrails read them)
        if delta.get("role"):
            choice.role = delta["role"]
        for name in _TEXT_DELTAS:
            piece = delta.get(name)
            if isinstance(piece, str) and piece:
                choice.texts.setdefault(name, []).append(piece)
        for call in delta.get("tool_calls") or ():
            self._tool_call(choice, call)
        logprobs = item.get("logprobs")
        if isinstance(logprobs, dict):
            if logprobs.get("content"):
                choice.logprobs = (choice.logprobs or []) + list(logprobs["content"])
            if logprobs.get("refusal"):
                choice.refusal_logprobs = (choice.refusal_logprobs or []) + list(logprobs["refusal"])

    def _tool_call(self, choice: _Choice, call: Any) -> None:
        if not isinstance(call, dict):
            self.broken = True
            return
        index = call.get("index", len(choice.tool_calls))
        held = choice.tool_calls.get(index)
        if held is None:
            held = choice.tool_calls[index] = {"id": None, "type": "function", "name": "", "arguments": []}
        if call.get("id"):
            held["id"] = call["id"]
        if call.get("type"):
            held["type"] = call["type"]
        function = call.get("function") or {}
        if function.get("name"):
            held["name"] += function["name"]
        if function.get("arguments"):
            held["arguments"].append(function["arguments"])

    def _text_choice(self, choice: _Choice, item: dict[str, Any]) -> None:
        if item.get("logprobs") is not None:
            self.broken = True
        text = item.get("text")
        if isinstance(text, str) and text:
            choice.texts.setdefault("text", []).append(text)

    def answer(self, whole: bool = True) -> dict[str, Any] | None:
        """The assembled JSON answer, or None when no choice was seen. With ``whole`` (for the cache) also None
        when something was seen that the answer cannot carry; without it, what could be gathered (for checks)."""
        if (whole and self.broken) or not self.choices:
            return None
        chat = self.endpoint == CHAT
        doc: dict[str, Any] = {"id": self.meta.get("id", ""), "object": "chat.completion" if chat else
                               "text_completion", "created": self.meta.get("created", 0),
                               "model": self.meta.get("model", "")}
        if "system_fingerprint" in self.meta:
            doc["system_fingerprint"] = self.meta["system_fingerprint"]
        doc["choices"] = [self._chat_answer(c) if chat else self._text_answer(c)
                          for _, c in sorted(self.choices.items())]
        if self.usage is not None:
            doc["usage"] = self.usage
        return doc

    @staticmethod
    def _chat_answer(choice: _Choice) -> dict[str, Any]:
        message: dict[str, Any] = {"role": choice.role}
        content = choice.texts.get("content")
        message["content"] = "".join(content) if content else None
        for name in ("refusal", "reasoning_content"):
            if name in choice.texts:
                message[name] = "".join(choice.texts[name])
        if choice.tool_calls:
            message["tool_calls"] = [
                {"id": call["id"], "type": call["type"],
                 "function": {"name": call["name"], "arguments": "".join(call["arguments"])}}
                for _, call in sorted(choice.tool_calls.items())
            ]
        logprobs = None
        if choice.logprobs is not None or choice.refusal_logprobs is not None:
            logprobs = {"content": choice.logprobs, "refusal": choice.refusal_logprobs}
        return {"index": choice.index, "message": message, "logprobs": logprobs,
                "finish_reason": choice.finish_reason}

    @staticmethod
    def _text_answer(choice: _Choice) -> dict[str, Any]:
        return {"index": choice.index, "text": "".join(choice.texts.get("text", ())), "logprobs": None,
                "finish_reason": choice.finish_reason}


def replayable(doc: Any, endpoint: str) -> bool:
    """Whether a JSON answer can be replayed as a stream by ``replay``."""
    if not isinstance(doc, dict) or not isinstance(doc.get("choices"), list):
        return False
    for choice in doc["choices"]:
        if not isinstance(choice, dict):
            return False
        if endpoint == CHAT:
            message = choice.get("message")
            if not isinstance(message, dict) or not message.keys() <= _REPLAYABLE_MESSAGE:
                return False
            if message.get("annotations") or not isinstance(message.get("content"), (str, type(None))):
                return False
        elif choice.get("logprobs") is not None or not isinstance(choice.get("text"), str):
            return False
    return True


def _event(doc: dict[str, Any]) -> bytes:
    return b"data: " + _encode(doc) + b"\n\n"


def replay(doc: dict[str, Any], endpoint: str, include_usage: bool) -> list[bytes]:
    """The SSE events of a (``replayable``) JSON answer (see the module docstring); no ``[DONE]``."""
    chat = endpoint == CHAT
    head = {"id": doc.get("id", ""), "object": "chat.completion.chunk" if chat else "text_completion",
            "created": doc.get("created", 0), "model": doc.get("model", "")}
    if chat and "system_fingerprint" in doc:
        head["system_fingerprint"] = doc["system_fingerprint"]
    events: list[bytes] = []
    for choice in doc["choices"]:
        index = choice.get("index", 0)
        if chat:
            deltas = _chat_deltas(choice["message"], choice.get("logprobs"))
        else:
            deltas = [({"text": choice["text"]}, None)] if choice["text"] else []
        for delta, logprobs in deltas:
            item = {"index": index, "delta": delta} if chat else {"index": index, **delta}
            item["logprobs"] = logprobs
            item["finish_reason"] = None
            events.append(_event({**head, "choices": [item]}))
        last = {"index": index, "delta": {}} if chat else {"index": index, "text": ""}
        last["logprobs"] = None
        last["finish_reason"] = choice.get("finish_reason") or "stop"
        events.append(_event({**head, "choices": [last]}))
    if include_usage and doc.get("usage") is not None:
        events.append(_event({**head, "choices": [], "usage": doc["usage"]}))
    return events


def _chat_deltas(message: dict[str, Any], logprobs: Any) -> list[tuple[dict[str, Any], Any]]:
    deltas: list[tuple[dict[str, Any], Any]] = [({"role": message.get("role") or "assistant", "content": ""}, None)]
    if message.get("reasoning_content"):
        deltas.append(({"reasoning_content": message["reasoning_content"]}, None))
    if message.get("content"):
        deltas.append(({"content": message["content"]}, logprobs))
    if message.get("refusal"):
        deltas.append(({"refusal": message["refusal"]}, None))
    for i, call in enumerate(message.get("tool_calls") or ()):
        deltas.append(({"tool_calls": [{"index": i, **call}]}, None))
    return deltas
