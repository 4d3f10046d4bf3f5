"""Unified rerank and embedding answers built from provider-native ones (shared by cohere, voyage and jina).

The rerank answer is the spec's: ``{object: "list", results: [{index, relevance_score, document: {text}}], model,
id, usage: {search_units}, provider}`` with results sorted by relevance, highest first (ties keep request order),
``document`` present only when the request asked for ``return_documents``, and at most ``top_n`` results. The
embedding answer is vendorA's list: ``{object: "list", data: [{object: "embedding", index, embedding}], model,
usage: {prompt_tokens, total_tokens}}``; with ``encoding_format: "base64"`` each embedding is the base64 of its
little-endian float32 values, as vendorA encodes it (so the vendorA SDKs, which ask for base64 by default, decode it).

The adapters' shared frame lives here too: ``RetrievalAdapter`` (URL from ``custom_host`` or the default base plus
the endpoint's path, bearer auth, dispatch to the endpoint's body builder and answer reader) and
``TokenBilledAdapter`` for the providers that answer ``{"detail"}`` errors, bill reranking in tokens and answer
embeddings as a ``{data: [{embedding, index}], model, usage: {total_tokens}}`` list (voyage, jina).
"""

from __future__ import annotations

import abc
import base64
import sys
import uuid
from array import array
from typing import Any

import msgspec

from gateway.http.errors import GatewayError, InvalidRequest
from gateway.providers.base import (
    EMBEDDINGS,
    RERANK,
    ProviderAdapter,
    StreamTransformer,
    UpstreamCall,
    UpstreamResult,
    malformed,
    upstream_error,
)
from gateway.providers.fields import FieldTable
from gateway.providers.vendorA import bearer_headers
from gateway.schema.common import Usage
from gateway.upstream.request import UpstreamRequest

_encode = msgspec.json.encode

#: the embeddings fields cohere, voyage and jina take (``encoding_format: base64`` is done by the gateway); any
#: other field (``user``...) is dropped
EMBED_FIELDS = FieldTable(frozenset({"model", "input", "input_type", "dimensions", "encoding_format"}))
#: the rerank fields every one of them takes, as they are or renamed; each adapter adds its own
RERANK_TAKEN = frozenset({"model", "query", "documents", "top_n", "return_documents"})


class RerankDocumentOut(msgspec.Struct, gc=False):
    text: str


class RerankResultOut(msgspec.Struct, omit_defaults=True, gc=False):
    index: int
    relevance_score: float
    document: RerankDocumentOut | None = None


class RerankUsage(msgspec.Struct, gc=False):
    search_units: int | float


class RerankResponse(msgspec.Struct):
    object: str
    results: list[RerankResultOut]
    model: str
    id: str
    usage: RerankUsage
    provider: str


class EmbeddingItem(msgspec.Struct, gc=False):
    object: str
    index: int
    embedding: list[float] | str


class EmbeddingUsage(msgspec.Struct, gc=False):
    prompt_tokens: int
    total_tokens: int


class EmbeddingList(msgspec.Struct):
    object: str
    data: list[EmbeddingItem]
    model: str
    usage: EmbeddingUsage


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def rerank_result(
    call: UpstreamCall,
    scored: list[tuple[int, float, str | None]],
    response_id: str | None,
    search_units: int | float,
    tokens: int | None = None,
) -> UpstreamResult:
    """The unified rerank answer from ``(index, relevance_score, upstream document text or None)`` triples.

    A returned document's text is the upstream's when it sent one, else the request's own document text.
    """
    request = call.request
    texts = request.texts() if request.return_documents else None
    count = len(request.documents)
    results = []
    for index, score, text in sorted(scored, key=lambda item: (-item[1], item[0])):
        if not 0 <= index < count:
            raise malformed(call.provider, f"result index {index} is outside the {count} documents")
        document = None
        if texts is not None:
            document = RerankDocumentOut(text if text is not None else texts[index])
        results.append(RerankResultOut(index, score, document))
    if request.top_n is not None:
        del results[request.top_n:]
    body = _encode(RerankResponse("list", results, request.model, response_id or new_id("rerank"),
                                  RerankUsage(search_units), call.provider))
    usage = Usage(prompt_tokens=tokens, total_tokens=tokens) if tokens is not None else None
    return UpstreamResult(body, usage, request.model)


def _base64_float32(vector: list[float]) -> str:
    packed = array("f", vector)
    if sys.byteorder == "big":
        packed.byteswap()
    return base64.b64encode(packed.tobytes()).decode("ascii")


def embedding_result(call: UpstreamCall, vectors: list[list[float]], model: str | None, tokens: int) -> UpstreamResult:
    """The vendorA embedding list for ``vectors`` (one per input, in input order)."""
    as_base64 = call.request.encoding_format == "base64"
    data = [
        EmbeddingItem("embedding", i, _base64_float32(vector) if as_base64 else vector)
        for i, vector in enumerate(vectors)
    ]
    model = model or call.request.model
    body = _encode(EmbeddingList("list", data, model, EmbeddingUsage(tokens, tokens)))
    return UpstreamResult(body, Usage(prompt_tokens=tokens, total_tokens=tokens), model)


def input_texts(call: UpstreamCall) -> list[str]:
    """The embeddings input as strings; token arrays are a 400 naming ``input`` (these providers embed text)."""
    texts = call.request.texts()
    if texts is None:
        raise InvalidRequest(
            f"provider '{call.provider}' embeds text only: input must be a string or an array of strings",
            param="input",
        )
    return texts


def json_body(doc: dict[str, Any]) -> bytes:
    return _encode(doc)


class _Detail(msgspec.Struct):
    detail: Any = None
    message: str | None = None


