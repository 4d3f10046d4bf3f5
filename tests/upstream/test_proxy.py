"""Outbound proxies through the real gateway: HTTP_PROXY / HTTPS_PROXY carry upstream calls, NO_PROXY exempts
hosts, and the SSRF pre-check still refuses what it refuses without a proxy. A real forwarding proxy runs on
loopback (tests/support/proxy.py)."""

from __future__ import annotations

import base64
import datetime
import ipaddress
import ssl

import pytest

from gateway.upstream.proxy import ProxyRoutes
from tests.support.headers import headers_for
from tests.support.http import post, stream_events
from tests.support.inprocess import start_in_process
from tests.support.proxy import ForwardProxy
from tests.support.servers import free_port, start_gateway

CHAT = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture(scope="module")
def proxy():
    server = ForwardProxy().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def proxied_gateway(proxy, mock_server):
    server = start_in_process({"HTTP_PROXY": proxy.url.replace("http://", "http://alice:s3cret@"),
                            "NO_PROXY": "localhost,.example.test"})
    yield server
    server.stop()


def test_upstream_calls_go_through_the_http_proxy(proxied_gateway, proxy, mock):
    base = mock.scenario([{}, {}])
    before = len(proxy.seen)
    resp = post(f"{proxied_gateway.url}/v1/chat/completions", CHAT, headers_for(base + "/v1"))
    assert resp.status == 200, resp.text
    status, _, events = stream_events(f"{proxied_gateway.url}/v1/chat/completions", {**CHAT, "stream": True},
                                      headers_for(base + "/v1"))
    assert status == 200 and list(events)[-1] == b"[DONE]"
    seen = proxy.seen[before:]
    assert [(m, t) for m, t, _ in seen] == [("POST", base + "/v1/chat/completions")] * 2
    assert {auth for _, _, auth in seen} == {"Basic " + base64.b64encode(b"alice:s3cret").decode()}
    assert mock.calls(base)["calls"] == 2
    assert "proxy-authorization" not in mock.calls(base)["requests"][0]["headers"]


def test_no_proxy_hosts_are_called_directly(proxied_gateway, proxy, mock):
    base = mock.scenario()
    direct = base.replace("127.0.0.1", "localhost")
    before = len(proxy.seen)
    assert post(f"{proxied_gateway.url}/v1/chat/completions", CHAT, headers_for(direct + "/v1")).status == 200
    assert proxy.seen[before:] == []
    assert mock.calls(base)["calls"] == 1


def test_the_ssrf_pre_check_still_refuses_through_a_proxy(proxied_gateway, proxy):
    before = len(proxy.seen)
    for host in ("http://10.20.30.40/v1", "http://169.254.169.254/latest", "http://metadata.google.internal/v1"):
        resp = post(f"{proxied_gateway.url}/v1/chat/completions", CHAT, headers_for(host))
        assert resp.status == 403, resp.text
    assert proxy.seen[before:] == []


def test_a_dead_proxy_is_a_502_that_names_it(mock_server, mock):
    port = free_port()
    server = start_in_process({"http_proxy": f"127.0.0.1:{port}"})  # lower-case spelling, no scheme
    try:
        resp = post(f"{server.url}/v1/chat/completions", CHAT, headers_for(mock.scenario() + "/v1"))
        assert resp.status == 502
        assert f"through proxy 127.0.0.1:{port}" in resp.json()["error"]["message"]
    finally:
        server.stop()


def _self_signed(tmp_path):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


async def _tls_upstream(cert_path, key_path):
    """A minimal vendorA chat upstream over TLS on loopback."""
    from aiohttp import web

    async def chat(request: web.Request) -> web.Response:
        doc = await request.json()
        return web.json_response({
            "id": "chatcmpl-tls", "object": "chat.completion", "created": 1, "model": doc["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "over tls"},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app)
    await runner.setup()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_path, key_path)
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]


def test_https_upstreams_are_tunnelled_with_connect(proxy, mock_server, tmp_path):
    cert_path, key_path = _self_signed(tmp_path)
    runner, port = proxy.run(_tls_upstream(cert_path, key_path))
    server = start_gateway({"HTTPS_PROXY": proxy.url, "SSL_CERT_FILE": str(cert_path)})
    try:
        before = len(proxy.seen)
        resp = post(f"{server.url}/v1/chat/completions", CHAT, headers_for(f"https://127.0.0.1:{port}/v1"))
        assert resp.status == 200, resp.text
        assert resp.json()["choices"][0]["message"]["content"] == "over tls"
        assert [(m, t) for m, t, _ in proxy.seen[before:]] == [("CONNECT", f"127.0.0.1:{port}")]
    finally:
        server.stop()
        proxy.run(runner.cleanup())


@pytest.mark.parametrize("no_proxy, host, port, proxied", [
    ((), "api.example.com", 443, True),
    (("*",), "api.example.com", 443, False),
    (("example.com",), "api.example.com", 443, False),
    ((".example.com",), "example.com", 443, False),
    (("*.example.com",), "api.example.com", 443, False),
    (("example.com",), "badexample.com", 443, True),
    (("example.com:8443",), "api.example.com", 443, True),
    (("example.com:8443",), "api.example.com", 8443, False),
    (("10.0.0.0/8",), "10.1.2.3", 443, False),
    (("10.0.0.0/8",), "11.1.2.3", 443, True),
    (("::1",), "::1", 443, False),
    (("[::1]:8080",), "::1", 8080, False),
    (("API.Example.COM",), "api.example.com", 443, False),
])
def test_no_proxy_matching(no_proxy, host, port, proxied):
    routes = ProxyRoutes("http://proxy.local:3128", "http://proxy.local:3128", no_proxy)
    assert (routes.for_url("https", host, port) is not None) == proxied


def test_proxy_urls_and_their_credentials():
    routes = ProxyRoutes("proxy.local:3128", "https://bob:pw@secure-proxy.local", ())
    assert str(routes.for_url("http", "h", 80).url) == "http://proxy.local:3128"
    secure = routes.for_url("https", "h", 443)
    assert str(secure.url) == "https://secure-proxy.local" and secure.auth.login == "bob"
    assert routes.endpoints() == {"proxy.local", "secure-proxy.local"}
    with pytest.raises(ValueError, match="HTTP_PROXY"):
        ProxyRoutes("socks5://proxy.local:1080", None, ())


def test_the_settings_read_the_standard_names():
    from gateway.settings import load

    settings = load({"HTTPS_PROXY": "http://p:1", "http_proxy": "http://q:2", "NO_PROXY": "a, .b ,c:1"})
    assert (settings.https_proxy, settings.http_proxy, settings.no_proxy) == ("http://p:1", "http://q:2",
                                                                            ("a", ".b", "c:1"))
    assert load({"HTTP_PROXY": "http://upper:1", "http_proxy": "http://lower:2"}).http_proxy == "http://upper:1"
