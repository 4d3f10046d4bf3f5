"""voyage: rerank and embeddings in Voyage AI's wire format, answered in the unified rerank and embedding formats.

Facts relied on (Voyage AI's public API reference, docs.voyageai.com/reference/reranker-api and
/reference/embeddings-api):

- Base ``https://api.voyageai.com/v1``; bearer auth in ``Authorization``.
- ``POST /v1/rerank`` takes ``query``, ``documents`` (a list of strings, at most 1,000) and ``model`` (all
  required), ``top_k`` (its name for the number of results; default all), ``return_documents`` (default false) and
  ``truncation`` (default true). It answers ``{object: "list", data: [{index, relevance_score, document}], model,
  usage: {total_tokens}}``, ``document`` (a string) only when ``return_documents`` is true. The gateway sends the
  client's ``top_n`` as ``top_k`` and object documents as their ``text``.
- ``POST /v1/embeddings`` takes ``input`` (a string or a list of strings), ``model``, ``input_type`` (null,
  ``query`` or ``document``), ``truncation``, ``output_dimension``, ``output_dtype`` and ``encoding_format``. It
  answers ``{object: "list", data: [{object: "embedding", embedding, index}], model, usage: {total_tokens}}``. The
  gateway sends ``dimensions`` as ``output_dimension`` and ``input_type`` as given, asks for floats and encodes
  base64 itself when the client asked for it.
- Errors are ``{"detail": "..."}`` (the shape Voyage's SDKs and the AI SDK's voyage provider read), relayed with
  the upstream's status and message.

Usage: the unified rerank ``usage.search_units`` carries the provider's billed quantity. Voyage bills reranking by
tokens and reports only ``usage.total_tokens``, so that number is the ``search_units`` value (one search unit per
billed token), as jina's is; a flat "1 per request" would hide what the call cost.
"""

from __future__ import annotations

from typing import Any

import msgspec

from gateway.providers.base import EMBEDDINGS, RERANK, UpstreamCall
from gateway.providers.fields import FieldTable
from gateway.providers.retrieval import EMBED_FIELDS, RERANK_TAKEN, TokenBilledAdapter, TokenUsage, input_texts

BASE_URL = "https://api.voyageai.com/v1"
PATHS = {RERANK: "/rerank", EMBEDDINGS: "/embeddings"}


class _RerankItem(msgspec.Struct, gc=False):
    index: int
    relevance_score: float
    document: str | None = None


class _RerankAnswer(msgspec.Struct):
    data: list[_RerankItem]
    model: str | None = None
    usage: TokenUsage | None = None


class VoyageAdapter(TokenBilledAdapter):
    name = "voyage"
    base_url = BASE_URL
    paths = PATHS
    fields = {EMBEDDINGS: EMBED_FIELDS, RERANK: FieldTable(RERANK_TAKEN | {"truncation"})}
    rerank_decoder = msgspec.json.Decoder(_RerankAnswer)

    def rerank_body(self, call: UpstreamCall) -> dict[str, Any]:
        req = call.request
        doc: dict[str, Any] = {"query": req.query, "documents": req.texts(), "model": req.model,
                               "return_documents": req.return_documents}
        if req.top_n is not None:
            doc["top_k"] = req.top_n
        if req.truncation is not None:
            doc["truncation"] = req.truncation
        return doc

    def embed_body(self, call: UpstreamCall) -> dict[str, Any]:
        req = call.request
        doc: dict[str, Any] = {"input": input_texts(call), "model": req.model}
        if req.input_type is not None:
            doc["input_type"] = req.input_type
        if req.dimensions is not None:
            doc["output_dimension"] = req.dimensions
        return doc

    def scored(self, answer: _RerankAnswer) -> list[tuple[int, float, str | None]]:
        return [(item.index, item.relevance_score, item.document) for item in answer.data]
