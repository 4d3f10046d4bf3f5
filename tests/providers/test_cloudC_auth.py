"""cloudC service-account tokens: the signed assertion, one exchange per account under concurrency, caching,
refusals and the SSRF check on token_uri (against the mock's verifying token endpoint)."""

from __future__ import annotations

import asyncio
import base64
import time
import uuid

import msgspec
import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from gateway.http.errors import Forbidden, GatewayError, InvalidRequest
from gateway.providers.cloudC import auth
from gateway.providers.cloudC.auth import ServiceAccount, TokenCache
from gateway.settings import Settings
from gateway.upstream.client import UpstreamClient
from tests.support.http import request

_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
_OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
LOCAL = Settings(allow_private_hosts=("127.0.0.1", "localhost"))


@pytest.fixture
async def local_client():
    """An upstream client (as a runtime has) that may reach the mock on loopback."""
    client = UpstreamClient(LOCAL)
    await client.start()
    yield client
    await client.close()


@pytest.fixture
async def strict_client():
    """An upstream client with no private hosts allowed."""
    client = UpstreamClient(Settings())
    await client.start()
    yield client
    await client.close()


def pem(key: rsa.RSAPrivateKey) -> str:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def public_pem(key: rsa.RSAPrivateKey) -> str:
    return key.public_key().public_bytes(serialization.Encoding.PEM,
                                         serialization.PublicFormat.SubjectPublicKeyInfo).decode()


def service_account(mock, token_uri: str, register_key: rsa.RSAPrivateKey | None = None) -> dict:
    """A test service account's JSON key (fresh email) whose public key the mock's token endpoint knows."""
    email = f"sa-{uuid.uuid4().hex[:12]}@test-project.iam.gserviceaccount.com"
    resp = request("POST", f"{mock.url}/cloudC/service-accounts", {
        "client_email": email, "public_key": public_pem(register_key or _KEY), "token_uri": token_uri})
    assert resp.status == 200, resp.text
    return {"type": "service_account", "project_id": "test-project", "private_key_id": "kid-test-1",
            "private_key": pem(_KEY), "client_email": email, "client_id": "1", "token_uri": token_uri}


def issued(mock, info: dict) -> int:
    return request("GET", f"{mock.url}/cloudC/service-accounts/{info['client_email']}").json()["issued"]


def unb64(segment: str) -> bytes:
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


def test_assertion_is_an_rs256_jwt_with_the_documented_claims():
    info = {"client_email": "a@p.iam.gserviceaccount.com", "private_key": pem(_KEY), "private_key_id": "k1",
            "token_uri": "https://oauth2.example.com/token"}
    head, claims, signature = ServiceAccount(info).assertion(now=1_700_000_000).split(".")
    assert msgspec.json.decode(unb64(head)) == {"alg": "RS256", "typ": "JWT", "kid": "k1"}
    assert msgspec.json.decode(unb64(claims)) == {
        "iss": "a@p.iam.gserviceaccount.com", "scope": "https://www.googleapis.com/auth/cloud-platform",
        "aud": "https://oauth2.example.com/token", "iat": 1_700_000_000, "exp": 1_700_003_600}
    _KEY.public_key().verify(unb64(signature), f"{head}.{claims}".encode(), padding.PKCS1v15(), hashes.SHA256())


@pytest.mark.parametrize(("change", "param"), [
    ({"private_key": "-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n"},
     "cloudC_service_account_json.private_key"),
    ({"client_email": ""}, "cloudC_service_account_json.client_email"),
    ({"token_uri": None}, "cloudC_service_account_json.token_uri"),
    ({"token_uri": "ftp://oauth2.example.com/token"}, "cloudC_service_account_json.token_uri"),
])
def test_bad_service_account_fields_are_400s_naming_the_field(change, param):
    info = {"client_email": "a@p", "private_key": pem(_KEY), "token_uri": "https://oauth2.example.com/token",
            **change}
    with pytest.raises(InvalidRequest) as caught:
        ServiceAccount(info)
    assert caught.value.param == param


