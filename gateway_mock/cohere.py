"""Mock of Cohere's v2 rerank (``/v2/rerank``) and embed (``/v2/embed``) endpoints.

Validates as Cohere's v2 reference describes: bearer auth; ``model``, ``query`` and ``documents`` required on rerank
(documents are strings; at least one), ``top_n`` and ``max_tokens_per_doc`` >= 1; on embed ``model``,
``input_type`` (one of Cohere's types) and ``texts`` (1 to 96 strings) required, ``embedding_types`` from Cohere's
list, ``output_dimension`` one of 256/512/1024/1536. Fields outside the v2 request (such as v1's
``return_documents``) are refused so that a gateway sending them is noticed. Model names must be Cohere's own: a
provider-prefixed name (``cohere.rerank-v3.5``, ``cohere/...``) is a 404, as an unknown model is. Answers carry
``id``, ``meta.api_version`` and ``meta.billed_units`` (one search unit per 100 documents; input tokens for embed).
Errors are ``{"id", "message"}``.
"""

from __future__ import annotations

import math
import re
import uuid

from gateway_mock.asgi import Send
from gateway_mock.kit import MockRequest, count_tokens, respond_json
from gateway_mock.scoring import (
    AUTH,
    NO_MODEL,
    NOT_OBJECT,
    UNKNOWN_FIELDS,
    checked_body,
    is_positive_int,
    is_str_list,
    rerank_items,
    scripted_error,
    worded,
)
from gateway_mock.vendorA import embedding_vector

RERANK_FIELDS = frozenset({"model", "query", "documents", "top_n", "max_tokens_per_doc", "priority"})
EMBED_FIELDS = frozenset({"model", "input_type", "texts", "images", "inputs", "embedding_types", "output_dimension",
                          "max_tokens", "truncate"})
INPUT_TYPES = frozenset({"search_document", "search_query", "classification", "clustering", "image"})
EMBEDDING_TYPES = frozenset({"float", "int8", "uint8", "binary", "ubinary", "base64"})
OUTPUT_DIMENSIONS = frozenset({256, 512, 1024, 1536})
API_VERSION = {"version": "2", "is_experimental": False}


async def _fail(send: Send, status: int, message: str, headers: list | None = None) -> None:
    await respond_json(send, status, {"id": str(uuid.uuid4()), "message": message}, headers)


error = scripted_error(_fail)
_refuse = worded(_fail, {
    AUTH: (401, "invalid api token"),
    NOT_OBJECT: (400, "invalid request: body must be a JSON object"),
    UNKNOWN_FIELDS: (400, "invalid request: unknown field(s): {}"),
    NO_MODEL: (400, "invalid request: model is required"),
})


async def _common(req: MockRequest, send: Send, fields: frozenset[str]) -> dict | None:
    """The body when auth, JSON, field names and the model are acceptable; otherwise the error is sent and None
    returned."""
    doc = await checked_body(req, send, fields, _refuse)
    if doc is None:
        return None
    model = doc["model"]
    if re.match(r"^cohere[./]", model):
        await _fail(send, 404, f"model '{model}' not found, make sure the correct model ID was used and that you "
                               "have access to the model.")
        return None
    return doc


async def rerank(req: MockRequest, send: Send) -> None:
    doc = await _common(req, send, RERANK_FIELDS)
    if doc is None:
        return
    query = doc.get("query")
    if not isinstance(query, str) or not query.strip():
        await _fail(send, 400, "invalid request: query must not be empty or be only whitespace")
        return
    documents = doc.get("documents")
    if not isinstance(documents, list) or not documents:
        await _fail(send, 400, "invalid request: list of documents must not be empty")
        return
    if not is_str_list(documents):
        await _fail(send, 400, "invalid request: documents must be a list of strings")
        return
    for field in ("top_n", "max_tokens_per_doc"):
        if field in doc and not is_positive_int(doc[field]):
            await _fail(send, 400, f"invalid request: {field} must be a positive integer")
            return
    await respond_json(send, 200, {
        "id": str(uuid.uuid4()),
        "results": rerank_items(query, documents, doc.get("top_n")),
        "meta": {"api_version": API_VERSION, "billed_units": {"search_units": math.ceil(len(documents) / 100)}},
    })


async def embed(req: MockRequest, send: Send) -> None:
    doc = await _common(req, send, EMBED_FIELDS)
    if doc is None:
        return
    if doc.get("input_type") not in INPUT_TYPES:
        await _fail(send, 400, "invalid request: valid input_type must be provided with the provided model")
        return
    texts = doc.get("texts")
    if not is_str_list(texts) or not texts:
        await _fail(send, 400, "invalid request: texts must be a non-empty list of strings")
        return
    if len(texts) > 96:
        await _fail(send, 400, f"invalid request: total number of texts must be at most 96 - received {len(texts)}")
        return
    types = doc.get("embedding_types", ["float"])
    if not is_str_list(types) or not types or not set(types) <= EMBEDDING_TYPES:
        await _fail(send, 400, f"invalid request: embedding_types must be a list of {sorted(EMBEDDING_TYPES)}")
        return
    dims = doc.get("output_dimension")
    if dims is not None and dims not in OUTPUT_DIMENSIONS:
        await _fail(send, 400, "invalid request: output_dimension must be one of 256, 512, 1024, 1536")
        return
    vectors = [embedding_vector(text, dims or 8) for text in texts]
    embeddings: dict = {}
    for kind in types:
        if kind == "float":
            embeddings["float"] = vectors
        elif kind == "int8":
            embeddings["int8"] = [[round(v * 127) for v in vec] for vec in vectors]
    await respond_json(send, 200, {
        "id": str(uuid.uuid4()),
        "embeddings": embeddings,
        "texts": texts,
        "meta": {"api_version": API_VERSION,
                 "billed_units": {"input_tokens": sum(count_tokens(t) for t in texts)}},
        "response_type": "embeddings_by_type",
    })


ROUTES = [
    ("POST", re.compile(r"^/v2/rerank$"), rerank),
    ("POST", re.compile(r"^/v2/embed$"), embed),
]
