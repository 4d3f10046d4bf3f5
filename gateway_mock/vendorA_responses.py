"""Mock of vendorA's stored responses: create (stored), retrieve (with ``include``) and list input items.

Like the real API: ``POST /v1/responses`` needs ``model`` and ``input`` (a string or a list of input items) and
answers a ``response`` object (``status: completed``, one output message holding the mock's reply, usage with
cached and reasoning details, the request's settings or their defaults); stored responses are retrievable by id
(``resp_<hex>``; unknown: 404); an ``include`` value outside the includable fields is a 400. Input items list as
``{object: "list", data, first_id, last_id, has_more}``, each item with an ``id`` and ``content[]`` of
``input_text`` parts, ``order`` ``desc`` by default (``asc`` / ``desc``), ``limit`` 1 to 100 (default 20),
``after`` / ``before`` item ids.

``stream: true`` answers with the documented event sequence (every event named by ``event:`` and carrying a
``sequence_number``): ``response.created``, ``response.in_progress``, ``response.output_item.added``,
``response.content_part.added``, ``response.output_text.delta`` per word, ``response.output_text.done``,
``response.content_part.done``, ``response.output_item.done`` (a function call: ``output_item.added``,
``response.function_call_arguments.delta`` / ``.done``, ``output_item.done``), then ``response.completed`` with the
whole response; no ``[DONE]``. A step's ``tool_call`` with function tools answers a ``function_call`` item (its
arguments sampled from the tool's schema); ``text.format`` json_schema answers a JSON document sampled from it.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from typing import Any, Iterator
from urllib.parse import parse_qs

from gateway_mock.asgi import Send
from gateway_mock.kit import MockRequest, count_tokens, end_stream, respond_json, sse, start_stream, stream_part
from gateway_mock.schema_sample import sample
from gateway_mock.vendorA_files import invalid

INCLUDABLE = ("file_search_call.results", "web_search_call.results", "web_search_call.action.sources",
              "message.input_image.image_url", "computer_call_output.output.image_url",
              "code_interpreter_call.outputs", "reasoning.encrypted_content", "message.output_text.logprobs")


def _items(value: Any) -> list[dict]:
    if isinstance(value, str):
        value = [{"role": "user", "content": value}]
    items = []
    for item in value if isinstance(value, list) else []:
        if item.get("type", "message") != "message":
            items.append({"id": f"item_{uuid.uuid4().hex}", **item})
            continue
        content = item.get("content", "")
        parts = [{"type": "input_text", "text": content}] if isinstance(content, str) else content
        items.append({"id": f"msg_{uuid.uuid4().hex}", "type": "message", "role": item.get("role", "user"),
                      "status": "completed", "content": parts})
    return items


class Refused(Exception):
    """A create body the API refuses: the message and the parameter it names."""

    def __init__(self, message: str, param: str | None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code


def input_text_tokens(items: list[dict]) -> int:
    return count_tokens(" ".join(p.get("text", "") for i in items for p in i.get("content") or ()
                                 if isinstance(p, dict)))


def new_response(req: MockRequest, doc: dict, context_tokens: int = 0,
                 cached_tokens: int = 0) -> tuple[dict, list[dict]]:
    """The response a create body answers, and its input items; ``Refused`` for a bad body.

    ``context_tokens`` (the earlier turns a ``previous_response_id`` brings in) count as input too; ``cached_tokens``
    (at most the input) are reported as cached.
    """
    if not isinstance(doc.get("model"), str):
        raise Refused("Missing required parameter: 'model'.", "model")
    items = _items(doc.get("input"))
    if not items:
        raise Refused("Missing required parameter: 'input'.", "input")
    reply = req.reply_text()
    fmt = (doc.get("text") or {}).get("format") or {}
    if fmt.get("type") == "json_schema":
        reply = json.dumps(sample(fmt.get("schema")))
    prompt = input_text_tokens(items) + context_tokens
    completion = count_tokens(reply)
    tools = [t for t in doc.get("tools") or () if t.get("type") == "function"]
    if req.step.tool_call and tools:
        call_id = f"call_{uuid.uuid4().hex[:24]}"
        output = [{"type": "function_call", "id": f"fc_{uuid.uuid4().hex}", "call_id": call_id,
                   "name": tools[0]["name"], "arguments": json.dumps(sample(tools[0].get("parameters"))),
                   "status": "completed"}]
    else:
        output = [{"type": "message", "id": f"msg_{uuid.uuid4().hex}", "status": "completed", "role": "assistant",
                   "content": [{"type": "output_text", "text": reply, "annotations": []}]}]
    response = {
        "id": f"resp_{uuid.uuid4().hex}", "object": "response", "created_at": int(time.time()), "status": "completed",
        "error": None, "incomplete_details": None, "instructions": doc.get("instructions"),
        "max_output_tokens": doc.get("max_output_tokens"), "model": doc["model"],
        "output": output,
        "parallel_tool_calls": doc.get("parallel_tool_calls", True),
        "previous_response_id": doc.get("previous_response_id"),
        "reasoning": {"effort": (doc.get("reasoning") or {}).get("effort"), "summary": None},
        "store": doc.get("store", True), "temperature": doc.get("temperature", 1.0),
        "text": doc.get("text") or {"format": {"type": "text"}}, "tool_choice": doc.get("tool_choice", "auto"),
        "tools": doc.get("tools") or [], "top_p": doc.get("top_p", 1.0),
        "truncation": doc.get("truncation", "disabled"),
        "usage": {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": min(cached_tokens, prompt)},
                  "output_tokens": completion, "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": prompt + completion},
        "user": doc.get("user"), "metadata": doc.get("metadata") or {},
    }
    if response["store"]:
        req.state.responses[response["id"]] = response
        req.state.response_input_items[response["id"]] = items
    return response, items


async def create(req: MockRequest, send: Send) -> None:
    doc = req.json()
    try:
        response, _ = new_response(req, doc)
    except Refused as refused:
        await respond_json(send, 400, invalid(refused.message, refused.param, refused.code))
        return
    if doc.get("stream"):
        await _stream(req, send, response)
        return
    await respond_json(send, 200, response)


def response_events(req: MockRequest, response: dict) -> Iterator[dict]:
    """The stream's events in order, each ``{"type", ...fields}`` without its ``sequence_number``.

    A step's ``stream_error: "middle"`` ends them with an ``error`` event halfway through the text.
    """
    step = req.step
    start = {**response, "status": "in_progress", "output": [], "usage": None}
    yield {"type": "response.created", "response": start}
    yield {"type": "response.in_progress", "response": start}
    for index, item in enumerate(response["output"]):
        if item["type"] == "function_call":
            yield {"type": "response.output_item.added", "output_index": index,
                   "item": {**item, "arguments": "", "status": "in_progress"}}
            yield {"type": "response.function_call_arguments.delta", "item_id": item["id"], "output_index": index,
                   "delta": item["arguments"]}
            yield {"type": "response.function_call_arguments.done", "item_id": item["id"], "output_index": index,
                   "arguments": item["arguments"]}
        else:
            part = item["content"][0]
            yield {"type": "response.output_item.added", "output_index": index,
                   "item": {**item, "status": "in_progress", "content": []}}
            yield {"type": "response.content_part.added", "item_id": item["id"], "output_index": index,
                   "content_index": 0, "part": {**part, "text": ""}}
            words = req.reply_words() if part["text"] == req.reply_text() else [part["text"]]
            for i, word in enumerate(words):
                if i == len(words) // 2 and step.stream_error == "middle":
                    yield {"type": "error", "code": "server_error",
                           "message": step.message or "The server had an error", "param": None}
                    return
                yield {"type": "response.output_text.delta", "item_id": item["id"], "output_index": index,
                       "content_index": 0, "delta": word, "logprobs": []}
            yield {"type": "response.output_text.done", "item_id": item["id"], "output_index": index,
                   "content_index": 0, "text": part["text"], "logprobs": []}
            yield {"type": "response.content_part.done", "item_id": item["id"], "output_index": index,
                   "content_index": 0, "part": part}
        yield {"type": "response.output_item.done", "output_index": index, "item": item}
    yield {"type": "response.completed", "response": response}


def numbered(doc: dict, number: int) -> dict:
    """An event with its ``sequence_number`` right after its ``type``, as the API writes it."""
    kind = doc["type"]
    return {"type": kind, "sequence_number": number, **{k: v for k, v in doc.items() if k != "type"}}


async def _stream(req: MockRequest, send: Send, response: dict) -> None:
    step = req.step
    await start_stream(send)
    for number, doc in enumerate(response_events(req, response)):
        kind = doc["type"]
        data = sse(numbered(doc, number), kind)
        if kind in ("error", "response.completed"):
            await end_stream(send, data)
            return
        await stream_part(send, data, step if kind.endswith(".delta") else None)


def _include_problem(req: MockRequest) -> str | None:
    q = parse_qs(req.query, keep_blank_values=True)
    for value in q.get("include", []) + q.get("include[]", []):
        if value not in INCLUDABLE:
            return f"Invalid value for 'include': {value!r}."
    return None


async def _stored(req: MockRequest, send: Send) -> str | None:
    response_id = req.match.group("response_id")
    if response_id not in req.state.responses:
        await respond_json(send, 404, invalid(f"Response with id '{response_id}' not found.", None))
        return None
    problem = _include_problem(req)
    if problem:
        await respond_json(send, 400, invalid(problem, "include"))
        return None
    return response_id


async def retrieve(req: MockRequest, send: Send) -> None:
    response_id = await _stored(req, send)
    if response_id is not None:
        await respond_json(send, 200, req.state.responses[response_id])


async def input_items(req: MockRequest, send: Send) -> None:
    response_id = await _stored(req, send)
    if response_id is None:
        return
    q = {k: v[-1] for k, v in parse_qs(req.query, keep_blank_values=True).items()}
    try:
        limit = int(q.get("limit") or 20)
    except ValueError:
        limit = 0
    if not 1 <= limit <= 100:
        await respond_json(send, 400, invalid("limit must be between 1 and 100", "limit"))
        return
    order = q.get("order") or "desc"
    if order not in ("asc", "desc"):
        await respond_json(send, 400, invalid(f"Invalid value for 'order': {order!r}.", "order"))
        return
    items = list(req.state.response_input_items[response_id])
    if order == "desc":
        items.reverse()
    ids = [item["id"] for item in items]
    if q.get("after") in ids:
        items = items[ids.index(q["after"]) + 1:]
    ids = [item["id"] for item in items]
    if q.get("before") in ids:
        items = items[:ids.index(q["before"])]
    data = items[:limit]
    await respond_json(send, 200, {"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
                                   "last_id": data[-1]["id"] if data else None, "has_more": len(items) > limit})


_ID = r"(?P<response_id>[^/]+)"
ROUTES = [
    ("POST", re.compile(r"^(?:/v1)?/responses$"), create),
    ("GET", re.compile(rf"^(?:/v1)?/responses/{_ID}$"), retrieve),
    ("GET", re.compile(rf"^(?:/v1)?/responses/{_ID}/input_items$"), input_items),
]
