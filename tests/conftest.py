"""Shared fixtures: one mock upstream per test session on a free loopback port, one gateway served in the test
process (``gateway``: no socket, no subprocess) and, for the tests where serving itself is under test (the process's
output, its port, signals, workers, a browser), one gateway served by Granian in a subprocess (``served_gateway``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.controlplane import clear_redis_prefix
from tests.support.headers import headers_for
from tests.support.inprocess import InProcessGateway, start_in_process
from tests.support.redis_servers import random_prefix, test_redis_url
from tests.support.servers import ADMIN_KEY, Mock, Server, start_gateway, start_mock


@pytest.fixture(scope="session")
def mock_server():
    server = start_mock()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def mock(mock_server) -> Mock:
    return Mock(mock_server)


@pytest.fixture(scope="session")
def gateway(mock_server) -> Iterator[InProcessGateway]:
    """The gateway app in this process, with ``start_gateway``'s settings; its ``url`` reaches it through the test
    helpers (``tests/support/http.py``, ``sse.py``) and an SDK through ``http_client=gateway.http_client()``."""
    server = start_in_process()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def served_gateway(mock_server) -> Iterator[Server]:
    """The gateway as ``gateway serve`` runs it (Granian, a subprocess on a loopback port): for a test that reads
    its output, talks to its port, signals it or points a browser at it."""
    server = start_gateway()
    yield server
    server.stop()


@pytest.fixture
def gw_headers():
    """Headers for provider-name + bearer identification through a custom host."""

    return headers_for


@pytest.fixture
def openai_client(gateway, mock):
    """An official openai SDK client pointed at the gateway, routed to the mock as vendorA."""
    from openai import OpenAI

    def make(custom_host: str | None = None, provider: str = "vendorA", **headers: str) -> OpenAI:
        default_headers = {
            "x-gateway-api-key": ADMIN_KEY,
            "x-gateway-provider": provider,
            "x-gateway-custom-host": custom_host or f"{mock.url}/v1",
        }
        default_headers.update(headers)
        return OpenAI(base_url=f"{gateway.url}/v1", api_key="sk-provider-token", default_headers=default_headers,
                      max_retries=0, timeout=60, http_client=gateway.http_client())

    return make


@pytest.fixture
def shared_redis():
    """Settings for gateways that share the test Redis under a key prefix of their own (deleted afterwards) and one
    secret key (so each opens the provider slugs the other sealed)."""
    url, prefix = test_redis_url(), random_prefix()
    yield {"GATEWAY_REDIS_URL": url, "GATEWAY_REDIS_KEY_PREFIX": prefix, "GATEWAY_SECRET_KEY": f"secret-{prefix}"}
    clear_redis_prefix(url, prefix)
