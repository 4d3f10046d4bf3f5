"""The rerank request body (POST /v1/rerank) with the spec's field rules."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from gateway.schema.common import BodyDecoder

Positive = Annotated[int, msgspec.Meta(ge=1)]


class RerankDocument(msgspec.Struct, frozen=True, gc=False):
    """The object form of a document: ``text`` (required) and optional ``metadata``; other keys are ignored."""

    text: str
    metadata: dict[str, Any] | None = None


class RerankRequest(msgspec.Struct, frozen=True):
    """The spec's /rerank table. The provider-specific fields are passed to the providers that know them:
    ``max_tokens_per_doc`` and ``priority`` to cohere, ``truncation`` to voyage; ``rank_fields`` and ``parameters``
    are accepted for providers that take them and not sent to cohere, voyage or jina, which have no such fields.
    """

    model: str
    query: str
    documents: Annotated[list[str | RerankDocument], msgspec.Meta(min_length=1)]
    top_n: Positive | None = None
    return_documents: bool = False
    max_tokens_per_doc: Positive | None = None
    priority: int | float | None = None
    rank_fields: list[str] | None = None
    truncation: bool | None = None
    parameters: dict[str, Any] | None = None

    def texts(self) -> list[str]:
        """The documents as plain strings (the ``text`` of object documents)."""
        return [doc if isinstance(doc, str) else doc.text for doc in self.documents]


_decoder = BodyDecoder(RerankRequest)


def parse_rerank(body: bytes) -> RerankRequest:
    """Decode and validate a rerank body; any violation is a 400 naming the field."""
    return _decoder.decode(body)
