"""What guardrail checks read: the request and answer of one phase, their text, and rewriting that text (redaction).

The text a check sees ("the subject"):
- before the request: chat, the last message's text (text parts joined by newlines); completions, the prompt
  (a list of prompts joined by newlines); embeddings and moderations, the input strings joined by newlines;
  rerank, the query; image generations and edits, transcriptions and translations, the prompt; speech, the input;
  an MCP tool call (``mcp.tools/call``), every string in its ``arguments``, however deep; an A2A message
  (``a2a.message``: a call's ``params``), its message's text parts. Other endpoints have no text.
- after the request: chat, every choice's message content joined by newlines; completions, every choice's text; an
  MCP tool result, its ``content`` parts of type text; an A2A result (``a2a.message``), the text parts of the
  message it is or holds, or of the task's status message and artifacts (not its history: that is the input).
  A caller that already holds the answer's text (an assembled stream) passes it instead.
Redaction rewrites *segments*: every message's text (not only the last), every prompt or input string, the
rerank query and documents, and every choice's text, so nothing found goes upstream or back to the client.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

import msgspec

_json_decode = msgspec.json.decode

#: A place a text lives in a JSON document: the keys and indices from the root to it.
Path = tuple[str | int, ...]


class GuardrailRequest:
    """The request as guardrails see it: the decoded JSON body, the endpoint name and what the headers said."""

    __slots__ = ("body", "endpoint", "model", "metadata", "headers", "stream", "workspace")

    def __init__(self, body: Any, endpoint: str, model: str | None = None, metadata: dict[str, Any] | None = None,
                 headers: Sequence[tuple[bytes, bytes]] = (), stream: bool = False,
                 workspace: str = "default") -> None:
        self.body = body
        self.endpoint = endpoint
        self.model = model if model is not None else _model_of(body)
        self.metadata = metadata or {}
        self.headers = headers
        self.stream = stream
        self.workspace = workspace


class GuardrailAnswer:
    """The answer as after-request checks see it: its decoded JSON (None for an assembled stream) and/or text."""

    __slots__ = ("json", "text", "status")

    def __init__(self, json: Any = None, text: str | None = None, status: int = 200) -> None:
        self.json = json
        self.text = text
        self.status = status


def _model_of(body: Any) -> str | None:
    model = body.get("model") if isinstance(body, dict) else None
    return model if isinstance(model, str) else None


class Subject:
    """One phase's view of a request, computed on first use and shared by every check of that phase."""

    __slots__ = ("phase", "request", "answer", "_text", "_segments", "_json", "_headers")

    def __init__(self, phase: str, request: GuardrailRequest, answer: GuardrailAnswer | None = None) -> None:
        self.phase = phase  # "before" or "after"
        self.request = request
        self.answer = answer
        self._text: str | None = None
        self._segments: list[tuple[Path | None, str]] | None = None
        self._json: tuple[bool, Any] | None = None
        self._headers: dict[str, str] | None = None

    @property
    def text(self) -> str:
        """The text the checks judge (see the module docstring)."""
        if self._text is None:
            if self.phase == "before":
                self._text = request_text(self.request.body, self.request.endpoint)
            elif self.answer is not None and self.answer.text is not None:
                self._text = self.answer.text
            else:
                self._text = answer_text(self.answer.json if self.answer is not None else None,
                                         self.request.endpoint)
        return self._text

    def size(self) -> int:
        return len(self.text)

    def segments(self) -> list[tuple[Path | None, str]]:
        """Every text of the request (before) or answer (after) with where it lives (None: the answer's text)."""
        if self._segments is None:
            if self.phase == "before":
                self._segments = request_segments(self.request.body, self.request.endpoint)
            elif self.answer is not None and self.answer.json is not None and self.answer.text is None:
                self._segments = answer_segments(self.answer.json, self.request.endpoint)
            else:
                self._segments = [(None, self.text)]
        return self._segments

    def json_value(self) -> tuple[bool, Any]:
        """(found, value): the JSON document in the text (see ``find_json``)."""
        if self._json is None:
            self._json = find_json(self.text)
        return self._json

    def header(self, name: str) -> str | None:
        """A request header's value by case-insensitive name (the first one when repeated)."""
        if self._headers is None:
            headers: dict[str, str] = {}
            for raw_name, raw_value in self.request.headers:
                headers.setdefault(raw_name.decode("latin-1").lower(), raw_value.decode("latin-1"))
            self._headers = headers
        return self._headers.get(name.lower())


