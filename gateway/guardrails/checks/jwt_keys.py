"""JWT signature verification for ``default.jwt``: algorithms, keys from PEM or a JWKS, and the signature check.

Facts relied on: RFC 7518 (JWA) names HS256/384/512 (HMAC-SHA2), RS256/384/512 (RSASSA-PKCS1-v1_5), PS256/384/512
(RSASSA-PSS, MGF1 with the same hash, salt as long as the hash) and ES256/384/512 (ECDSA on P-256/P-384/P-521 with
the signature as the fixed-width big-endian ``r || s``, 32/48/66 bytes each). RFC 7517 (JWK): ``kty`` RSA keys carry
``n`` and ``e``, EC keys ``crv``, ``x`` and ``y``, oct keys ``k``, all base64url without padding; ``kid`` names a
key and ``alg`` / ``use`` may restrict it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any

# cryptography (some 6 MB resident) is imported by the functions that use it: a worker loads it when a jwt check
# first reads a key, not at start

#: hash bits -> (cryptography's hash class name, hashlib's constructor)
_SHA = {"256": ("SHA256", hashlib.sha256), "384": ("SHA384", hashlib.sha384), "512": ("SHA512", hashlib.sha512)}
#: ES algorithm -> (curve, bytes of r and of s)
_CURVES = {"ES256": ("P-256", 32), "ES384": ("P-384", 48), "ES512": ("P-521", 66)}
#: JWK curve -> cryptography's curve class name
_JWK_CURVES = {"P-256": "SECP256R1", "P-384": "SECP384R1", "P-521": "SECP521R1"}

ALGORITHMS: tuple[str, ...] = tuple(f"{family}{bits}" for family in ("HS", "RS", "PS", "ES") for bits in _SHA)


def b64url_decode(text: str) -> bytes:
    """base64url without padding (as in JWS); ValueError when it is not."""
    if not isinstance(text, str) or "=" in text:
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _b64_int(value: Any) -> int:
    return int.from_bytes(b64url_decode(value), "big")


class VerifyingKey:
    """One key that may verify signatures: its family (``HS``, ``RSA``, ``EC``), the key, and its JWK labels."""

    __slots__ = ("family", "key", "kid", "alg", "curve")

    def __init__(self, family: str, key: Any, kid: str | None = None, alg: str | None = None,
                 curve: str | None = None) -> None:
        self.family = family
        self.key = key
        self.kid = kid
        self.alg = alg
        self.curve = curve

    def fits(self, alg: str) -> bool:
        """Whether this key may verify a token signed with ``alg``."""
        if self.alg is not None and self.alg != alg:
            return False
        if alg.startswith("HS"):
            return self.family == "HS"
        if alg.startswith(("RS", "PS")):
            return self.family == "RSA"
        return self.family == "EC" and self.curve == _CURVES[alg][0]


def key_from_pem(pem: str) -> VerifyingKey:
    """A public key in PEM (SubjectPublicKeyInfo or an X.509 certificate); ValueError otherwise."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    data = pem.encode()
    if b"CERTIFICATE" in data:
        from cryptography import x509

        public: Any = x509.load_pem_x509_certificate(data).public_key()
    else:
        public = serialization.load_pem_public_key(data)
    if isinstance(public, rsa.RSAPublicKey):
        return VerifyingKey("RSA", public)
    if isinstance(public, ec.EllipticCurvePublicKey):
        names = {v.name: k for k, v in {"P-256": ec.SECP256R1(), "P-384": ec.SECP384R1(),
                                        "P-521": ec.SECP521R1()}.items()}
        return VerifyingKey("EC", public, curve=names.get(public.curve.name))
    raise ValueError("only RSA and EC public keys are supported")


def key_from_jwk(jwk: Any) -> VerifyingKey | None:
    """A JWK as a VerifyingKey; None for a key not meant for signatures; ValueError for a malformed one."""
    if not isinstance(jwk, dict):
        raise ValueError("a JWK must be an object")
    if jwk.get("use") not in (None, "sig"):
        return None
    kty, kid, alg = jwk.get("kty"), jwk.get("kid"), jwk.get("alg")
    kid = kid if isinstance(kid, str) else None
    alg = alg if isinstance(alg, str) else None
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    try:
        if kty == "RSA":
            public = rsa.RSAPublicNumbers(_b64_int(jwk["e"]), _b64_int(jwk["n"])).public_key()
            return VerifyingKey("RSA", public, kid, alg)
        if kty == "EC":
            curve = jwk.get("crv")
            if curve not in _JWK_CURVES:
                raise ValueError(f"unsupported EC curve {curve!r}")
            numbers = ec.EllipticCurvePublicNumbers(_b64_int(jwk["x"]), _b64_int(jwk["y"]),
                                                 getattr(ec, _JWK_CURVES[curve])())
            return VerifyingKey("EC", numbers.public_key(), kid, alg, curve)
        if kty == "oct":
            return VerifyingKey("HS", b64url_decode(jwk["k"]), kid, alg)
    except (KeyError, TypeError) as exc:
        raise ValueError(f"a {kty} JWK misses {exc}") from None
    raise ValueError(f"unsupported JWK kty {kty!r}")


def keys_from_jwks(doc: Any) -> list[VerifyingKey]:
    """The signature keys of a JWKS document (``{"keys": [...]}``); ValueError when it is malformed."""
    if not isinstance(doc, dict) or not isinstance(doc.get("keys"), list):
        raise ValueError('a JWKS is an object with a "keys" array')
    keys = []
    for jwk in doc["keys"]:
        key = key_from_jwk(jwk)
        if key is not None:
            keys.append(key)
    return keys


def verify(alg: str, key: VerifyingKey, signing_input: bytes, signature: bytes) -> bool:
    """Whether ``signature`` over ``signing_input`` is valid for ``alg`` under ``key`` (which must fit ``alg``)."""
    bits = alg[2:]
    if alg.startswith("HS"):
        expected = hmac.new(key.key, signing_input, _SHA[bits][1]).digest()
        return hmac.compare_digest(expected, signature)
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, padding
    from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

    digest = getattr(hashes, _SHA[bits][0])()
    try:
        if alg.startswith("RS"):
            key.key.verify(signature, signing_input, padding.PKCS1v15(), digest)
        elif alg.startswith("PS"):
            pss = padding.PSS(mgf=padding.MGF1(getattr(hashes, _SHA[bits][0])()), salt_length=digest.digest_size)
            key.key.verify(signature, signing_input, pss, digest)
        else:
            size = _CURVES[alg][1]
            if len(signature) != 2 * size:
                return False
            r = int.from_bytes(signature[:size], "big")
            s = int.from_bytes(signature[size:], "big")
            key.key.verify(encode_dss_signature(r, s), signing_input, ec.ECDSA(digest))
    except InvalidSignature:
        return False
    return True
