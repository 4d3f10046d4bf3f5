"""Mock of Voyage AI's rerank and embeddings endpoints, served under ``/voyage/v1`` (custom_host ``<mock>/voyage/v1``).

Voyage and jina both live at ``/v1/rerank`` and ``/v1/embeddings`` upstream; the mock gives each its own prefix.
Validates as Voyage's reference describes: bearer auth; rerank needs ``query``, ``documents`` (1 to 1,000 strings)
and ``model``, takes ``top_k`` (>= 1; Voyage's name, so a ``top_n`` is refused as an unknown argument),
``return_documents`` and ``truncation``; embeddings need ``input`` (a string or 1 to 1,000 strings) and ``model``,
take ``input_type`` (null, ``query``, ``document``), ``truncation``, ``output_dimension`` (256, 512, 1024, 2048),
``output_dtype`` and ``encoding_format``. Answers are ``{object: "list", data, model, usage: {total_tokens}}``;
errors are ``{"detail": "..."}``.
"""

from __future__ import annotations

import re

from gateway.mock.kit import MockRequest, Send, count_tokens, respond_json, retry_headers
from gateway.mock.scoring import bearer, body_json, is_positive_int, is_str_list, ranked
from gateway.mock.vendorA import embedding_vector

RERANK_FIELDS = frozenset({"query", "documents", "model", "top_k", "return_documents", "truncation"})
EMBED_FIELDS = frozenset({"input", "model", "input_type", "truncation", "output_dimension", "output_dtype",
                          "encoding_format"})
OUTPUT_DIMENSIONS = frozenset({256, 512, 1024, 2048})


async def _fail(send: Send, status: int, detail: str, headers: list | None = None) -> None:
    await respond_json(send, status, {"detail": detail}, headers)


async def error(req: MockRequest, send: Send) -> None:
    step = req.step
    await _fail(send, step.status, step.message or f"mock upstream error {step.status}", retry_headers(step))


async def _common(req: MockRequest, send: Send, fields: frozenset[str]) -> dict | None:
    if bearer(req.headers) is None:
        await _fail(send, 401, "Provided API key is invalid.")
        return None
    doc = body_json(req.body)
    if doc is None:
        await _fail(send, 400, "Request body must be a JSON object.")
        return None
    unknown = sorted(set(doc) - fields)
    if unknown:
        await _fail(send, 400, f"Unexpected argument(s) in the request body: {', '.join(unknown)}.")
        return None
    if not isinstance(doc.get("model"), str) or not doc["model"]:
        await _fail(send, 400, "Argument 'model' is required.")
        return None
    return doc


async def rerank(req: MockRequest, send: Send) -> None:
    doc = await _common(req, send, RERANK_FIELDS)
    if doc is None:
        return
    query = doc.get("query")
    if not isinstance(query, str) or not query:
        await _fail(send, 400, "Argument 'query' must be a non-empty string.")
        return
    documents = doc.get("documents")
    if not is_str_list(documents) or not 1 <= len(documents) <= 1000:
        await _fail(send, 400, "Argument 'documents' must be a list of 1 to 1000 strings.")
        return
    top_k = doc.get("top_k")
    if top_k is not None and not is_positive_int(top_k):
        await _fail(send, 400, "Argument 'top_k' must be a positive integer.")
        return
    with_documents = doc.get("return_documents", False)
    data = []
    for index, score in ranked(query, documents, top_k):
        item: dict = {"index": index, "relevance_score": score}
        if with_documents:
            item["document"] = documents[index]
        data.append(item)
    tokens = count_tokens(query) * len(documents) + sum(count_tokens(d) for d in documents)
    await respond_json(send, 200, {"object": "list", "data": data, "model": doc["model"],
                                   "usage": {"total_tokens": tokens}})


async def embeddings(req: MockRequest, send: Send) -> None:
    doc = await _common(req, send, EMBED_FIELDS)
    if doc is None:
        return
    value = doc.get("input")
    texts = [value] if isinstance(value, str) else value
    if not is_str_list(texts) or not 1 <= len(texts) <= 1000:
        await _fail(send, 400, "Argument 'input' must be a string or a list of 1 to 1000 strings.")
        return
    if doc.get("input_type") not in (None, "query", "document"):
        await _fail(send, 400, "Argument 'input_type' must be null, 'query' or 'document'.")
        return
    dims = doc.get("output_dimension")
    if dims is not None and dims not in OUTPUT_DIMENSIONS:
        await _fail(send, 400, "Argument 'output_dimension' must be one of 256, 512, 1024, 2048.")
        return
    data = [{"object": "embedding", "embedding": embedding_vector(text, dims or 8), "index": i}
            for i, text in enumerate(texts)]
    await respond_json(send, 200, {"object": "list", "data": data, "model": doc["model"],
                                   "usage": {"total_tokens": sum(count_tokens(t) for t in texts)}})


ROUTES = [
    ("POST", re.compile(r"^/voyage/v1/rerank$"), rerank),
    ("POST", re.compile(r"^/voyage/v1/embeddings$"), embeddings),
]
