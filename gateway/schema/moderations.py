"""The moderations request body (POST /v1/moderations) with the spec's field rules.

The spec names two models, ``text-moderation-stable`` and ``text-moderation-latest`` (the default). vendorA's
current moderation models are the ``omni-moderation-*`` family (``omni-moderation-latest`` and dated snapshots such
as ``omni-moderation-2024-09-26``), and vendorA's own default is now one of them, so those names are accepted too:
refusing them would refuse what vendorA's SDKs send today. Any other model is a 400 naming ``model``.

``input`` is a string or, as vendorA accepts it, an array of strings; ``omni-moderation-*`` models also take an
array of multi-modal parts (``{"type": "text", "text"}`` / ``{"type": "image_url", "image_url": {"url"}}``).
The body is forwarded as sent: when ``model`` is absent the upstream applies its own default (the spec's
``text-moderation-latest``, "upgraded over time"; vendorA now resolves it to an ``omni-moderation`` snapshot), so an
absent model accepts what either family accepts and ``ModerationRequest.model`` stays None.
"""

from __future__ import annotations

from typing import Any

import msgspec

from gateway.http.errors import InvalidRequest
from gateway.schema.common import BodyDecoder

TEXT_MODELS = frozenset({"text-moderation-stable", "text-moderation-latest"})
OMNI_PREFIX = "omni-moderation-"


class ModerationRequest(msgspec.Struct, frozen=True):
    input: str | list[str | dict[str, Any]]
    model: str | None = None


_decoder = BodyDecoder(ModerationRequest)


def _check_part(i: int, part: dict[str, Any]) -> None:
    kind = part.get("type")
    if kind == "text":
        if not isinstance(part.get("text"), str):
            raise InvalidRequest(f"input[{i}].text must be a string", param=f"input[{i}].text")
    elif kind == "image_url":
        image = part.get("image_url")
        if not isinstance(image, dict) or not isinstance(image.get("url"), str):
            raise InvalidRequest(f"input[{i}].image_url must be an object with a url", param=f"input[{i}].image_url")
    else:
        raise InvalidRequest(f"input[{i}].type must be 'text' or 'image_url'", param=f"input[{i}].type")


def parse_moderation(body: bytes) -> ModerationRequest:
    """Decode and validate a moderations body; any violation is a 400 naming the field."""
    req = _decoder.decode(body)
    model = req.model
    omni = model is None or (model.startswith(OMNI_PREFIX) and len(model) > len(OMNI_PREFIX))
    if model is not None and model not in TEXT_MODELS and not omni:
        raise InvalidRequest(
            f"model '{model}' is not a moderation model: use text-moderation-latest, text-moderation-stable or "
            "an omni-moderation-* model",
            param="model",
        )
    value = req.input
    if isinstance(value, list):
        if not value:
            raise InvalidRequest("input must not be an empty array", param="input")
        if isinstance(value[0], str):
            if not all(isinstance(item, str) for item in value):
                raise InvalidRequest("input must be a string, an array of strings or an array of parts",
                                     param="input")
        else:
            if not omni:
                raise InvalidRequest(f"model '{model}' accepts only text: input must be a string or an array of "
                                     "strings", param="input")
            for i, part in enumerate(value):
                if not isinstance(part, dict):
                    raise InvalidRequest("input must be a string, an array of strings or an array of parts",
                                         param="input")
                _check_part(i, part)
    return req