_detail_decoder = msgspec.json.Decoder(_Detail)


def detail_error(provider: str, status: int, body: bytes, headers: Any) -> GatewayError:
    """An error in the ``{"detail": "..."}`` form (or a validation list ``{"detail": [{loc, msg}]}``) relayed
    with the upstream's status and message; anything else falls back to the generic reading."""
    try:
        doc = _detail_decoder.decode(body)
    except msgspec.DecodeError:
        return upstream_error(provider, status, body, headers)
    detail = doc.detail
    message: str | None = None
    if isinstance(detail, str) and detail:
        message = detail
    elif isinstance(detail, list) and detail:
        parts = []
        for item in detail:
            if isinstance(item, dict) and item.get("msg"):
                loc = item.get("loc")
                where = ".".join(str(p) for p in loc if p != "body") if isinstance(loc, list) else ""
                parts.append(f"{where}: {item['msg']}" if where else str(item["msg"]))
        message = "; ".join(parts) or None
    if message is None:
        return upstream_error(provider, status, body, headers)
    return upstream_error(provider, status, body, headers, message=message)


# --- the adapters' shared frame -------------------------------------------------------------------------------

class TokenUsage(msgspec.Struct, gc=False):
    """``usage`` as voyage and jina report it: the billed tokens."""

    total_tokens: int = 0


class VectorItem(msgspec.Struct, gc=False):
    embedding: list[float]
    index: int


class VectorList(msgspec.Struct):
    """An embeddings answer in the list shape voyage and jina share: ``{data: [{embedding, index}], model, usage}``."""

    data: list[VectorItem]
    model: str | None = None
    usage: TokenUsage | None = None


class RetrievalAdapter(ProviderAdapter):
    """A rerank and embeddings adapter: the URL is ``custom_host`` (else ``base_url``) plus the endpoint's entry in
    ``paths``, auth is a bearer token; a subclass builds each endpoint's body and reads each endpoint's answer."""

    base_url: str = ""
    paths: dict[str, str] = {}
    endpoints = frozenset({RERANK, EMBEDDINGS})

    def url(self, call: UpstreamCall) -> str:
        return (call.target.custom_host or self.base_url).rstrip("/") + self.paths[call.endpoint]

    def headers(self, call: UpstreamCall) -> dict[str, str]:
        return bearer_headers(call.target.api_key)

    @abc.abstractmethod
    def rerank_body(self, call: UpstreamCall) -> dict[str, Any]:
        """The provider's rerank request body."""

    @abc.abstractmethod
    def embed_body(self, call: UpstreamCall) -> dict[str, Any]:
        """The provider's embeddings request body."""

    @abc.abstractmethod
    def rerank_answer(self, call: UpstreamCall, body: bytes) -> UpstreamResult:
        """A rerank answer in the unified shape."""

    @abc.abstractmethod
    def embed_answer(self, call: UpstreamCall, body: bytes) -> UpstreamResult:
        """An embeddings answer in the unified shape."""

    def stream(self, call: UpstreamCall) -> StreamTransformer:
        """Rerank and embeddings answers are never streamed."""
        raise InvalidRequest(f"provider '{self.name}' does not stream the {call.endpoint} endpoint", param="stream")

    async def build_request(self, call: UpstreamCall) -> UpstreamRequest:
        url = self.url(call)
        doc = self.rerank_body(call) if call.endpoint == RERANK else self.embed_body(call)
        return UpstreamRequest(url, self.headers(call), json_body(doc))

    def parse_response(self, call: UpstreamCall, status: int, headers: Any, body: bytes) -> UpstreamResult:
        if call.endpoint == RERANK:
            return self.rerank_answer(call, body)
        return self.embed_answer(call, body)

    def decode(self, decoder: msgspec.json.Decoder, body: bytes, what: str) -> Any:
        """``body`` decoded; anything the decoder refuses is a 502 saying it is ``what``."""
        try:
            return decoder.decode(body)
        except msgspec.MsgspecError:
            raise malformed(self.name, what, body) from None


class TokenBilledAdapter(RetrievalAdapter):
    """voyage and jina: ``{"detail"}`` errors; reranking billed in tokens (``usage.total_tokens``, which is also the
    unified ``search_units``); embeddings answered as a ``VectorList``. A subclass sets ``rerank_decoder`` and says
    how its rerank answer's items read (``scored``)."""

    rerank_decoder: msgspec.json.Decoder
    embed_decoder = msgspec.json.Decoder(VectorList)

    def parse_error(self, call: UpstreamCall, status: int, headers: Any, body: bytes) -> GatewayError:
        return detail_error(self.name, status, body, headers)

    @abc.abstractmethod
    def scored(self, answer: Any) -> list[tuple[int, float, str | None]]:
        """``(index, relevance_score, document text or None)`` for each item of a decoded rerank answer."""

    def rerank_answer(self, call: UpstreamCall, body: bytes) -> UpstreamResult:
        answer = self.decode(self.rerank_decoder, body, "not a rerank answer")
        tokens = answer.usage.total_tokens if answer.usage else 0
        return rerank_result(call, self.scored(answer), None, tokens, tokens)

    def embed_answer(self, call: UpstreamCall, body: bytes) -> UpstreamResult:
        answer = self.decode(self.embed_decoder, body, "not an embeddings answer")
        vectors = [item.embedding for item in sorted(answer.data, key=lambda item: item.index)]
        if len(vectors) != len(input_texts(call)):
            raise malformed(self.name, "embeddings answer without one embedding per input", body)
        tokens = answer.usage.total_tokens if answer.usage else 0
        return embedding_result(call, vectors, answer.model, tokens)
