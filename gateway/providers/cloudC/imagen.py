"""cloudC image generation: a vendorA ``/v1/images/generations`` body -> an Imagen ``:predict`` body, and back.

Request: ``prompt`` -> ``instances: [{"prompt"}]``; ``n`` -> ``parameters.sampleCount`` (1 to 4); ``size``
``WxH`` -> ``parameters.aspectRatio``, the ratio Imagen makes (1:1, 3:4, 4:3, 9:16, 16:9) within 5% of the size's
(``auto`` and no size leave the model's default); ``output_format`` png / jpeg ->
``parameters.outputOptions.mimeType``. Imagen returns image bytes only, so ``response_format: "url"``, a
``size`` of another ratio, ``stream`` and a model that is no Imagen model are 400s naming the field and cloudC,
before anything is sent; other fields are not sent.
Answer: ``predictions[i].bytesBase64Encoded`` -> ``data[i].b64_json`` (a prediction filtered by the platform's
safety checks carries ``raiFilteredReason`` and no image: it is left out); no usage (the gateway counts the images).

Wire facts: the Vertex AI Imagen API reference (cloud.google.com/vertex-ai/generative-ai/docs/model-reference/
imagen-api and ".../image/configure-aspect-ratio": predict on ``publishers/google/models/{model}``, instance
``prompt``, parameters ``sampleCount``, ``aspectRatio``, ``outputOptions.mimeType``; prediction
``bytesBase64Encoded``, ``mimeType``, ``raiFilteredReason``).
"""

from __future__ import annotations

import time
from math import gcd
from typing import Any

import msgspec

from gateway.http.errors import InvalidRequest
from gateway.providers.base import malformed

PROVIDER = "cloudC"
ASPECT_RATIOS = frozenset({"1:1", "3:4", "4:3", "9:16", "16:9"})
#: how far a size's ratio may be from the nearest of ASPECT_RATIOS (dall-e-3's 1792x1024 is 16:9 within 2%)
RATIO_TOLERANCE = 0.05
_MIME = {"png": "image/png", "jpeg": "image/jpeg"}


class ImageBody(msgspec.Struct):
    prompt: str = ""
    model: str | None = None
    n: int | None = None
    size: str | None = None
    response_format: str | None = None
    output_format: str | None = None
    stream: bool = False


class _Prediction(msgspec.Struct):
    bytesBase64Encoded: str | None = None


class _Answer(msgspec.Struct):
    predictions: list[_Prediction] = []


_body = msgspec.json.Decoder(ImageBody)
_answer = msgspec.json.Decoder(_Answer)
_encode = msgspec.json.encode


def _refuse(message: str, param: str) -> InvalidRequest:
    return InvalidRequest(f"{message} (provider '{PROVIDER}')", param=param)


def is_imagen(model: str | None) -> bool:
    return bool(model) and ("imagen" in str(model) or str(model).startswith("imagegeneration"))


def build_request(body: bytes) -> bytes:
    """The ``:predict`` body for a vendorA images generation body."""
    try:
        request = _body.decode(body)
    except msgspec.DecodeError as exc:
        raise InvalidRequest(f"invalid request body: {exc}") from None
    if not is_imagen(request.model):
        raise _refuse(f"model {request.model!r} is no Imagen model: cloudC generates images with Imagen models "
                      "(imagen-...)", "model")
    if request.response_format == "url":
        raise _refuse("response_format 'url' cannot be served: Imagen returns the image bytes (use b64_json)",
                      "response_format")
    if request.stream:
        raise _refuse("stream is not supported for Imagen image generation", "stream")
    parameters: dict[str, Any] = {"sampleCount": request.n or 1}
    if request.n is not None and not 1 <= request.n <= 4:
        raise _refuse("n must be between 1 and 4 for Imagen", "n")
    if request.size not in (None, "auto"):
        parameters["aspectRatio"] = _aspect_ratio(str(request.size))
    if request.output_format is not None:
        mime = _MIME.get(request.output_format)
        if mime is None:
            raise _refuse(f"output_format {request.output_format!r} is not one of png, jpeg", "output_format")
        parameters["outputOptions"] = {"mimeType": mime}
    return _encode({"instances": [{"prompt": request.prompt}], "parameters": parameters})


def _aspect_ratio(size: str) -> str:
    width, _, height = size.partition("x")
    if not (width.isdigit() and height.isdigit() and int(width) and int(height)):
        raise _refuse(f"size {size!r} is not WIDTHxHEIGHT", "size")
    w, h = int(width), int(height)
    wanted = w / h
    nearest = min(ASPECT_RATIOS, key=lambda r: abs(_value(r) / wanted - 1))
    if abs(_value(nearest) / wanted - 1) > RATIO_TOLERANCE:
        d = gcd(w, h)
        raise _refuse(f"size {size!r} has aspect ratio {w // d}:{h // d}; Imagen makes "
                      f"{', '.join(sorted(ASPECT_RATIOS))}", "size")
    return nearest


def _value(ratio: str) -> float:
    w, _, h = ratio.partition(":")
    return int(w) / int(h)


def parse_response(body: bytes) -> bytes:
    """The vendorA images answer for an Imagen ``:predict`` answer."""
    try:
        answer = _answer.decode(body)
    except msgspec.DecodeError:
        raise malformed(PROVIDER, "not an Imagen predict answer", body) from None
    data = [{"b64_json": p.bytesBase64Encoded} for p in answer.predictions if p.bytesBase64Encoded]
    return _encode({"created": int(time.time()), "data": data})