# --- reading texts ----------------------------------------------------------------------------------------------


def _content_parts(content: Any, base: Path) -> list[tuple[Path, str]]:
    if isinstance(content, str):
        return [(base, content)]
    found: list[tuple[Path, str]] = []
    if isinstance(content, list):
        for j, part in enumerate(content):
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                found.append(((*base, j, "text"), part["text"]))
    return found


def _strings(value: Any, base: Path) -> list[tuple[Path, str]]:
    if isinstance(value, str):
        return [(base, value)]
    if isinstance(value, list):
        return [((*base, i), item) for i, item in enumerate(value) if isinstance(item, str)]
    return []


def _nested_strings(value: Any, base: Path, found: list[tuple[Path, str]], depth: int = 0) -> None:
    """Every string in ``value`` (objects and arrays walked, at most 32 deep) with its path."""
    if isinstance(value, str):
        found.append((base, value))
    elif depth < 32 and isinstance(value, dict):
        for key, item in value.items():
            _nested_strings(item, (*base, key), found, depth + 1)
    elif depth < 32 and isinstance(value, list):
        for i, item in enumerate(value):
            _nested_strings(item, (*base, i), found, depth + 1)


#: the endpoint name of an MCP tool call (its body is the call's ``params``)
MCP_TOOL_CALL = "mcp.tools/call"
#: the endpoint name of an A2A call that sends a message (its body is the call's ``params``; the answer its
#: ``result``), in either protocol revision (a part's text is ``text`` in both)
A2A_MESSAGE = "a2a.message"

#: endpoints whose text is ``prompt`` (an image's description, a transcription's prompt)
_PROMPTED = frozenset({"completions", "images.generations", "images.edits", "audio.transcriptions",
                       "audio.translations"})


def request_segments(body: Any, endpoint: str) -> list[tuple[Path | None, str]]:
    """Every text of a request body with its path (messages, prompts, inputs, rerank query and documents)."""
    if not isinstance(body, dict):
        return []
    found: list[tuple[Path, str]] = []
    if endpoint == "chat":
        messages = body.get("messages")
        if isinstance(messages, list):
            for i, message in enumerate(messages):
                if isinstance(message, dict):
                    found.extend(_content_parts(message.get("content"), ("messages", i, "content")))
    elif endpoint in _PROMPTED:
        found = _strings(body.get("prompt"), ("prompt",))
    elif endpoint in ("embeddings", "moderations", "audio.speech"):
        found = _strings(body.get("input"), ("input",))
    elif endpoint == MCP_TOOL_CALL:
        _nested_strings(body.get("arguments"), ("arguments",), found)
    elif endpoint == A2A_MESSAGE:
        message = body.get("message")
        if isinstance(message, dict):
            found = _content_parts(message.get("parts"), ("message", "parts"))
    elif endpoint == "rerank":
        found = _strings(body.get("query"), ("query",))
        documents = body.get("documents")
        if isinstance(documents, list):
            for i, document in enumerate(documents):
                if isinstance(document, str):
                    found.append((("documents", i), document))
                elif isinstance(document, dict) and isinstance(document.get("text"), str):
                    found.append((("documents", i, "text"), document["text"]))
    return list(found)


def request_text(body: Any, endpoint: str) -> str:
    """The text before-request checks judge (see the module docstring)."""
    if not isinstance(body, dict):
        return ""
    if endpoint == "chat":
        messages = body.get("messages")
        if isinstance(messages, list) and messages and isinstance(messages[-1], dict):
            return "\n".join(text for _, text in _content_parts(messages[-1].get("content"), ()))
        return ""
    if endpoint == "rerank":
        query = body.get("query")
        return query if isinstance(query, str) else ""
    return "\n".join(text for _, text in request_segments(body, endpoint))


