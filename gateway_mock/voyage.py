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

from gateway_mock.asgi import Send
from gateway_mock.kit import MockRequest, count_tokens, respond_json
from gateway_mock.scoring import (
    AUTH,
    NO_MODEL,
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
    worded,
)
from gateway_mock.vendorA import embedding_vector

RERANK_FIELDS = frozenset({"query", "documents", "model", "top_k", "return_documents", "truncation"})
EMBED_FIELDS = frozenset({"input", "model", "input_type", "truncation", "output_dimension", "output_dtype",
                          "encoding_format"})
OUTPUT_DIMENSIONS = frozenset({256, 512, 1024, 2048})


error = scripted_error(detail_fail)
_refuse = worded(detail_fail, {
    AUTH: (401, "Provided API key is invalid."),
    NOT_OBJECT: (400, "Request body must be a JSON object."),
    UNKNOWN_FIELDS: (400, "Unexpected argument(s) in the request body: {}."),
    NO_MODEL: (400, "Argument 'model' is required."),
})


async def rerank(req: MockRequest, send: Send) -> None:
    doc = await checked_body(req, send, RERANK_FIELDS, _refuse)
    if doc is None:
        return
    query = doc.get("query")
    if not isinstance(query, str) or not query:
        await detail_fail(send, 400, "Argument 'query' must be a non-empty string.")
        return
    documents = doc.get("documents")
    if not is_str_list(documents) or not 1 <= len(documents) <= 1000:
        await detail_fail(send, 400, "Argument 'documents' must be a list of 1 to 1000 strings.")
        return
    top_k = doc.get("top_k")
    if top_k is not None and not is_positive_int(top_k):
        await detail_fail(send, 400, "Argument 'top_k' must be a positive integer.")
        return
    as_document = (lambda text: text) if doc.get("return_documents", False) else None
    data = rerank_items(query, documents, top_k, as_document)
    await respond_json(send, 200, {"object": "list", "data": data, "model": doc["model"],
                                   "usage": {"total_tokens": rerank_tokens(query, documents)}})


async def embeddings(req: MockRequest, send: Send) -> None:
    doc = await checked_body(req, send, EMBED_FIELDS, _refuse)
    if doc is None:
        return
    texts = input_list(doc)
    if not is_str_list(texts) or not 1 <= len(texts) <= 1000:
        await detail_fail(send, 400, "Argument 'input' must be a string or a list of 1 to 1000 strings.")
        return
    if doc.get("input_type") not in (None, "query", "document"):
        await detail_fail(send, 400, "Argument 'input_type' must be null, 'query' or 'document'.")
        return
    dims = doc.get("output_dimension")
    if dims is not None and dims not in OUTPUT_DIMENSIONS:
        await detail_fail(send, 400, "Argument 'output_dimension' must be one of 256, 512, 1024, 2048.")
        return
    data = [{"object": "embedding", "embedding": embedding_vector(text, dims or 8), "index": i}
            for i, text in enumerate(texts)]
    await respond_json(send, 200, {"object": "list", "data": data, "model": doc["model"],
                                   "usage": {"total_tokens": sum(count_tokens(t) for t in texts)}})


ROUTES = [
    ("POST", re.compile(r"^/voyage/v1/rerank$"), rerank),
    ("POST", re.compile(r"^/voyage/v1/embeddings$"), embeddings),
]
