"""The fine-tuning job create body (POST /v1/fine_tuning/jobs), checked before it is forwarded.

Facts relied on (the spec's Fine-tuning job section and vendorA's fine-tuning reference): ``model`` and
``training_file`` are required strings; ``suffix`` is up to 64 characters; ``method`` is ``{"type": "supervised" |
"dpo" | "reinforcement", <type>: {...}}``; ``validation_file`` is a file id; ``integrations`` holds at most 5
items ``{"type": "wandb", "wandb": {"project" (required), "name", "entity", "tags"}}``; the deprecated top-level
``hyperparameters`` holds ``batch_size``, ``learning_rate_multiplier`` and ``n_epochs``, each ``auto`` or a
positive number; ``seed`` is an integer; ``metadata`` follows the batch metadata limits.

The spec's field listing marks ``suffix`` and ``method`` required; like vendorA, the gateway accepts them absent
(the provider then uses the supervised method and no suffix) and checks them when present.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from gateway.schema.common import BodyDecoder, check_metadata

NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]
PositiveInt = Annotated[int, msgspec.Meta(ge=1)]
PositiveFloat = Annotated[float, msgspec.Meta(gt=0)]
MAX_INTEGRATIONS = 5


class Wandb(msgspec.Struct, frozen=True):
    project: NonEmpty
    name: str | None = None
    entity: str | None = None
    tags: list[str] | None = None


class Integration(msgspec.Struct, frozen=True):
    type: Literal["wandb"]
    wandb: Wandb


class Method(msgspec.Struct, frozen=True):
    type: Literal["supervised", "dpo", "reinforcement"]
    supervised: dict[str, Any] | None = None
    dpo: dict[str, Any] | None = None
    reinforcement: dict[str, Any] | None = None


class Hyperparameters(msgspec.Struct, frozen=True):
    batch_size: Literal["auto"] | PositiveInt | None = None
    learning_rate_multiplier: Literal["auto"] | PositiveFloat | None = None
    n_epochs: Literal["auto"] | PositiveInt | None = None


class CreateFineTuningJob(msgspec.Struct, frozen=True):
    model: NonEmpty
    training_file: NonEmpty
    suffix: Annotated[str, msgspec.Meta(min_length=1, max_length=64)] | None = None
    method: Method | None = None
    validation_file: NonEmpty | None = None
    integrations: Annotated[list[Integration], msgspec.Meta(max_length=MAX_INTEGRATIONS)] | None = None
    hyperparameters: Hyperparameters | None = None
    seed: Annotated[int, msgspec.Meta(ge=0, le=2_147_483_647)] | None = None
    metadata: dict[str, Any] | None = None


_decoder = BodyDecoder(CreateFineTuningJob)


def parse_create_job(body: bytes) -> CreateFineTuningJob:
    request = _decoder.decode(body)
    check_metadata(request.metadata)
    return request
