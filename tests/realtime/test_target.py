"""The provider URL and credential headers of a Realtime session, per provider and config form."""

from __future__ import annotations

import pytest

from gateway.http.errors import InvalidRequest
from gateway.realtime.target import realtime_target
from gateway.schema.config import Config, Deployment


def test_vendorA_goes_to_its_realtime_path_with_the_bearer_and_its_org_headers():
    target = realtime_target(Config(provider="vendorA", api_key="sk-up", vendorA_organization="org-1"),
                             "gpt-realtime", beta="realtime=v1")
    assert target.url == "https://api.openai.com/v1/realtime?model=gpt-realtime"
    assert target.headers == {"authorization": "Bearer sk-up", "openai-organization": "org-1",
                              "openai-beta": "realtime=v1"}
    assert (target.provider, target.model) == ("vendorA", "gpt-realtime")
    assert "sk-up" not in repr(target)


def test_a_custom_host_replaces_the_base_and_the_model_is_quoted():
    target = realtime_target(Config(provider="vendorA", api_key="k", custom_host="http://127.0.0.1:9/v1/"), "a b&c")
    assert target.url == "http://127.0.0.1:9/v1/realtime?model=a%20b%26c"


@pytest.mark.parametrize(("config", "model", "client_version", "url"), [
    (Config(provider="cloudB", api_key="k", resource_name="res", api_version="2025-04-01-preview"), "dep", None,
     "https://res.openai.azure.com/openai/realtime?api-version=2025-04-01-preview&deployment=dep"),
    (Config(provider="cloudB", api_key="k", resource_name="res"), "dep", "2025-08-28",
     "https://res.openai.azure.com/openai/realtime?api-version=2025-08-28&deployment=dep"),
    (Config(provider="cloudB", api_key="k", resource_name="res"), "dep", None,
     "https://res.openai.azure.com/openai/v1/realtime?model=dep"),
    (Config(provider="cloudB", api_key="k", custom_host="http://h/openai", api_version="v1"), "dep", None,
     "http://h/openai/v1/realtime?model=dep"),
    (Config(provider="cloudB", api_key="k", resource_name="res", deployment_id="fixed", api_version="2025-04-01"),
     "asked", None, "https://res.openai.azure.com/openai/realtime?api-version=2025-04-01&deployment=fixed"),
    (Config(provider="cloudB", api_key="k", resource_name="res", deployments=[
        Deployment(deployment_id="d-one", alias="one", api_version="2025-01-01"),
        Deployment(deployment_id="d-two", alias="two", api_version="2025-02-02", is_default=True)]),
     "one", None, "https://res.openai.azure.com/openai/realtime?api-version=2025-01-01&deployment=d-one"),
])
def test_cloudB_takes_the_dated_form_with_an_api_version_and_the_ga_form_without(config, model, client_version, url):
    target = realtime_target(config, model, client_version)
    assert target.url == url
    assert target.headers == {"api-key": "k"}


@pytest.mark.parametrize(("config", "model", "param"), [
    (Config(provider="anthropic", api_key="k"), "m", "provider"),
    (Config(provider="vendorA", api_key="k"), None, "model"),
    (Config(provider="vendorA", api_key="k"), "m" * 257, "model"),
    (Config(provider="cloudB", api_key="k", resource_name="res"), None, "model"),
    (Config(provider="cloudB", api_key="k", resource_name="res"), "bad/dep", "model"),
    (Config(provider="cloudB", api_key="k"), "dep", "resource_name"),
    (Config(provider="cloudB", api_key="k", cloudB_deployment_type="serverless"), "dep", "cloudB_deployment_type"),
])
def test_what_cannot_be_a_session_is_a_400_naming_the_field(config, model, param):
    with pytest.raises(InvalidRequest) as refused:
        realtime_target(config, model)
    assert refused.value.param == param and refused.value.message
