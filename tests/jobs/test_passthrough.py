"""Forwarding to providers: cloudB's resource paths and auth, configs that must come down to one target, and
provider errors relayed in the unified format."""

from __future__ import annotations

import io

import msgspec
import pytest
from openai import BadRequestError, InternalServerError, OpenAI

from tests.support.http import request
from tests.support.servers import ADMIN_KEY


def config_client(gateway, config: dict) -> OpenAI:
    return OpenAI(base_url=f"{gateway.url}/v1", api_key="unused", max_retries=0, http_client=gateway.http_client(),
                  default_headers={"x-gateway-api-key": ADMIN_KEY,
                                   "x-gateway-config": msgspec.json.encode(config).decode()})


def test_cloudB_files_go_to_the_resource_with_api_key_and_api_version(gateway, mock):
    base = mock.scenario()
    client = config_client(gateway, {"provider": "cloudB", "api_key": "az-key", "custom_host": base + "/openai",
                                     "api_version": "2024-10-21"})
    created = client.files.create(file=("t.jsonl", io.BytesIO(b"{}\n")), purpose="batch")
    assert created.id.startswith("file-")
    assert created.id in [f.id for f in client.files.list().data]
    sent = mock.calls(base)["requests"]
    assert sent[0]["path"] == "/openai/files" and sent[0]["query"] == "api-version=2024-10-21"
    assert sent[0]["headers"]["api-key"] == "az-key" and "authorization" not in sent[0]["headers"]


def test_cloudB_without_api_version_is_a_400_naming_it(gateway, mock):
    client = config_client(gateway, {"provider": "cloudB", "api_key": "k", "custom_host": mock.url + "/openai"})
    with pytest.raises(BadRequestError) as caught:
        client.batches.list()
    assert caught.value.param == "api_version"


def test_a_config_must_come_down_to_one_target(gateway, mock):
    target = {"provider": "vendorA", "api_key": "k", "custom_host": mock.url + "/v1"}
    fallback = {"strategy": {"mode": "fallback"}, "targets": [target, target]}
    with pytest.raises(BadRequestError) as caught:
        config_client(gateway, fallback).files.list()
    assert caught.value.param == "x-gateway-config"
    single = {"strategy": {"mode": "single"}, "targets": [target]}
    assert config_client(gateway, single).files.list().object == "list"


def test_provider_errors_keep_their_status_and_name_the_provider(gateway, gw_headers, mock):
    base = mock.scenario([{"status": 500, "message": "files are down"}])
    resp = request("GET", f"{gateway.url}/v1/files", headers=gw_headers(base + "/v1"))
    assert resp.status == 500
    body = resp.json()
    assert body["error"]["message"] == "files are down" and body["provider"] == "vendorA"
    assert resp.headers["x-gateway-provider"] == "vendorA" and resp.headers["x-gateway-trace-id"]


def test_a_malformed_provider_answer_is_a_502(gateway, gw_headers, mock):
    base = mock.scenario([{"html": True}])
    client = OpenAI(base_url=f"{gateway.url}/v1", api_key="sk", max_retries=0,
                    default_headers={k: v for k, v in gw_headers(base + "/v1").items() if k != "authorization"},
                    http_client=gateway.http_client())
    with pytest.raises(InternalServerError) as caught:
        client.batches.list()
    assert caught.value.status_code == 502


def test_ids_that_cannot_be_a_provider_id_are_404s(gateway, gw_headers, mock):
    base = mock.scenario()
    resp = request("GET", f"{gateway.url}/v1/batches/batch%3Fx%3D1", headers=gw_headers(base + "/v1"))
    assert resp.status == 404 and resp.json()["error"]["param"] == "batch_id"
    assert mock.calls(base)["calls"] == 0
