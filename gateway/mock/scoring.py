"""Deterministic relevance scores and shared checks for the rerank and embedding mocks (cohere, voyage, jina).

A document's relevance to a query is 0.9 x (the share of the query's words found in it) + 0.1 x (the Jaccard
similarity of the two word sets), rounded to 6 places: a document with more of the query's words always ranks
higher, and scores stay in [0, 1].
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

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


def is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)
