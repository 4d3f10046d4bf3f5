"""SSRF guard: URL rules, refused address classes, allow-list, and pinning resolved addresses (no rebinding)."""

from __future__ import annotations

import ipaddress
import socket
import time

import pytest

from gateway.http.errors import Forbidden, InvalidRequest
from gateway.upstream.ssrf import AllowList, PinnedResolver, check_url, refused_reason
from tests.support.asgi import call, in_process
from tests.support.servers import ADMIN_KEY

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize(
    "url",
    ["ftp://example.com/v1", "file:///etc/passwd", "http://example.com/v1#frag", "http://user:pw@example.com/v1",
     "http:///nohost", "gopher://x"],
)
def test_bad_url_forms_are_refused(url):
    with pytest.raises(InvalidRequest):
        check_url(url)


@pytest.mark.parametrize(
    "address",
    ["10.0.0.1", "172.16.5.4", "192.168.1.1", "127.0.0.1", "169.254.169.254", "100.64.0.1", "0.0.0.0", "224.0.0.1",
     "::1", "fe80::1", "fc00::1", "::ffff:127.0.0.1", "240.0.0.1", "fd00:ec2::254"],
)
def test_non_public_addresses_are_refused(address):
    assert refused_reason(ipaddress.ip_address(address)) is not None


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111"])
def test_public_addresses_pass(address):
    assert refused_reason(ipaddress.ip_address(address)) is None


class ScriptedResolver:
    """Answers a different address on each call: a DNS-rebinding attacker."""

    def __init__(self, answers: list[str]) -> None:
        self.answers = answers
        self.calls = 0

    async def resolve(self, host, port=0, family=socket.AF_INET):
        address = self.answers[min(self.calls, len(self.answers) - 1)]
        self.calls += 1
        return [{"hostname": host, "host": address, "port": port, "family": socket.AF_INET, "proto": 0,
                 "flags": socket.AI_NUMERICHOST}]

    async def close(self):
        return None


async def test_connections_use_the_address_that_was_checked():
    inner = ScriptedResolver(["93.184.216.34", "127.0.0.1"])
    resolver = PinnedResolver(AllowList(()), inner)
    await resolver.check("rebind.example", 443)
    pinned = await resolver.resolve("rebind.example", 443)
    assert pinned[0]["host"] == "93.184.216.34"
    assert inner.calls == 1  # the connector got the checked answer, not a fresh (rebound) one


async def test_a_host_that_rebinds_to_a_private_address_is_refused_on_re_resolution():
    inner = ScriptedResolver(["127.0.0.1"])
    resolver = PinnedResolver(AllowList(()), inner)
    with pytest.raises(Forbidden):
        await resolver.check("rebind.example", 443)


async def test_allow_list_accepts_names_addresses_and_networks():
    resolver = PinnedResolver(AllowList(("localhost", "10.1.0.0/16")), ScriptedResolver(["10.1.2.3"]))
    await resolver.check("internal.example", 80)
    await resolver.check("localhost", 80)
    await resolver.check("10.1.9.9", 80)
    with pytest.raises(Forbidden):
        await resolver.check("10.2.0.1", 80)


@pytest.fixture
async def strict_gateway():
    async with in_process({"GATEWAY_ALLOW_PRIVATE_HOSTS": ""}) as app:
        yield app


@pytest.mark.parametrize(
    "host",
    ["http://10.255.255.1/v1", "http://169.254.169.254/latest", "http://localhost:9/v1", "http://[::1]:9/v1",
     "http://metadata.google.internal/v1", "http://127.0.0.1:9/v1"],
)
@pytest.mark.serial  # a time bound that a busy machine could break
async def test_gateway_refuses_private_custom_hosts_quickly(strict_gateway, host):
    headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "vendorA", "x-gateway-custom-host": host,
               "authorization": "Bearer sk"}
    started = time.monotonic()
    resp = await call(strict_gateway, "POST", "/v1/chat/completions", CHAT, headers)
    assert resp.status == 403, resp.text
    assert "blocked" in resp.json()["error"]["message"]
    assert time.monotonic() - started < 2  # 10.255.255.1 would hang if it were ever connected to


@pytest.mark.parametrize("host", ["ftp://example.com/v1", "http://a:b@example.com/v1", "http://example.com/v1#x"])
async def test_gateway_refuses_bad_custom_host_forms_with_400(strict_gateway, host):
    headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "vendorA", "x-gateway-custom-host": host,
               "authorization": "Bearer sk"}
    resp = await call(strict_gateway, "POST", "/v1/chat/completions", CHAT, headers)
    assert resp.status == 400
    assert resp.json()["error"]["param"] == "custom_host"


class UnresolvableThenPrivate(ScriptedResolver):
    """Fails the gateway's pre-check lookup (so nothing is pinned), then answers a private address at connect."""

    async def resolve(self, host, port=0, family=socket.AF_INET):
        self.calls += 1
        if self.calls == 1:
            raise OSError(socket.EAI_NONAME, "Name or service not known")
        return await super().resolve(host, port, family)


async def test_a_host_blocked_at_connect_time_is_a_403_like_the_pre_check(tmp_path):
    from gateway.app import GatewayApp
    from gateway.runtime import Runtime
    from gateway.settings import load

    runtime = Runtime(load({"GATEWAY_ADMIN_KEY": ADMIN_KEY, "GATEWAY_DATA_DIR": str(tmp_path)}))
    app = GatewayApp(runtime)  # before the start: the app adds its routes' services to the runtime's lifecycle
    await runtime.start()
    try:
        inner = UnresolvableThenPrivate(["10.20.30.40"])
        runtime.client.resolver._inner = inner
        headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "vendorA", "authorization": "Bearer sk",
                   "x-gateway-custom-host": "http://rebinding.example/v1"}
        resp = await call(app, "POST", "/v1/chat/completions", CHAT, headers)
        assert inner.calls >= 2  # the pre-check found nothing to refuse; the connector's lookup was refused
        assert resp.status == 403, resp.body
        assert "blocked" in resp.json()["error"]["message"] and resp.json()["error"]["param"] == "custom_host"
        pre_checked = await call(app, "POST", "/v1/chat/completions", CHAT,
                                 {**headers, "x-gateway-custom-host": "http://10.20.30.40/v1"})
        assert pre_checked.status == 403
    finally:
        await runtime.close()
