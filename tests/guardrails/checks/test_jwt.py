"""default.jwt: HS/RS/PS/ES signatures, algorithm pinning, exp/nbf/iat, issuer/audience, JWKS inline and fetched."""

from __future__ import annotations

import time

import pytest

from gateway.guardrails.checks import build_check
from gateway.guardrails.text import GuardrailRequest, Subject
from gateway.guardrails.webhook import CheckIO
from tests.guardrails.checks.subjects import param_fault
from tests.guardrails.checks.tokens import (
    EC_KEY,
    OTHER_RSA_KEY,
    RSA_KEY,
    SECRET,
    b64,
    ec_jwk,
    pem,
    rsa_jwk,
    sign,
)


def with_token(token: str | None, header: str = "authorization", bearer: bool = True) -> Subject:
    headers = [] if token is None else [(header.encode(), (f"Bearer {token}" if bearer else token).encode())]
    return Subject("before", GuardrailRequest({"model": "m", "messages": []}, "chat", headers=headers))


def verdict(params: dict, subject: Subject):
    return build_check("default.jwt", params, "checks").run(subject)


def soon(seconds: int = 300) -> int:
    return int(time.time()) + seconds


@pytest.mark.parametrize(
    ("alg", "params"),
    [
        ("HS256", {"secret": SECRET}),
        ("HS512", {"secret": SECRET}),
        ("RS256", {"publicKey": pem(RSA_KEY)}),
        ("RS384", {"publicKey": pem(RSA_KEY)}),
        ("PS256", {"publicKey": pem(RSA_KEY)}),
        ("ES256", {"publicKey": pem(EC_KEY)}),
        ("RS256", {"jwks": {"keys": [rsa_jwk(OTHER_RSA_KEY, "old"), rsa_jwk(RSA_KEY, "k1")]}}),
        ("ES256", {"jwks": {"keys": [ec_jwk(EC_KEY, "e1")]}}),
    ],
)
def test_valid_tokens_pass(alg, params):
    kid = "k1" if "jwks" in params and alg == "RS256" else None
    token = sign({"sub": "u1", "exp": soon()}, alg, kid=kid)
    result = verdict(params, with_token(token))
    assert result.verdict is True, result.explanation


def test_tampered_or_foreign_signatures_fail():
    token = sign({"sub": "u1", "exp": soon()}, "RS256")
    head, payload, sig = token.split(".")
    forged = sign({"sub": "admin", "exp": soon()}, "RS256").split(".")[1]
    assert verdict({"publicKey": pem(RSA_KEY)}, with_token(f"{head}.{forged}.{sig}")).verdict is False
    other = sign({"sub": "u1"}, "RS256", key=OTHER_RSA_KEY)
    result = verdict({"publicKey": pem(RSA_KEY)}, with_token(other))
    assert result.verdict is False and "signature" in result.explanation


def test_algorithm_confusion_is_refused():
    # An HS256 token "signed" with the RSA public key's PEM must not verify against that public key.
    token = sign({"sub": "u1"}, "HS256", key=pem(RSA_KEY))
    assert verdict({"publicKey": pem(RSA_KEY)}, with_token(token)).verdict is False
    unsigned = b64(b'{"alg":"none"}') + "." + b64(b'{"sub":"u1"}') + "."
    assert verdict({"secret": SECRET}, with_token(unsigned)).verdict is False
    rs = sign({"sub": "u1"}, "RS256")
    result = verdict({"publicKey": pem(RSA_KEY), "algorithms": ["ES256"]}, with_token(rs))
    assert result.verdict is False and "not accepted" in result.explanation


@pytest.mark.parametrize(
    ("claims", "params", "why"),
    [
        ({"exp": int(time.time()) - 10}, {}, "expired"),
        ({"nbf": soon(600)}, {}, "not valid yet"),
        ({"iat": int(time.time()) - 3600}, {"maxTokenAge": 60}, "older"),
        ({}, {"maxTokenAge": 60}, "no iat"),
        ({"iss": "evil"}, {"issuer": "https://issuer.example"}, "issuer"),
        ({"aud": ["other"]}, {"audience": ["gateway", "api"]}, "audience"),
        ({"sub": "u"}, {"requiredClaims": ["sub", "email"]}, "email"),
        ({"exp": "tomorrow"}, {}, "not a number"),
    ],
)
def test_claims_are_enforced(claims, params, why):
    token = sign(claims, "HS256")
    result = verdict({"secret": SECRET, **params}, with_token(token))
    assert result.verdict is False
    assert why in result.explanation


def test_leeway_audience_issuer_and_custom_header_pass():
    token = sign({"exp": int(time.time()) - 5, "aud": "api", "iss": "me", "iat": int(time.time())}, "HS256")
    params = {"secret": SECRET, "clockTolerance": 60, "audience": ["gateway", "api"], "issuer": "me",
              "maxTokenAge": 60, "headerKey": "x-user-token"}
    assert verdict(params, with_token(token, "x-user-token", bearer=False)).verdict is True


def test_missing_or_malformed_token_fails():
    assert "no token" in verdict({"secret": SECRET}, with_token(None)).explanation
    assert verdict({"secret": SECRET}, with_token("not-a-jwt")).verdict is False
    assert verdict({"secret": SECRET}, with_token("a.b.c")).verdict is False


@pytest.mark.parametrize(
    ("params", "param"),
    [
        ({}, "input_guardrails[0].default.jwt"),
        ({"secret": SECRET, "algorithms": ["RS256"]}, "input_guardrails[0].default.jwt.algorithms[0]"),
        ({"secret": SECRET, "algorithms": ["none"]}, "input_guardrails[0].default.jwt.algorithms[0]"),
        ({"publicKey": "-----BEGIN PUBLIC KEY-----\nxx\n-----END PUBLIC KEY-----"},
         "input_guardrails[0].default.jwt.publicKey"),
        ({"jwks": {"keys": [{"kty": "RSA", "n": "AQAB"}]}}, "input_guardrails[0].default.jwt.jwks"),
        ({"jwksUri": "ftp://keys.example"}, "input_guardrails[0].default.jwt.jwksUri"),
        ({"secret": SECRET, "clockTolerance": -1}, "input_guardrails[0].default.jwt.clockTolerance"),
    ],
)
def test_bad_parameters_are_named(params, param):
    assert param_fault("default.jwt", params) == param


async def test_keys_from_a_jwks_url_are_fetched_once_and_cached(hook_server, loopback_client):
    hook_server.jwks = {"keys": [rsa_jwk(RSA_KEY, "k1")]}
    check = build_check("default.jwt", {"jwksUri": f"{hook_server.url}/jwks", "cacheMaxAge": 60}, "checks")
    io = CheckIO(loopback_client)
    token = sign({"sub": "u1", "exp": soon()}, "RS256", kid="k1")
    assert (await check.run_io(with_token(token), io)).verdict is True
    assert (await check.run_io(with_token(token), io)).verdict is True
    assert hook_server.jwks_fetches == 1
    other = sign({"sub": "u1", "exp": soon()}, "RS256", key=OTHER_RSA_KEY, kid="k1")
    assert (await check.run_io(with_token(other), io)).verdict is False


async def test_a_jwks_url_on_a_private_host_is_refused(hook_server, strict_client):
    check = build_check("default.jwt", {"jwksUri": f"{hook_server.url}/jwks"}, "checks")
    result = await check.run_io(with_token(sign({}, "RS256")), CheckIO(strict_client))
    assert result.verdict is False
    assert "blocked" in result.explanation
    assert hook_server.jwks_fetches == 0
