"""cloudB adapter: URLs and auth for resource deployments and AI endpoints, deployment choice, stream relay."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from gateway.http.context import RequestContext
from gateway.http.errors import GatewayError, InvalidRequest
from gateway.providers.base import CHAT, COMPLETIONS, EMBEDDINGS, UpstreamCall
from gateway.providers.cloudB import CloudBAdapter, CloudBStream
from gateway.schema.config import Config, Deployment

enc = msgspec.json.encode
dec = msgspec.json.decode


def call_for(target: Config, endpoint: str = CHAT, model: str = "gpt-4o", ctx: RequestContext | None = None
             ) -> UpstreamCall:
    body = enc({"model": model, "messages": [{"role": "user", "content": "hi"}]})
    call = UpstreamCall(endpoint, target, body, None, False, ctx or RequestContext(), "cloudB")
    call.model = model
    return call


def build(call: UpstreamCall):
    return asyncio.run(CloudBAdapter().build_request(call))


RESOURCE = Config(provider="cloudB", api_key="azkey", resource_name="my-res", deployment_id="gpt4o-prod",
                  api_version="2024-10-21")


@pytest.mark.parametrize(("endpoint", "path"), [(CHAT, "chat/completions"), (COMPLETIONS, "completions"),
                                                (EMBEDDINGS, "embeddings")])
def test_resource_deployment_urls_and_api_key_header(endpoint, path):
    req = build(call_for(RESOURCE, endpoint))
    assert req.url == f"https://my-res.openai.azure.com/openai/deployments/gpt4o-prod/{path}?api-version=2024-10-21"
    assert req.headers["api-key"] == "azkey"
    assert "authorization" not in req.headers
    assert req.body == call_for(RESOURCE).body  # vendorA bytes forwarded unchanged


def test_custom_host_replaces_the_base():
    target = msgspec.structs.replace(RESOURCE, resource_name=None, custom_host="http://127.0.0.1:9/s/a/openai/")
    assert build(call_for(target)).url == (
        "http://127.0.0.1:9/s/a/openai/deployments/gpt4o-prod/chat/completions?api-version=2024-10-21")


def test_api_version_falls_back_to_cloudB_api_version():
    target = msgspec.structs.replace(RESOURCE, api_version=None, cloudB_api_version="2024-06-01")
    assert build(call_for(target)).url.endswith("?api-version=2024-06-01")


DEPLOYMENTS = [Deployment("dep-mini", "gpt-4o-mini", "2024-06-01"),
               Deployment("dep-big", "gpt-4o", "2024-10-21", is_default=True)]


@pytest.mark.parametrize(("model", "expected"), [
    ("gpt-4o-mini", "/deployments/dep-mini/chat/completions?api-version=2024-06-01"),
    ("gpt-4o", "/deployments/dep-big/chat/completions?api-version=2024-10-21"),
    ("unknown-model", "/deployments/dep-big/chat/completions?api-version=2024-10-21"),
])
def test_deployments_are_chosen_by_alias_else_the_default(model, expected):
    target = Config(provider="cloudB", api_key="k", resource_name="r", deployments=DEPLOYMENTS)
    assert build(call_for(target, model=model)).url == "https://r.openai.azure.com/openai" + expected


def test_no_matching_alias_and_no_default_is_a_400_naming_deployments():
    target = Config(provider="cloudB", api_key="k", resource_name="r",
                    deployments=[Deployment("d", "other", "2024-06-01")])
    with pytest.raises(InvalidRequest) as info:
        build(call_for(target))
    assert info.value.param == "deployments"


@pytest.mark.parametrize(("target", "param"), [
    (Config(provider="cloudB", api_key="k", deployment_id="d", api_version="v"), "resource_name"),
    (Config(provider="cloudB", api_key="k", resource_name="r", api_version="v"), "deployment_id"),
    (Config(provider="cloudB", api_key="k", resource_name="r", deployment_id="d"), "api_version"),
    (Config(provider="cloudB", api_key="k", resource_name="r", deployment_id="../x", api_version="v"),
     "deployment_id"),
    (Config(provider="cloudB", api_key="k", resource_name="r", deployment_id="d", api_version="v&x=1"),
     "api_version"),
    (Config(provider="cloudB", api_key="k", cloudB_deployment_type="serverless", cloudB_region="eastus"),
     "cloudB_deployment_name"),
    (Config(provider="cloudB", api_key="k", cloudB_deployment_type="managed", cloudB_region="eastus"),
     "cloudB_endpoint_name"),
    (Config(provider="cloudB", api_key="k", cloudB_endpoint_name="ep", cloudB_deployment_type="managed"),
     "cloudB_region"),
])
def test_missing_or_unsafe_pieces_are_400s_naming_the_field(target, param):
    with pytest.raises(InvalidRequest) as info:
        build(call_for(target))
    assert info.value.param == param


def test_serverless_endpoint_url_and_bearer_auth():
    target = Config(provider="cloudB", api_key="ep-key", cloudB_deployment_name="Mistral-Large-xyz",
                    cloudB_deployment_type="serverless", cloudB_region="eastus2",
                    cloudB_api_version="2024-05-01-preview")
    req = build(call_for(target))
    assert req.url == ("https://mistral-large-xyz.eastus2.models.ai.azure.com/v1/chat/completions"
                       "?api-version=2024-05-01-preview")
    assert req.headers["authorization"] == "Bearer ep-key"
    assert "api-key" not in req.headers and "azureml-model-deployment" not in req.headers
    embed = build(call_for(msgspec.structs.replace(target, cloudB_api_version=None), EMBEDDINGS))
    assert embed.url == "https://mistral-large-xyz.eastus2.models.ai.azure.com/v1/embeddings"


def test_managed_endpoint_url_deployment_header_and_custom_host():
    target = Config(provider="cloudB", api_key="ml-key", cloudB_endpoint_name="qwen-ep", cloudB_region="westeurope",
                    cloudB_deployment_type="managed", cloudB_deployment_name="blue")
    req = build(call_for(target))
    assert req.url == "https://qwen-ep.westeurope.inference.ml.azure.com/v1/chat/completions"
    assert req.headers["authorization"] == "Bearer ml-key"
    assert req.headers["azureml-model-deployment"] == "blue"
    hosted = msgspec.structs.replace(target, custom_host="http://127.0.0.1:9/s/b", cloudB_region=None)
    assert build(call_for(hosted, COMPLETIONS)).url == "http://127.0.0.1:9/s/b/v1/completions"


def test_endpoint_name_without_type_or_resource_is_a_managed_endpoint():
    target = Config(provider="cloudB", api_key="k", cloudB_endpoint_name="ep", cloudB_region="eastus")
    assert build(call_for(target)).url == "https://ep.eastus.inference.ml.azure.com/v1/chat/completions"


def test_model_name_header_names_the_model_when_the_answer_does_not():
    ctx = RequestContext()
    ctx.cloudB_model_name = "gpt-4o-2024-08-06"
    adapter = CloudBAdapter()
    result = adapter.parse_response(call_for(RESOURCE, ctx=ctx), 200, None, b'{"choices": []}')
    assert result.model == "gpt-4o-2024-08-06"
    answered = adapter.parse_response(call_for(RESOURCE, ctx=ctx), 200, None, b'{"model": "gpt-4o", "choices": []}')
    assert answered.model == "gpt-4o"


def test_error_body_is_relayed_with_status_and_message():
    error = CloudBAdapter().parse_error(call_for(RESOURCE), 404, None,
                                        b'{"error": {"code": "DeploymentNotFound", "message": "The API deployment '
                                        b'for this resource does not exist."}}')
    assert error.status == 404 and error.code == "DeploymentNotFound"
    assert error.message.startswith("The API deployment")
    assert dec(error.body())["provider"] == "cloudB"


FILTER = (b'data: {"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":'
          b'[{"prompt_index":0,"content_filter_results":{}}]}\n\n')
CONTENT = b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n'


def test_stream_holds_the_prompt_filter_chunk_until_real_content():
    stream = CloudBStream("cloudB")
    assert stream.feed(FILTER) == []
    events = stream.feed(CONTENT + b"data: [DONE]\n\n")
    assert len(events) == 2 and b"prompt_filter_results" in events[0] and b'"Hi"' in events[1]
    assert stream.close() == []


def test_stream_error_after_prompt_filter_chunk_is_still_the_first_event():
    stream = CloudBStream("cloudB")
    stream.feed(FILTER)
    with pytest.raises(GatewayError) as info:
        stream.feed(b'data: {"error": {"code": 429, "message": "Rate limit"}}\n\n')
    assert (info.value.status, info.value.message) == (429, "Rate limit")


def test_filter_chunks_get_the_streams_identity():
    stream = CloudBStream("cloudB")
    real = (b'data: {"id":"c1","object":"chat.completion.chunk","created":7,"model":"gpt-4o","system_fingerprint":'
            b'"fp_1","choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n')
    annotation = (b'data: {"choices":[{"index":0,"finish_reason":null,"content_filter_offsets":{"check_offset":0}}],'
                  b'"created":0,"id":"","model":"","object":""}\n\n')
    events = stream.feed(FILTER) + stream.feed(real) + stream.feed(annotation + b"data: [DONE]\n\n")
    docs = [dec(e[6:]) for e in events + stream.close()]
    assert [d["id"] for d in docs] == ["c1", "c1", "c1"]
    assert {d["object"] for d in docs} == {"chat.completion.chunk"}
    assert {(d["created"], d["model"], d["system_fingerprint"]) for d in docs} == {(7, "gpt-4o", "fp_1")}
    assert docs[0]["choices"] == [] and docs[0]["prompt_filter_results"][0]["prompt_index"] == 0
    assert docs[2]["choices"][0]["delta"] == {} and docs[2]["choices"][0]["content_filter_offsets"]


def test_filter_chunks_alone_still_get_the_chunk_object():
    stream = CloudBStream("cloudB")
    events = stream.feed(FILTER + b"data: [DONE]\n\n") + stream.close()
    [doc] = [dec(e[6:]) for e in events]
    assert doc["object"] == "chat.completion.chunk" and doc["choices"] == []
