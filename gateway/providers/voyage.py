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

from gateway.http.errors import GatewayError
from gateway.providers.base import (
    EMBEDDINGS,
    RERANK,
    ProviderAdapter,
    UpstreamCall,
    UpstreamRequest,
    UpstreamResult,
    malformed,
)
from gateway.providers.retrieval import detail_error, embedding_result, input_texts, json_body, rerank_result
from gateway.providers.vendorA import bearer_headers

BASE_URL = "https://api.voyageai.com/v1"
PATHS = {RERANK: "/rerank", EMBEDDINGS: "/embeddings"}


class _Usage(msgspec.Struct, gc=False):
    total_tokens: int = 0


class _RerankItem(msgspec.Struct, gc=False):
    index: int
    relevance_score: float
    document: str | None = None


class _RerankAnswer(msgspec.Struct):
    data: list[_RerankItem]
    model: str | None = None
    usage: _Usage | None = None


class _EmbeddingItem(msgspec.Struct, gc=False):
    embedding: list[float]
    index: int


class _EmbedAnswer(msgspec.Struct):
    data: list[_EmbeddingItem]
    model: str | None = None
    usage: _Usage | None = None


_rerank_decoder = msgspec.json.Decoder(_RerankAnswer)
_embed_decoder = msgspec.json.Decoder(_EmbedAnswer)


class VoyageAdapter(ProviderAdapter):
    name = "voyage"
    endpoints = frozenset({RERANK, EMBEDDINGS})

    async def build_request(self, call: UpstreamCall) -> UpstreamRequest:
        base = (call.target.custom_host or BASE_URL).rstrip("/")
        req = call.request
        doc: dict[str, Any]
        if call.endpoint == RERANK:
            doc = {"query": req.query, "documents": req.texts(), "model": req.model,
                   "return_documents": req.return_documents}
            if req.top_n is not None:
                doc["top_k"] = req.top_n
            if req.truncation is not None:
                doc["truncation"] = req.truncation
        else:
            doc = {"input": input_texts(call), "model": req.model}
            if req.input_type is not None:
                doc["input_type"] = req.input_type
            if req.dimensions is not None:
                doc["output_dimension"] = req.dimensions
        return UpstreamRequest(base + PATHS[call.endpoint], bearer_headers(call.target.api_key), json_body(doc))

    def parse_error(self, call: UpstreamCall, status: int, headers: Any, body: bytes) -> GatewayError:
        return detail_error(self.name, status, body, headers)

    def parse_response(self, call: UpstreamCall, status: int, headers: Any, body: bytes) -> UpstreamResult:
        if call.endpoint == RERANK:
            try:
                answer = _rerank_decoder.decode(body)
            except msgspec.MsgspecError:
                raise malformed(self.name, "not a rerank answer", body) from None
            tokens = answer.usage.total_tokens if answer.usage else 0
            scored = [(item.index, item.relevance_score, item.document) for item in answer.data]
            return rerank_result(call, scored, None, tokens, tokens)
        try:
            answer = _embed_decoder.decode(body)
        except msgspec.MsgspecError:
            raise malformed(self.name, "not an embeddings answer", body) from None
        vectors = [item.embedding for item in sorted(answer.data, key=lambda item: item.index)]
        if len(vectors) != len(input_texts(call)):
            raise malformed(self.name, "embeddings answer without one embedding per input", body)
        tokens = answer.usage.total_tokens if answer.usage else 0
        return embedding_result(call, vectors, answer.model, tokens)
