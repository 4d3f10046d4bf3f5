"""``default.jwt``: passes when a request header holds a valid JWT: signature, algorithm, ``exp`` / ``nbf`` and more.

Parameters:
- ``headerKey`` (string, default ``Authorization``): the request header holding the token (a ``Bearer `` prefix
  is removed);
- key material, at least one of: ``secret`` (string, for HS256/384/512), ``publicKey`` (PEM public key or
  certificate, RSA or EC), ``jwks`` (an inline JWKS object ``{"keys": [...]}``), ``jwksUri`` (an http(s) URL of a
  JWKS, fetched through the gateway's upstream client under the same SSRF rules as webhooks and cached for
  ``cacheMaxAge`` seconds, default 300; ``timeout`` bounds the fetch, milliseconds, default 3000);
- ``algorithms`` (array, default: every algorithm the given key material can verify): accepted ``alg`` values among
  HS256/384/512, RS256/384/512, PS256/384/512, ES256/384/512 (``none`` never). A secret verifies only HS tokens and
  a public key only RS/PS/ES tokens, so one cannot stand in for the other;
- ``clockTolerance`` (seconds, default 0): leeway for ``exp`` and ``nbf``; ``maxTokenAge`` (seconds, optional):
  the token's ``iat`` may be at most this old (a token without ``iat`` then fails);
- ``issuer`` (string) and ``audience`` (string or array: the token's ``aud`` must hold one of them), optional;
- ``requiredClaims`` (array of claim names that must be present), optional.
``exp`` and ``nbf`` are enforced whenever the token has them. When the token's header names a ``kid``, keys with
that ``kid`` are tried (else every fitting key).
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import msgspec

from gateway.guardrails.checks.base import Check, ParamError, Params, Verdict, join_path
from gateway.guardrails.checks.jwt_keys import (
    ALGORITHMS,
    VerifyingKey,
    b64url_decode,
    key_from_pem,
    keys_from_jwks,
    verify,
)
from gateway.guardrails.text import Subject

_json_decode = msgspec.json.decode


class JwtParams(Params, frozen=True):
    headerKey: str = "Authorization"
    algorithms: list[str] | None = None
    secret: str | None = None
    publicKey: str | None = None
    jwks: dict[str, Any] | None = None
    jwksUri: str | None = None
    cacheMaxAge: Annotated[int, msgspec.Meta(ge=0, le=86400)] = 300
    timeout: Annotated[int, msgspec.Meta(ge=1, le=60000)] = 3000
    clockTolerance: Annotated[int, msgspec.Meta(ge=0, le=86400)] = 0
    maxTokenAge: Annotated[int, msgspec.Meta(ge=1)] | None = None
    issuer: str | None = None
    audience: str | list[str] | None = None
    requiredClaims: list[str] | None = None


class Jwt(Check):
    id = "default.jwt"
    params_type = JwtParams
    offload_chars = None  # one signature check: tens of microseconds

    def __init__(self, params: JwtParams, path: str) -> None:
        super().__init__(params, path)
        self.keys: list[VerifyingKey] = []
        if params.secret is not None:
            if not params.secret:
                raise ParamError(join_path(path, "secret"), "must be a non-empty string")
            self.keys.append(VerifyingKey("HS", params.secret.encode()))
        if params.publicKey is not None:
            try:
                self.keys.append(key_from_pem(params.publicKey))
            except (ValueError, TypeError) as exc:
                raise ParamError(join_path(path, "publicKey"), f"is not a PEM public key: {exc}") from None
        if params.jwks is not None:
            try:
                self.keys.extend(keys_from_jwks(params.jwks))
            except ValueError as exc:
                raise ParamError(join_path(path, "jwks"), str(exc)) from None
        self.io = params.jwksUri is not None
        if params.jwksUri is not None:
            from gateway.http.errors import InvalidRequest
            from gateway.upstream.ssrf import check_url

            try:
                check_url(params.jwksUri, join_path(path, "jwksUri"))
            except InvalidRequest as exc:
                raise ParamError(join_path(path, "jwksUri"), exc.message) from None
        if not self.keys and not self.io:
            raise ParamError(path, "needs key material: secret, publicKey, jwks or jwksUri")
        self.algorithms = self._algorithms(params, path)
        self.header = params.headerKey.lower()
        audience = params.audience
        self.audience = frozenset([audience] if isinstance(audience, str) else audience or ())

    def _algorithms(self, params: JwtParams, path: str) -> frozenset[str]:
        families = {"HS"} if params.secret is not None else set()
        if params.publicKey is not None or params.jwks is not None or params.jwksUri is not None:
            families |= {"RS", "PS", "ES"}
        if params.jwks is not None or params.jwksUri is not None:
            families.add("HS")  # oct keys
        if params.algorithms is None:
            return frozenset(alg for alg in ALGORITHMS if alg[:2] in families)
        where = join_path(path, "algorithms")
        if not params.algorithms:
            raise ParamError(where, "must name at least one algorithm")
        for i, alg in enumerate(params.algorithms):
            if alg not in ALGORITHMS:
                raise ParamError(f"{where}[{i}]", f"unsupported algorithm {alg!r}; one of {', '.join(ALGORITHMS)}")
            if alg[:2] not in families:
                need = "a secret or JWKS" if alg.startswith("HS") else "publicKey, jwks or jwksUri"
                raise ParamError(f"{where}[{i}]", f"{alg} needs {need}")
        return frozenset(params.algorithms)

    def run(self, subject: Subject) -> Verdict:
        return self.judge(subject, self.keys)

    async def run_io(self, subject: Subject, io: Any) -> Verdict:
        p = self.params
        from gateway.guardrails.webhook import HttpCheckError

        try:
            doc = await io.cached_json(p.jwksUri, p.cacheMaxAge, p.timeout)
            fetched = keys_from_jwks(doc)
        except (ValueError, HttpCheckError) as exc:
            return Verdict(False, f"could not get the JWKS from {p.jwksUri}: {exc}")
        return self.judge(subject, self.keys + fetched)

    def judge(self, subject: Subject, keys: list[VerifyingKey]) -> Verdict:
        """The verdict for the token in the request's header, verified with ``keys``."""
        token = subject.header(self.header)
        if not token:
            return Verdict(False, f"no token in the {self.params.headerKey} header")
        if token[:7].lower() == "bearer ":
            token = token[7:].strip()
        parts = token.split(".")
        if len(parts) != 3:
            return Verdict(False, "the token is not a JWS compact serialisation (three dot-separated parts)")
        try:
            header = _json_decode(b64url_decode(parts[0]))
            claims = _json_decode(b64url_decode(parts[1]))
            signature = b64url_decode(parts[2])
        except (ValueError, msgspec.DecodeError):
            return Verdict(False, "the token is not valid base64url JSON")
        if not isinstance(header, dict) or not isinstance(claims, dict):
            return Verdict(False, "the token's header and claims must be JSON objects")
        alg = header.get("alg")
        if alg not in self.algorithms:
            return Verdict(False, f"algorithm {alg!r} is not accepted")
        candidates = [key for key in keys if key.fits(alg)]
        kid = header.get("kid")
        if kid is not None and any(key.kid == kid for key in candidates):
            candidates = [key for key in candidates if key.kid == kid]
        signing_input = f"{parts[0]}.{parts[1]}".encode("ascii", "replace")
        if not any(verify(alg, key, signing_input, signature) for key in candidates):
            return Verdict(False, "the signature does not verify" if candidates else f"no key fits {alg}")
        return self._claims(claims)

    def _claims(self, claims: dict[str, Any]) -> Verdict:
        p = self.params
        now = time.time()
        leeway = p.clockTolerance
        exp, nbf, iat = claims.get("exp"), claims.get("nbf"), claims.get("iat")
        for name, value in (("exp", exp), ("nbf", nbf), ("iat", iat)):
            if value is not None and (type(value) not in (int, float)):
                return Verdict(False, f"the {name} claim is not a number")
        if exp is not None and now > exp + leeway:
            return Verdict(False, "the token has expired")
        if nbf is not None and now + leeway < nbf:
            return Verdict(False, "the token is not valid yet (nbf)")
        if p.maxTokenAge is not None and (iat is None or now - iat > p.maxTokenAge + leeway):
            return Verdict(False, "the token is older than maxTokenAge" if iat is not None else "the token has no iat")
        if p.issuer is not None and claims.get("iss") != p.issuer:
            return Verdict(False, "the token's issuer does not match")
        if self.audience:
            aud = claims.get("aud")
            held = {aud} if isinstance(aud, str) else {a for a in aud if isinstance(a, str)} \
                if isinstance(aud, list) else set()
            if not held & self.audience:
                return Verdict(False, "the token's audience does not match")
        missing = [name for name in p.requiredClaims or () if name not in claims]
        if missing:
            return Verdict(False, f"the token misses the claims {missing}")
        return Verdict(True, "the token is valid")
