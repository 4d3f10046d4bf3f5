"""The embeddings request body (POST /v1/embeddings) with the spec's field rules."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from gateway.http.errors import InvalidRequest
from gateway.schema.common import BodyDecoder

# msgspec allows one array type per union, so token arrays share the list with strings; consistency is checked below.
EmbeddingInput = str | list[str | int | list[int]]


class EmbeddingsRequest(msgspec.Struct, frozen=True):
    """``input`` is a string, an array of strings, an array of tokens or an array of token arrays, never empty.

    ``input_type`` is not a vendorA field: it is passed to the providers whose embedding models take one (cohere's
    ``input_type``, default ``search_document``; voyage's ``input_type``; jina's ``task``).
    """

    model: str
    input: EmbeddingInput
    encoding_format: Literal["float", "base64"] | None = None
    dimensions: Annotated[int, msgspec.Meta(ge=1)] | None = None
    user: str | None = None
    input_type: str | None = None

    def texts(self) -> list[str] | None:
        """The input as a list of strings, or None when it is made of tokens."""
        value = self.input
        if isinstance(value, str):
            return [value]
        if isinstance(value[0], str):
            return value  # type: ignore[return-value]
        return None


_decoder = BodyDecoder(EmbeddingsRequest)
_SHAPES = "input must be a string, an array of strings, an array of tokens or an array of token arrays"


def _check_input(value: EmbeddingInput) -> None:
    if isinstance(value, str):
        if not value:
            raise InvalidRequest("input must not be an empty string", param="input")
        return
    if not value:
        raise InvalidRequest("input must not be an empty array", param="input")
    kind = type(value[0])
    for i, item in enumerate(value):
        if type(item) is not kind:
            raise InvalidRequest(_SHAPES, param="input")
        if kind is str and not item:
            raise InvalidRequest(f"input[{i}] must not be an empty string", param=f"input[{i}]")
        if kind is list and not item:
            raise InvalidRequest(f"input[{i}] must not be an empty token array", param=f"input[{i}]")


def parse_embeddings(body: bytes) -> EmbeddingsRequest:
    """Decode and validate an embeddings body; any violation is a 400 naming the field."""
    req = _decoder.decode(body)
    _check_input(req.input)
    return req
