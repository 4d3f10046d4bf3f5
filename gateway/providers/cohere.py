"""cohere: rerank and embeddings in Cohere's v2 wire format, answered in the unified rerank and embedding formats.

Facts relied on (Cohere's public API reference, docs.cohere.com, API v2):

- Base ``https://api.cohere.com/v2``; bearer auth in ``Authorization``.
- ``POST /v2/rerank`` takes ``model``, ``query`` and ``documents`` (all three required; documents are a list of
  strings in v2), ``top_n`` (>= 1, default all) and ``max_tokens_per_doc`` (>= 1, default 4096). The spec's
  ``priority`` is sent here too: Cohere's published rerank schema does not list it, but the reference gateway's
  rerank types mark it "Cohere specific" and forward it to cohere alone. It answers ``{id, results: [{index,
  relevance_score}], meta: {api_version, billed_units: {search_units}}}`` sorted by relevance. v2 has no
  ``return_documents`` and never returns documents, so when the client asks for them the gateway adds
  ``document: {text}`` from the request. Object documents are sent as their ``text``.
- ``POST /v2/embed`` takes ``model``, ``input_type`` (required for embed v3 and newer: ``search_document``,
  ``search_query``, ``classification``, ``clustering``, ``image``), ``texts`` (at most 96), ``embedding_types``
  (``float``, ``int8``, ...) and ``output_dimension`` (embed v4: 256, 512, 1024, 1536). It answers
  ``{id, embeddings: {float: [[...]]}, texts, meta: {billed_units: {input_tokens}}, response_type}``. The gateway
  asks for ``["float"]``, sends ``input_type`` as given (default ``search_document``) and ``dimensions`` as
  ``output_dimension``, and answers vendorA's embedding list with usage from ``meta.billed_units.input_tokens``.
- A non-2xx answer is ``{"message": "..."}`` (docs.cohere.com/reference/errors): relayed with its status and message.

Rerank model prefix. The spec says that for one provider the gateway strips a leading provider prefix from the
rerank model name. The public rerank reference of the gateway this spec describes (its ``/rerank`` ``model`` field,
portkey.ai/docs/api-reference/inference-api/rerank) lists the models per provider and says that Cohere rerank models
named with a ``cohere.`` prefix (the form cloud model catalogues give them, e.g. cloudA's ``cohere.rerank-v3-5:0``)
have "that prefix" stripped "for the upstream request"; Cohere's own API knows only the bare names
(``rerank-v3.5``), and other gateways do the same for ``cohere/`` ids (agentuity/llmproxy PR #22: "strip cohere/
public model prefixes before forwarding to Cohere"). Here every upstream that speaks Cohere's rerank format (Cohere
itself, or a cloud-hosted Cohere deployment reached with ``custom_host``) goes through this adapter, so this is where
a leading ``cohere.`` or ``cohere/`` is removed. The unified answer's ``model`` is the name the client sent.
"""

from __future__ import annotations

from typing import Any

import msgspec

from gateway.providers.base import EMBEDDINGS, RERANK, UpstreamCall, UpstreamResult, malformed
from gateway.providers.fields import FieldTable
from gateway.providers.retrieval import (
    EMBED_FIELDS,
    RERANK_TAKEN,
    RetrievalAdapter,
    embedding_result,
    input_texts,
    rerank_result,
)

BASE_URL = "https://api.cohere.com/v2"
PATHS = {RERANK: "/rerank", EMBEDDINGS: "/embed"}
DEFAULT_INPUT_TYPE = "search_document"
_MODEL_PREFIXES = ("cohere.", "cohere/")


def upstream_model(model: str) -> str:
    """The rerank model name Cohere knows: a leading ``cohere.`` or ``cohere/`` removed."""
    for prefix in _MODEL_PREFIXES:
        if model.startswith(prefix) and len(model) > len(prefix):
            return model[len(prefix):]
    return model


class _BilledUnits(msgspec.Struct, gc=False):
    search_units: int | float | None = None
    input_tokens: int | float | None = None


class _Meta(msgspec.Struct, gc=False):
    billed_units: _BilledUnits | None = None


class _RerankItem(msgspec.Struct, gc=False):
    index: int
    relevance_score: float


class _RerankAnswer(msgspec.Struct):
    results: list[_RerankItem]
    id: str | None = None
    meta: _Meta | None = None


class _Embeddings(msgspec.Struct):
    float_: list[list[float]] | None = msgspec.field(default=None, name="float")


class _EmbedAnswer(msgspec.Struct):
    embeddings: _Embeddings
    id: str | None = None
    meta: _Meta | None = None


_rerank_decoder = msgspec.json.Decoder(_RerankAnswer)
_embed_decoder = msgspec.json.Decoder(_EmbedAnswer)


class CohereAdapter(RetrievalAdapter):
    name = "cohere"
    base_url = BASE_URL
    paths = PATHS
    fields = {EMBEDDINGS: EMBED_FIELDS,
              RERANK: FieldTable(RERANK_TAKEN | {"max_tokens_per_doc", "priority"})}

    def headers(self, call: UpstreamCall) -> dict[str, str]:
        headers = super().headers(call)
        headers["accept"] = "application/json"
        return headers

    def rerank_body(self, call: UpstreamCall) -> dict[str, Any]:
        req = call.request
        doc: dict[str, Any] = {"model": upstream_model(req.model), "query": req.query, "documents": req.texts()}
        if req.top_n is not None:
            doc["top_n"] = req.top_n
        if req.max_tokens_per_doc is not None:
            doc["max_tokens_per_doc"] = req.max_tokens_per_doc
        if req.priority is not None:
            doc["priority"] = req.priority
        return doc

    def embed_body(self, call: UpstreamCall) -> dict[str, Any]:
        req = call.request
        doc: dict[str, Any] = {
            "model": req.model,
            "texts": input_texts(call),
            "input_type": req.input_type or DEFAULT_INPUT_TYPE,
            "embedding_types": ["float"],
        }
        if req.dimensions is not None:
            doc["output_dimension"] = req.dimensions
        return doc

    def rerank_answer(self, call: UpstreamCall, body: bytes) -> UpstreamResult:
        answer = self.decode(_rerank_decoder, body, "not a rerank answer")
        units = answer.meta.billed_units if answer.meta else None
        search_units = units.search_units if units and units.search_units is not None else 0
        scored: list[tuple[int, float, str | None]] = [(i.index, i.relevance_score, None) for i in answer.results]
        return rerank_result(call, scored, answer.id, search_units)

    def embed_answer(self, call: UpstreamCall, body: bytes) -> UpstreamResult:
        answer = self.decode(_embed_decoder, body, "not an embed answer")
        vectors = answer.embeddings.float_
        if vectors is None or len(vectors) != len(input_texts(call)):
            raise malformed(self.name, "embed answer without one float embedding per text", body)
        units = answer.meta.billed_units if answer.meta else None
        tokens = int(units.input_tokens) if units and units.input_tokens is not None else 0
        return embedding_result(call, vectors, call.request.model, tokens)
