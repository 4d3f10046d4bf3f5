"""jina: rerank and embeddings in Jina AI's wire format, answered in the unified rerank and embedding formats.

Facts relied on (Jina AI's public API reference, jina.ai/reranker and jina.ai/embeddings):

- Base ``https://api.jina.ai/v1``; bearer auth in ``Authorization``.
- ``POST /v1/rerank`` takes ``model``, ``query``, ``documents`` (strings, or objects with ``text``), ``top_n`` and
  ``return_documents``, and answers ``{model, usage: {total_tokens}, results: [{index, relevance_score,
  document: {text}}]}``. Jina changed the default of ``return_documents`` (it now answers without documents unless
  asked; langgenius/dify-official-plugins#1799), so the gateway always sends the client's value explicitly. Object
  documents are sent as their ``text``. Model names are Jina's own (``jina-reranker-v2-base-multilingual``): the
  API answers 422 to a provider-prefixed name such as ``jina-ai/jina-reranker-v3`` (CherryHQ/cherry-studio#14920).
- ``POST /v1/embeddings`` takes ``model``, ``input`` (a list of strings), ``task`` (``retrieval.query``,
  ``retrieval.passage``, ``text-matching``, ...), ``dimensions`` and ``embedding_type`` (``float`` default,
  ``base64``, ``binary``...), and answers vendorA's list shape ``{model, object: "list", usage: {total_tokens,
  prompt_tokens}, data: [{object: "embedding", index, embedding}]}``. The gateway sends the client's ``input_type``
  as ``task`` (Jina's name for the same idea), asks for floats and encodes base64 itself when asked.
- Errors are ``{"detail": "..."}`` or, for validation failures, ``{"detail": [{loc, msg, type}]}`` (a 422),
  relayed with the upstream's status and message.

Usage: Jina bills reranking by tokens and reports ``usage.total_tokens``; that number is the unified
``usage.search_units``.
"""

from __future__ import annotations

from typing import Any

import msgspec

from gateway.providers.base import EMBEDDINGS, RERANK, UpstreamCall
from gateway.providers.fields import FieldTable
from gateway.providers.retrieval import (
    EMBED_FIELDS,
    RERANK_TAKEN,
    TokenBilledAdapter,
    TokenUsage,
    VectorList,
    input_texts,
)

BASE_URL = "https://api.jina.ai/v1"
PATHS = {RERANK: "/rerank", EMBEDDINGS: "/embeddings"}


class _Usage(TokenUsage, gc=False):
    prompt_tokens: int | None = None


class _Document(msgspec.Struct, gc=False):
    text: str | None = None


class _RerankItem(msgspec.Struct, gc=False):
    index: int
    relevance_score: float
    document: _Document | None = None


class _RerankAnswer(msgspec.Struct):
    results: list[_RerankItem]
    model: str | None = None
    usage: _Usage | None = None


class _EmbedAnswer(VectorList):
    usage: _Usage | None = None


class JinaAdapter(TokenBilledAdapter):
    name = "jina"
    base_url = BASE_URL
    paths = PATHS
    fields = {EMBEDDINGS: EMBED_FIELDS, RERANK: FieldTable(RERANK_TAKEN)}
    rerank_decoder = msgspec.json.Decoder(_RerankAnswer)
    embed_decoder = msgspec.json.Decoder(_EmbedAnswer)

    def rerank_body(self, call: UpstreamCall) -> dict[str, Any]:
        req = call.request
        doc: dict[str, Any] = {"model": req.model, "query": req.query, "documents": req.texts(),
                               "return_documents": req.return_documents}
        if req.top_n is not None:
            doc["top_n"] = req.top_n
        return doc

    def embed_body(self, call: UpstreamCall) -> dict[str, Any]:
        req = call.request
        doc: dict[str, Any] = {"model": req.model, "input": input_texts(call), "embedding_type": "float"}
        if req.input_type is not None:
            doc["task"] = req.input_type
        if req.dimensions is not None:
            doc["dimensions"] = req.dimensions
        return doc

    def scored(self, answer: _RerankAnswer) -> list[tuple[int, float, str | None]]:
        return [(item.index, item.relevance_score, item.document.text if item.document else None)
                for item in answer.results]