def answer_segments(doc: Any, endpoint: str = "") -> list[tuple[Path | None, str]]:
    """Every choice's text in a chat or completions answer (or every text part of an MCP tool result, or of an A2A
    result), with its path."""
    found: list[tuple[Path | None, str]] = []
    if endpoint == A2A_MESSAGE:
        found.extend(_a2a_result_parts(doc))
        return found
    if isinstance(doc, dict) and "choices" not in doc and isinstance(doc.get("content"), list):
        for i, part in enumerate(doc["content"]):
            if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
                found.append((("content", i, "text"), part["text"]))
        return found
    choices = doc.get("choices") if isinstance(doc, dict) else None
    if not isinstance(choices, list):
        return found
    for i, choice in enumerate(choices):
        if not isinstance(choice, dict):
            continue
        message = choice.get("message")
        if isinstance(message, dict):
            found.extend(_content_parts(message.get("content"), ("choices", i, "message", "content")))
        elif isinstance(choice.get("text"), str):
            found.append((("choices", i, "text"), choice["text"]))
    return found


def answer_text(doc: Any, endpoint: str = "") -> str:
    """The text after-request checks judge in a chat or completions answer (choices joined by newlines)."""
    return "\n".join(text for _, text in answer_segments(doc, endpoint))


def _a2a_result_parts(result: Any) -> list[tuple[Path, str]]:
    """The text parts of an A2A result: a 1.0 ``{"task"}``/``{"message"}`` wrapper's inside, or a Task or Message
    itself (0.3, and 1.0's task methods): a message's parts, a task's status message's and artifacts' parts."""
    if not isinstance(result, dict):
        return []
    base: Path = ()
    for wrapper in ("task", "message"):
        inner = result.get(wrapper)
        if isinstance(inner, dict):
            result, base = inner, (wrapper,)
            break
    found = _content_parts(result.get("parts"), (*base, "parts")) if isinstance(result.get("parts"), list) else []
    status = result.get("status")
    if isinstance(status, dict) and isinstance(status.get("message"), dict):
        parts = status["message"].get("parts")
        if isinstance(parts, list):
            found.extend(_content_parts(parts, (*base, "status", "message", "parts")))
    artifacts = result.get("artifacts")
    if isinstance(artifacts, list):
        for i, artifact in enumerate(artifacts):
            if isinstance(artifact, dict) and isinstance(artifact.get("parts"), list):
                found.extend(_content_parts(artifact["parts"], (*base, "artifacts", i, "parts")))
    return found


# --- rewriting texts --------------------------------------------------------------------------------------------


def replace_segments(root: Any, segments: list[tuple[Path | None, str]], texts: list[str]) -> Any:
    """``root`` with each segment's text replaced by the matching one of ``texts``; containers on a changed path are
    copied (the original document is never modified), the rest is shared."""
    copies: dict[Path, Any] = {}
    result = root
    for (path, old), new in zip(segments, texts):
        if new == old or path is None:
            continue
        if () not in copies:
            result = copies[()] = _copy(root)
        node = result
        for depth in range(len(path) - 1):
            prefix = path[: depth + 1]
            child = copies.get(prefix)
            if child is None:
                child = copies[prefix] = _copy(node[path[depth]])
                node[path[depth]] = child
            node = child
        node[path[-1]] = new
    return result


def _copy(container: Any) -> Any:
    return dict(container) if isinstance(container, dict) else list(container)


# --- JSON inside a text -----------------------------------------------------------------------------------------

_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\r?\n(.*?)```", re.S)


def find_json(text: str) -> tuple[bool, Any]:
    """(found, value): the text itself as JSON; else the first fenced code block that parses; else the span from
    the first ``{`` or ``[`` to the last ``}`` or ``]``."""
    stripped = text.strip()
    if not stripped:
        return False, None
    found, value = _try_json(stripped)
    if found:
        return found, value
    for match in _FENCE.finditer(text):
        found, value = _try_json(match.group(1).strip())
        if found:
            return found, value
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    end = max(text.rfind("}"), text.rfind("]"))
    if starts and end > min(starts):
        return _try_json(text[min(starts): end + 1])
    return False, None


def _try_json(candidate: str) -> tuple[bool, Any]:
    try:
        return True, _json_decode(candidate)
    except (msgspec.DecodeError, RecursionError):
        return False, None
