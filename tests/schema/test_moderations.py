"""The /v1/moderations body rules: every violation is a 400 that names the field."""

from __future__ import annotations

import msgspec
import pytest

from gateway.http.errors import InvalidRequest
from gateway.schema.moderations import parse_moderation


def body(**fields) -> bytes:
    return msgspec.json.encode({k: v for k, v in fields.items() if v is not ...})


def rejects(raw: bytes, param: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        parse_moderation(raw)
    assert info.value.status == 400
    assert info.value.param == param


def test_input_is_required():
    rejects(body(model="text-moderation-latest"), "input")


def test_model_is_optional_and_left_to_the_upstream():
    assert parse_moderation(body(input="hello")).model is None


@pytest.mark.parametrize("model", ["text-moderation-latest", "text-moderation-stable", "omni-moderation-latest",
                                   "omni-moderation-2024-09-26"])
def test_moderation_models_are_accepted(model):
    assert parse_moderation(body(input="hello", model=model)).model == model


@pytest.mark.parametrize("model", ["gpt-4o", "text-embedding-3-small", "omni-moderation-", "text-moderation-001", ""])
def test_other_models_are_refused_naming_model(model):
    rejects(body(input="hello", model=model), "model")


def test_input_may_be_a_list_of_strings():
    assert parse_moderation(body(input=["a", "b"])).input == ["a", "b"]


def test_input_list_must_not_be_empty_or_mixed():
    rejects(body(input=[]), "input")
    rejects(body(input=["a", {"type": "text", "text": "b"}]), "input")
    rejects(body(input=[{"type": "text", "text": "b"}, "a"], model="omni-moderation-latest"), "input")


def test_input_must_be_text():
    rejects(body(input=5), "input")
    rejects(body(input=[1, 2]), "input[0]")


def test_omni_models_take_multimodal_parts():
    parts = [{"type": "text", "text": "hi"}, {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]
    assert parse_moderation(body(input=parts, model="omni-moderation-latest")).input == parts


def test_text_models_refuse_parts():
    rejects(body(input=[{"type": "text", "text": "hi"}], model="text-moderation-latest"), "input")


def test_parts_are_checked():
    omni = "omni-moderation-latest"
    rejects(body(input=[{"type": "video"}], model=omni), "input[0].type")
    rejects(body(input=[{"type": "text"}], model=omni), "input[0].text")
    rejects(body(input=[{"type": "text", "text": "a"}, {"type": "image_url", "image_url": "u"}], model=omni),
            "input[1].image_url")
