"""What the Responses WebSocket mode changes in the session machinery: its provider URLs and headers, the events its
usage is read from (and their details), and its error event."""

from __future__ import annotations

import json

import msgspec
import pytest

from gateway.http.errors import InvalidRequest
from gateway.realtime.dialect import REALTIME, RESPONSES
from gateway.realtime.target import responses_target
from gateway.realtime.usage import SessionUsage
from gateway.schema.config import Config


def test_vendorA_goes_to_its_responses_path_with_the_bearer_and_its_org_headers():
    target = responses_target(Config(provider="vendorA", api_key="sk-up", vendorA_project="p-1"), None)
    assert target.url == "https://api.openai.com/v1/responses"
    assert target.headers == {"authorization": "Bearer sk-up", "openai-project": "p-1"}
    assert (target.provider, target.model, target.api) == ("vendorA", "", "Responses")
    custom = responses_target(Config(provider="vendorA", api_key="k", custom_host="http://127.0.0.1:9/v1/"), "m")
    assert (custom.url, custom.model) == ("http://127.0.0.1:9/v1/responses", "m")


def test_cloudB_goes_to_its_v1_responses_path_with_the_api_key():
    target = responses_target(Config(provider="cloudB", api_key="az", resource_name="res"), "dep")
    assert target.url == "https://res.openai.azure.com/openai/v1/responses"
    assert target.headers == {"api-key": "az"}


def test_any_other_provider_is_a_translated_target_with_no_url_and_no_credential():
    target = responses_target(Config(provider="anthropic", api_key="sk-ant", custom_host="http://127.0.0.1:9"), "m")
    assert target.translated and (target.url, target.headers) == ("", {})
    assert (target.provider, target.model, target.api) == ("anthropic", "m", "Responses")
    assert not responses_target(Config(provider="vendorA", api_key="k"), None).translated


@pytest.mark.parametrize(("config", "param", "words"), [
    (Config(provider="cloudB", api_key="k", cloudB_deployment_type="serverless"), "cloudB_deployment_type",
     "resource deployments"),
    (Config(provider="cloudB", api_key="k"), "resource_name", "resource_name"),
])
def test_what_cannot_be_forwarded_is_a_400_naming_the_field(config, param, words):
    with pytest.raises(InvalidRequest) as refused:
        responses_target(config, "m")
    assert refused.value.param == param and words in refused.value.message


def _completed(kind: str, usage: dict | None, model: str = "gpt-4o-mini") -> str:
    return json.dumps({"type": kind, "sequence_number": 9, "response": {"id": "resp_1", "model": model,
                                                                         "usage": usage}})


USAGE = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 4}, "output_tokens": 5,
         "output_tokens_details": {"reasoning_tokens": 2}, "total_tokens": 15}


def test_completed_and_incomplete_responses_are_summed_in_the_responses_shape():
    usage = SessionUsage(RESPONSES.usage_ends)
    assert not usage.read(json.dumps({"type": "response.output_text.delta", "delta": "response.completed"}))
    assert usage.read(_completed("response.completed", USAGE))
    assert usage.read(_completed("response.incomplete", USAGE, "gpt-5").encode())
    assert not usage.read(_completed("response.completed", None))
    assert usage.responses == 3 and usage.model == "gpt-4o-mini"  # the last response that named one
    assert usage.as_record_usage() == {"input_tokens": 20, "output_tokens": 10, "total_tokens": 30,
                                       "input_tokens_details": {"cached_tokens": 8},
                                       "output_tokens_details": {"reasoning_tokens": 4}}


def test_each_dialect_reads_only_its_own_ending_event():
    assert not SessionUsage(REALTIME.usage_ends).read(_completed("response.completed", USAGE))
    realtime_done = json.dumps({"type": "response.done", "response": {"usage": {"total_tokens": 3}}})
    assert not SessionUsage(RESPONSES.usage_ends).read(realtime_done)


def test_the_budget_error_event_has_the_modes_shape():
    event = msgspec.json.decode(RESPONSES.error_event("spent"))
    assert event == {"type": "error", "status": 429, "error": {"type": "usage_limit_exceeded",
                                                               "code": "usage_limit_exceeded", "message": "spent",
                                                               "param": None}}
    assert msgspec.json.decode(REALTIME.error_event("spent"))["event_id"] == "event_gateway_usage_limit"