async def test_twenty_concurrent_requests_cause_one_exchange(mock, local_client):
    info = service_account(mock, mock.scenario() + "/token")
    cache = TokenCache(local_client)
    tokens = await asyncio.gather(*(cache.token(info) for _ in range(20)))
    assert len(set(tokens)) == 1 and tokens[0].startswith("ya29.")
    assert cache.exchanges == 1
    assert issued(mock, info) == 1
    assert await cache.token(dict(info)) == tokens[0]  # an equal key object hits the same cache entry
    assert issued(mock, info) == 1


class ShiftedClock:
    """time.monotonic moved forward by ``offset``; wall time stays real (the token endpoint checks iat/exp)."""

    def __init__(self, offset: float) -> None:
        self.offset = offset

    def monotonic(self) -> float:
        return time.monotonic() + self.offset

    @staticmethod
    def time() -> float:
        return time.time()


async def test_token_is_reused_until_five_minutes_before_expiry(mock, monkeypatch, local_client):
    info = service_account(mock, mock.scenario() + "/token")
    cache = TokenCache(local_client)
    first = await cache.token(info)
    monkeypatch.setattr(auth, "time", ShiftedClock(3599 - 300 - 5))
    assert await cache.token(info) == first
    monkeypatch.setattr(auth, "time", ShiftedClock(3599 - 300 + 5))
    second = await cache.token(info)
    assert second != first
    assert issued(mock, info) == 2


async def test_a_refused_assertion_is_a_401_naming_cloudC_and_the_token_uri_shared_by_waiters(mock, local_client):
    token_uri = mock.scenario() + "/token"
    info = service_account(mock, token_uri, register_key=_OTHER_KEY)  # the mock verifies against another key
    cache = TokenCache(local_client)
    results = await asyncio.gather(*(cache.token(info) for _ in range(5)), return_exceptions=True)
    assert all(isinstance(r, GatewayError) for r in results)
    error = results[0]
    assert error.status == 401
    assert "cloudC" in error.message and token_uri in error.message and "Invalid JWT Signature" in error.message
    assert cache.exchanges == 1
    assert issued(mock, info) == 0


async def test_token_endpoint_server_error_is_a_502(mock, local_client):
    token_uri = mock.scenario([{"status": 503, "message": "backend down"}, {}]) + "/token"
    info = service_account(mock, token_uri)
    cache = TokenCache(local_client)
    with pytest.raises(GatewayError) as caught:
        await cache.token(info)
    assert caught.value.status == 502
    assert "cloudC" in caught.value.message and token_uri in caught.value.message
    assert await cache.token(info)  # the next request tries again (step 2 of the scenario answers)


async def test_unreachable_token_endpoint_is_a_502(local_client):
    info = {"client_email": "a@p", "private_key": pem(_KEY), "token_uri": "http://127.0.0.1:9/token"}
    cache = TokenCache(local_client)
    with pytest.raises(GatewayError) as caught:
        await cache.token(info)
    assert caught.value.status == 502 and "127.0.0.1:9/token" in caught.value.message
    assert "could not be reached" in caught.value.message and "Error" not in caught.value.message


@pytest.mark.parametrize("token_uri", ["http://10.1.2.3/token", "http://169.254.169.254/computeMetadata/token",
                                       "http://127.0.0.1:1/token"])
async def test_private_token_uri_is_refused_before_any_connection(token_uri, strict_client):
    info = {"client_email": "a@p", "private_key": pem(_KEY), "token_uri": token_uri}
    cache = TokenCache(strict_client)  # no private hosts allowed
    with pytest.raises(Forbidden) as caught:
        await cache.token(info)
    assert caught.value.param == "cloudC_service_account_json.token_uri"
    assert cache.exchanges == 0
