"""Relevance scores, request checks and answer pieces shared by the rerank and embedding mocks (cohere, voyage, jina).

A document's relevance to a query is deterministic: 0.9 x (the share of the query's words found in it) + 0.1 x (the
Jaccard similarity of the two word sets), rounded to 6 places: a document with more of the query's words always ranks
higher, and scores stay in [0, 1].

Every one of these mocks first checks bearer auth, a JSON object body, known field names and a ``model``
(``checked_body``); each words the refusals its own way through a ``refuse(send, check, unknown_fields)`` callback
(``worded`` makes one from ``(status, message)`` pairs) and answers scripted errors with ``scripted_error``.
"""

from __future__ import annotations

import re
from typing import Any, Awaitable, Callable, TypeGuard

import msgspec

from gateway_mock.asgi import Send
from gateway_mock.kit import Handler, MockRequest, count_tokens, respond_json, retry_headers

#: ``fail(send, status, message, headers=None)``: one provider's error body
Fail = Callable[..., Awaitable[None]]
#: ``refuse(send, check, unknown_fields)``: one provider's answer to a failed ``checked_body`` check
Refuse = Callable[[Send, str, list[str]], Awaitable[None]]

# the checks of ``checked_body``, in the order they are made
AUTH = "auth"
NOT_OBJECT = "not_object"
UNKNOWN_FIELDS = "unknown_fields"
NO_MODEL = "no_model"

_WORD = re.compile(r"\w+")


def words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def relevance(query: str, document: str) -> float:
    q, d = words(query), words(document)
    if not q or not d:
        return 0.0
    common = len(q & d)
    return round(0.9 * common / len(q) + 0.1 * common / len(q | d), 6)


def ranked(query: str, documents: list[str], top: int | None) -> list[tuple[int, float]]:
    """``(index, score)`` sorted by score, highest first (ties in document order), cut to ``top``."""
    scored = sorted(((i, relevance(query, doc)) for i, doc in enumerate(documents)), key=lambda p: (-p[1], p[0]))
    return scored[:top] if top is not None else scored


def body_json(body: bytes) -> dict[str, Any] | None:
    """The body as a JSON object, or None when it is not one."""
    try:
        doc = msgspec.json.decode(body) if body else None
    except msgspec.DecodeError:
        return None
    return doc if isinstance(doc, dict) else None


def bearer(headers: dict[str, str]) -> str | None:
    value = headers.get("authorization", "")
    if value.lower().startswith("bearer ") and value[7:].strip():
        return value[7:].strip()
    return None


def is_positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def is_str_list(value: Any) -> TypeGuard[list[str]]:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


async def detail_fail(send: Send, status: int, detail: str, headers: list | None = None) -> None:
    """An error in the ``{"detail": "..."}`` form (voyage, jina)."""
    await respond_json(send, status, {"detail": detail}, headers)


def scripted_error(fail: Fail) -> Handler:
    """A mock module's ``error(req, send)``: the scenario step's status and message (or a default) as ``fail``
    writes them, with the step's retry headers."""

    async def error(req: MockRequest, send: Send) -> None:
        step = req.step
        await fail(send, step.status, step.message or f"mock upstream error {step.status}", retry_headers(step))

    return error


def worded(fail: Fail, wording: dict[str, tuple[int, str]]) -> Refuse:
    """A ``refuse`` that answers each check with its ``(status, message)`` through ``fail``; the ``UNKNOWN_FIELDS``
    message has ``{}`` where the unknown names go, joined with ``, ``."""

    async def refuse(send: Send, check: str, unknown: list[str]) -> None:
        status, message = wording[check]
        await fail(send, status, message.format(", ".join(unknown)) if check == UNKNOWN_FIELDS else message)

    return refuse


async def checked_body(req: MockRequest, send: Send, fields: frozenset[str], refuse: Refuse) -> dict | None:
    """The body when auth, JSON, field names and ``model`` are acceptable; otherwise the first failed check is
    answered through ``refuse`` and None returned."""
    if bearer(req.headers) is None:
        await refuse(send, AUTH, [])
        return None
    doc = body_json(req.body)
    if doc is None:
        await refuse(send, NOT_OBJECT, [])
        return None
    unknown = sorted(set(doc) - fields)
    if unknown:
        await refuse(send, UNKNOWN_FIELDS, unknown)
        return None
    model = doc.get("model")
    if not isinstance(model, str) or not model:
        await refuse(send, NO_MODEL, [])
        return None
    return doc


def input_list(doc: dict) -> Any:
    """The body's ``input`` as a list when it is a lone string; anything else as sent, for the caller to check."""
    value = doc.get("input")
    return [value] if isinstance(value, str) else value


def rerank_items(query: str, texts: list[str], top: int | None,
                 document: Callable[[str], Any] | None = None) -> list[dict]:
    """``{index, relevance_score}`` items, best first, cut to ``top``; with ``document`` each also carries
    ``document(text)`` as its ``document``."""
    items = []
    for index, score in ranked(query, texts, top):
        item: dict = {"index": index, "relevance_score": score}
        if document is not None:
            item["document"] = document(texts[index])
        items.append(item)
    return items


def rerank_tokens(query: str, texts: list[str]) -> int:
    """Tokens billed for a rerank: the query once per document plus every document."""
    return count_tokens(query) * len(texts) + sum(count_tokens(t) for t in texts)
