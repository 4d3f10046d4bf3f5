"""cloudC text embeddings: a unified embeddings request -> ``:predict`` body, the predictions -> an embedding list.

Request: ``input`` (a string or an array of strings; token arrays are refused) -> ``instances: [{"content"}]``
(plus ``task_type`` from the body's ``task_type`` or ``input_type``, and ``title``, when given); ``dimensions`` ->
``parameters.outputDimensionality``. Answer: ``predictions[i].embeddings.values`` -> ``data[i].embedding`` (as
base64 float32 little-endian with ``encoding_format: "base64"``), ``predictions[i].embeddings.statistics.token_count``
summed -> ``usage.prompt_tokens`` / ``total_tokens``.

Wire facts: the Vertex AI text-embeddings reference (cloud.google.com/vertex-ai/docs/generative-ai/embeddings/
get-text-embeddings, and the client types of the public SDKs: predict on ``publishers/google/models/{model}``; instance
fields ``content``, ``task_type``, ``title``; parameters ``autoTruncate``, ``outputDimensionality``; prediction
``embeddings.values`` and ``embeddings.statistics.token_count`` / ``truncated``).
"""

from __future__ import annotations

import base64
import struct
from typing import Any

import msgspec

from gateway.http.errors import InvalidRequest
from gateway.providers.base import malformed
from gateway.providers.fields import FieldTable
from gateway.schema.common import Usage, validation_error

PROVIDER = "cloudC"
#: the embeddings fields ``:predict`` takes (``model`` is in the path); any other field (``user``...) is dropped
FIELDS = FieldTable(frozenset({"model", "input", "dimensions", "encoding_format", "task_type", "input_type",
                               "title"}))


class EmbeddingsBody(msgspec.Struct):
    input: Any
    model: str | None = None
    dimensions: int | None = None
    encoding_format: str | None = None
    task_type: str | None = None
    input_type: str | None = None
    title: str | None = None


class Instance(msgspec.Struct, omit_defaults=True, gc=False):
    content: str
    task_type: str | None = None
    title: str | None = None


class Parameters(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    output_dimensionality: int | None = None


class PredictRequest(msgspec.Struct, omit_defaults=True, gc=False):
    instances: list[Instance]
    parameters: Parameters | None = None


class _Statistics(msgspec.Struct):
    token_count: int | float = 0
    truncated: bool = False


class _Embeddings(msgspec.Struct):
    values: list[float]
    statistics: _Statistics | None = None


class _Prediction(msgspec.Struct):
    embeddings: _Embeddings


class PredictResponse(msgspec.Struct):
    predictions: list[_Prediction]


class EmbeddingsMeta(msgspec.Struct):
    """What the answer needs from the request (the input is skipped, not decoded)."""

    model: str | None = None
    encoding_format: str | None = None


_body = msgspec.json.Decoder(EmbeddingsBody)
_meta = msgspec.json.Decoder(EmbeddingsMeta)
_answer = msgspec.json.Decoder(PredictResponse)
_encoder = msgspec.json.Encoder()


def decode_embeddings_body(body: bytes) -> EmbeddingsBody:
    """The unified embeddings body, decoded (a 400 naming the field when it is not one)."""
    try:
        return _body.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise validation_error(exc) from None


def build_request(body: bytes) -> bytes:
    """The predict body for a unified embeddings body."""
    doc = decode_embeddings_body(body)
    items = doc.input
    if isinstance(items, str):
        items = [items]
    if not isinstance(items, list) or not items or not all(isinstance(i, str) for i in items):
        raise InvalidRequest("cloudC embeddings take input as a string or a non-empty array of strings",
                             param="input")
    task_type = doc.task_type or doc.input_type
    instances = [Instance(text, task_type, doc.title) for text in items]
    parameters = Parameters(doc.dimensions) if doc.dimensions is not None else None
    return _encoder.encode(PredictRequest(instances, parameters))


def _b64(values: list[float]) -> str:
    return base64.b64encode(struct.pack(f"<{len(values)}f", *values)).decode("ascii")


def parse_response(body: bytes, request_body: bytes) -> tuple[bytes, Usage]:
    """A predict answer -> (unified embedding list bytes, usage)."""
    request = _meta.decode(request_body)
    try:
        doc = _answer.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        raise malformed(PROVIDER, "not a predict response with embeddings", body) from None
    as_base64 = request.encoding_format == "base64"
    data = []
    tokens = 0
    for index, prediction in enumerate(doc.predictions):
        values = prediction.embeddings.values
        stats = prediction.embeddings.statistics
        if stats is not None:
            tokens += int(stats.token_count)
        data.append({"object": "embedding", "index": index, "embedding": _b64(values) if as_base64 else values})
    out = {"object": "list", "data": data, "model": request.model,
           "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}
    return _encoder.encode(out), Usage(tokens, 0, tokens)
