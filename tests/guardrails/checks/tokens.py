"""Signing JWTs for the jwt check's tests (HS, RS, PS, ES), and their public keys as PEM and JWK."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER_RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
SECRET = "a-long-shared-secret-for-hs256-tokens"


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def sign(claims: dict[str, Any], alg: str = "RS256", key: Any = None, kid: str | None = None,
         header: dict[str, Any] | None = None) -> str:
    head = {"alg": alg, "typ": "JWT", **({"kid": kid} if kid else {}), **(header or {})}
    signing_input = f"{b64(json.dumps(head).encode())}.{b64(json.dumps(claims).encode())}".encode()
    digest = {"256": hashes.SHA256, "384": hashes.SHA384, "512": hashes.SHA512}[alg[2:]]()
    if alg.startswith("HS"):
        secret = (key or SECRET).encode()
        sig = hmac.new(secret, signing_input, {"256": hashlib.sha256, "384": hashlib.sha384,
                                               "512": hashlib.sha512}[alg[2:]]).digest()
    elif alg.startswith("RS"):
        sig = (key or RSA_KEY).sign(signing_input, padding.PKCS1v15(), digest)
    elif alg.startswith("PS"):
        pss = padding.PSS(mgf=padding.MGF1(digest), salt_length=digest.digest_size)
        sig = (key or RSA_KEY).sign(signing_input, pss, digest)
    else:
        r, s = decode_dss_signature((key or EC_KEY).sign(signing_input, ec.ECDSA(digest)))
        sig = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    return f"{signing_input.decode()}.{b64(sig)}"


def pem(private_key: Any) -> str:
    return private_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()


def rsa_jwk(private_key: Any, kid: str) -> dict[str, Any]:
    numbers = private_key.public_key().public_numbers()
    n = numbers.n.to_bytes((numbers.n.bit_length() + 7) // 8, "big")
    return {"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256", "n": b64(n), "e": b64(numbers.e.to_bytes(3, "big"))}


def ec_jwk(private_key: Any, kid: str) -> dict[str, Any]:
    numbers = private_key.public_key().public_numbers()
    return {"kty": "EC", "kid": kid, "crv": "P-256", "x": b64(numbers.x.to_bytes(32, "big")),
            "y": b64(numbers.y.to_bytes(32, "big"))}
