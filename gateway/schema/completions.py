"""The text completions request body (POST /v1/completions) with the spec's field rules."""

from __future__ import annotations

from typing import Annotated

import msgspec

from gateway.http.errors import InvalidRequest
from gateway.schema.common import (
    BodyDecoder,
    ChoiceCount,
    LogitBias,
    Penalty,
    Seed,
    Stop,
    StreamOptions,
    Temperature,
    TopP,
)

Prompt = str | list[str | int | list[int]]


class CompletionRequest(msgspec.Struct, frozen=True):
    model: str
    prompt: Prompt
    best_of: Annotated[int, msgspec.Meta(ge=0, le=20)] | None = None
    echo: bool | None = None
    frequency_penalty: Penalty | None = None
    presence_penalty: Penalty | None = None
    logit_bias: LogitBias | None = None
    logprobs: Annotated[int, msgspec.Meta(ge=0, le=5)] | None = None
    max_tokens: Annotated[int, msgspec.Meta(ge=0)] | None = None
    n: ChoiceCount | None = None
    seed: Seed | None = None
    stop: Stop | None = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    suffix: str | None = None
    temperature: Temperature | None = None
    top_p: TopP | None = None
    user: str | None = None


_decoder = BodyDecoder(CompletionRequest)


def parse_completion(body: bytes) -> CompletionRequest:
    """Decode and validate a completions body; any violation is a 400 naming the field.

    best_of: when both best_of and n are sent and n > 1, best_of must be greater than n; best_of > 1 cannot be
    streamed.
    """
    req = _decoder.decode(body)
    if isinstance(req.prompt, list) and req.prompt:
        kinds = {type(p) for p in req.prompt}
        if len(kinds) > 1:
            raise InvalidRequest(
                "prompt must be a string, an array of strings, an array of tokens or an array of token arrays",
                param="prompt",
            )
    if req.stream_options is not None and not req.stream:
        raise InvalidRequest("stream_options is only allowed when stream is true", param="stream_options")
    if req.best_of is not None:
        if req.n is not None and req.n > 1 and req.best_of <= req.n:
            raise InvalidRequest("best_of must be greater than n", param="best_of")
        if req.stream and req.best_of > 1:
            raise InvalidRequest("best_of cannot be used with stream", param="best_of")
    return req
