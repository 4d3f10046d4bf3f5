"""The lean transport over TLS (``LeanTransport._connect``), with a test CA (PyPI ``trustme``): an upstream whose
certificate the client's context trusts answers over https; one it does not trust, or whose certificate names another
host, is a 502 that says the certificate does not verify; the host name goes out as SNI (an address does not, as RFC
6066 asks); a handshake that never ends is a 504 within the connect timeout, and a plain-HTTP server on an https URL
a 502."""

from __future__ import annotations

import asyncio
import ssl

import pytest
import trustme

from gateway.http.errors import GatewayError
from tests.support.lean import ScriptedConnection, ScriptedUpstream, answer, fetch, lean_transport


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def client_context(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


class TlsUpstream:
    """A server-side TLS context with a certificate from ``ca`` for ``names``; ``server_names`` records the SNI
    each handshake carried (None: none)."""

    def __init__(self, ca: trustme.CA, *names: str) -> None:
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert(*names).configure_cert(self.context)
        self.server_names: list[str | None] = []
        self.context.sni_callback = self._record

    def _record(self, sock: ssl.SSLObject, name: str | None, context: ssl.SSLContext) -> None:
        self.server_names.append(name)


async def serve_json(conn: ScriptedConnection) -> None:
    while await conn.request():
        await conn.send(answer(200, b'{"ok":true}', "content-type: application/json"))


@pytest.fixture
def tls(ca: trustme.CA) -> TlsUpstream:
    return TlsUpstream(ca, "localhost", "127.0.0.1")


async def test_an_upstream_whose_certificate_the_context_trusts_answers_over_https(tls, client_context):
    async with ScriptedUpstream(serve_json, tls.context) as upstream, \
            lean_transport(ssl_context=client_context) as transport:
        for host in ("localhost", "127.0.0.1", "localhost"):
            status, headers, body = await fetch(transport, upstream.url.replace("127.0.0.1", host) + "/v1/chat")
            assert (status, body) == (200, b'{"ok":true}')
    assert upstream.connections == 2  # one per host name, each kept alive
    assert len(upstream.requests) == 3


async def test_the_host_name_goes_out_as_sni_and_an_address_does_not(tls, client_context):
    async with ScriptedUpstream(serve_json, tls.context) as upstream, \
            lean_transport(ssl_context=client_context) as transport:
        await fetch(transport, upstream.url.replace("127.0.0.1", "localhost"))
        await fetch(transport, upstream.url)
    assert tls.server_names == ["localhost", None]


async def test_a_certificate_the_default_context_does_not_trust_is_a_502(tls):
    async with ScriptedUpstream(serve_json, tls.context) as upstream, lean_transport() as transport:
        with pytest.raises(GatewayError) as error:
            await fetch(transport, upstream.url.replace("127.0.0.1", "localhost"))
    assert error.value.status == 502
    assert error.value.message == (f"upstream localhost:{upstream.port} presented a TLS certificate that does not "
                                   "verify")
    assert upstream.requests == []


async def test_a_trusted_certificate_for_another_host_is_a_502(ca, client_context):
    other = TlsUpstream(ca, "other.example")
    async with ScriptedUpstream(serve_json, other.context) as upstream, \
            lean_transport(ssl_context=client_context) as transport:
        with pytest.raises(GatewayError) as error:
            await fetch(transport, upstream.url.replace("127.0.0.1", "localhost"))
    assert error.value.status == 502 and "does not verify" in error.value.message
    assert upstream.requests == []


async def test_a_handshake_that_never_ends_is_a_504_within_the_connect_timeout(client_context):
    async def silent(conn: ScriptedConnection) -> None:
        await asyncio.sleep(10)

    async with ScriptedUpstream(silent) as upstream, \
            lean_transport(ssl_context=client_context, upstream_connect_timeout_ms=300) as transport:
        with pytest.raises(GatewayError) as error:
            await fetch(transport, upstream.url.replace("http://", "https://"))
    assert error.value.status == 504
    assert error.value.message == "timed out connecting to upstream 127.0.0.1"


async def test_a_plain_http_server_on_an_https_url_is_a_502_that_says_tls(client_context):
    async def plain(conn: ScriptedConnection) -> None:
        await conn.send(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")

    async with ScriptedUpstream(plain) as upstream, lean_transport(ssl_context=client_context) as transport:
        with pytest.raises(GatewayError) as error:
            await fetch(transport, upstream.url.replace("http://", "https://"))
    assert error.value.status == 502
    assert "failed the TLS handshake" in error.value.message
