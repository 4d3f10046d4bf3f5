"""The cloudC mock answers JSON mode with JSON from the schema, and refuses a responseSchema that is not a Schema."""

from __future__ import annotations

import msgspec
import pytest

from gateway_mock.cloudC import TEST_TOKEN
from tests.support.http import post

PATH = "/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.0-flash:generateContent"
HEADERS = {"authorization": f"Bearer {TEST_TOKEN}", "content-type": "application/json"}
CONTENTS = [{"role": "user", "parts": [{"text": "hi"}]}]


def generate(mock, config: dict):
    return post(mock.scenario() + PATH, {"contents": CONTENTS, "generationConfig": config}, HEADERS)


def text_of(resp) -> str:
    return resp.json()["candidates"][0]["content"]["parts"][0]["text"]


def test_json_mode_answers_json_from_the_schema(mock):
    schema = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}
    resp = generate(mock, {"responseMimeType": "application/json", "responseSchema": schema})
    assert resp.status == 200 and msgspec.json.decode(text_of(resp)) == {"city": "Paris", "days": 1}
    plain = generate(mock, {"responseMimeType": "application/json"})
    assert msgspec.json.decode(text_of(plain)) == {"answer": "Paris"}


@pytest.mark.parametrize(("config", "text"), [
    ({"responseMimeType": "application/json", "responseSchema": {"type": "object", "$defs": {}}},
     'Unknown name "$defs"'),
    ({"responseMimeType": "application/json",
      "responseSchema": {"type": "object", "properties": {"a": {"type": "object", "additionalProperties": False}}}},
     'Unknown name "additionalProperties"'),
    ({"responseSchema": {"type": "object"}}, "response_mime_type must be application/json"),
    ({"responseMimeType": "application/json", "responseSchema": {"type": "object"},
      "responseJsonSchema": {"type": "object"}}, "may not both be set"),
])
def test_what_the_service_refuses_is_a_400(mock, config, text):
    resp = generate(mock, config)
    assert resp.status == 400 and text in resp.json()["error"]["message"]
    assert resp.json()["error"]["status"] == "INVALID_ARGUMENT"
