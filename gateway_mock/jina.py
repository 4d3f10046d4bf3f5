"""Mock of Jina AI's rerank and embeddings endpoints, served under ``/jina/v1`` (custom_host ``<mock>/jina/v1``).

Voyage and jina both live at ``/v1/rerank`` and ``/v1/embeddings`` upstream; the mock gives each its own prefix.
Validates as Jina's reference describes: bearer auth; rerank needs ``model``, ``query`` and ``documents`` (strings or
``{text}`` objects), takes ``top_n`` (>= 1) and ``return_documents`` (default false: documents only when asked);
embeddings need ``model`` and ``input`` (a string or strings), take ``task``, ``dimensions``, ``embedding_type``,
``normalized``, ``late_chunking`` and ``truncate``. A body that fails validation is a 422 in the FastAPI form
``{"detail": [{loc, msg, type}]}``; other errors are ``{"detail": "..."}``.
"""

from __future__ import annotations

import re

from gateway_mock.asgi import Send
from gateway_mock.kit import MockRequest, count_tokens, respond_json
from gateway_mock.scoring import (
    AUTH,
    NOT_OBJECT,
    UNKNOWN_FIELDS,
    checked_body,
    detail_fail,
    input_list,
    is_positive_int,
    is_str_list,
    rerank_items,
    rerank_tokens,
    scripted_error,
)
from gateway_mock.vendorA import embedding_vector

RERANK_FIELDS = frozenset({"model", "query", "documents", "top_n", "return_documents"})
EMBED_FIELDS = frozenset({"model", "input", "task", "dimensions", "embedding_type", "normalized", "late_chunking",
                          "truncate"})
TASKS = frozenset({"retrieval.query", "retrieval.passage", "text-matching", "classification", "separation"})


async def _invalid(send: Send, field: str, msg: str, kind: str = "value_error") -> None:
    await respond_json(send, 422, {"detail": [{"loc": ["body", field], "msg": msg, "type": kind}]})


error = scripted_error(detail_fail)


async def _refuse(send: Send, check: str, unknown: list[str]) -> None:
    """A failed common check: a 401 for auth, else the 422 validation form (naming the first unknown field)."""
    if check == AUTH:
        await detail_fail(send, 401, "Unauthorized: missing or invalid API key")
    elif check == NOT_OBJECT:
        await _invalid(send, "__root__", "body must be a JSON object", "type_error.dict")
    elif check == UNKNOWN_FIELDS:
        await _invalid(send, unknown[0], "extra fields not permitted", "value_error.extra")
    else:
        await _invalid(send, "model", "field required", "value_error.missing")


async def rerank(req: MockRequest, send: Send) -> None:
    doc = await checked_body(req, send, RERANK_FIELDS, _refuse)
    if doc is None:
        return
    query = doc.get("query")
    if not isinstance(query, str) or not query:
        await _invalid(send, "query", "field required", "value_error.missing")
        return
    documents = doc.get("documents")
    if not isinstance(documents, list) or not documents:
        await _invalid(send, "documents", "ensure this value has at least 1 items")
        return
    texts = []
    for item in documents:
        text = item if isinstance(item, str) else item.get("text") if isinstance(item, dict) else None
        if not isinstance(text, str):
            await _invalid(send, "documents", "documents must be strings or objects with a text field")
            return
        texts.append(text)
    top_n = doc.get("top_n")
    if top_n is not None and not is_positive_int(top_n):
        await _invalid(send, "top_n", "ensure this value is greater than or equal to 1")
        return
    as_document = (lambda text: {"text": text}) if doc.get("return_documents", False) else None
    results = rerank_items(query, texts, top_n, as_document)
    await respond_json(send, 200, {"model": doc["model"], "usage": {"total_tokens": rerank_tokens(query, texts)},
                                   "results": results})


async def embeddings(req: MockRequest, send: Send) -> None:
    doc = await checked_body(req, send, EMBED_FIELDS, _refuse)
    if doc is None:
        return
    texts = input_list(doc)
    if not is_str_list(texts) or not texts:
        await _invalid(send, "input", "input must be a string or a non-empty list of strings")
        return
    task = doc.get("task")
    if task is not None and task not in TASKS:
        await _invalid(send, "task", f"task must be one of {', '.join(sorted(TASKS))}")
        return
    dims = doc.get("dimensions")
    if dims is not None and not is_positive_int(dims):
        await _invalid(send, "dimensions", "ensure this value is greater than or equal to 1")
        return
    tokens = sum(count_tokens(t) for t in texts)
    data = [{"object": "embedding", "index": i, "embedding": embedding_vector(text, dims or 8)}
            for i, text in enumerate(texts)]
    await respond_json(send, 200, {"model": doc["model"], "object": "list",
                                   "usage": {"total_tokens": tokens, "prompt_tokens": tokens}, "data": data})


ROUTES = [
    ("POST", re.compile(r"^/jina/v1/rerank$"), rerank),
    ("POST", re.compile(r"^/jina/v1/embeddings$"), embeddings),
]
