"""cloudC service-account access tokens: RS256 JWT assertion, exchange at token_uri, per-account cache and lock.

Flow (the OAuth 2.0 JWT-bearer grant of developers.google.com/identity/protocols/oauth2/service-account, as in
the conventions' wire facts): a JWT with header
``{"alg": "RS256", "typ": "JWT", "kid": private_key_id}`` and claims ``iss`` = the account's ``client_email``,
``scope`` = ``https://www.googleapis.com/auth/cloud-platform``, ``aud`` = the account's ``token_uri``, ``iat`` and
``exp`` = ``iat + 3600`` is signed with the account's RSA key (PKCS#1 v1.5 over SHA-256) and POSTed form-encoded as
``grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=<jwt>`` to ``token_uri``, which answers
``{"access_token", "expires_in", "token_type": "Bearer"}``; a refusal answers 4xx with
``{"error", "error_description"}``.

A token is reused until 5 minutes before it expires. Each account has one asyncio.Lock: while one request
refreshes, the others wait for that refresh and share its token (or its failure). The exchange goes through the
runtime's upstream client like every other upstream call (its pool, its connect timeout, SSRF checks and address
pinning; no redirects), bounded as a whole by TOKEN_TIMEOUT_S.
"""

from __future__ import annotations

import asyncio
import base64
import time
from typing import Any
from urllib.parse import urlencode

import msgspec

from gateway.bounded_cache import BoundedCache
from gateway.http.errors import (
    BadUpstreamResponse,
    Forbidden,
    GatewayError,
    InvalidRequest,
    UpstreamError,
    UpstreamTimeout,
    UpstreamUnreachable,
)
from gateway.upstream.client import UpstreamClient
from gateway.upstream.error_text import bounded, scrubbed, sent_secrets
from gateway.upstream.request import UpstreamRequest
from gateway.upstream.ssrf import check_url

PROVIDER = "cloudC"
FIELD = "cloudC_service_account_json"
SCOPE = "https://www.googleapis.com/auth/cloud-platform"
GRANT_TYPE = "urn:ietf:params:oauth:grant-type:jwt-bearer"
ASSERTION_LIFETIME_S = 3600
REFRESH_MARGIN_S = 300
TOKEN_TIMEOUT_S = 30.0

_encode = msgspec.json.encode


class TokenAnswer(msgspec.Struct):
    access_token: str | None = None
    expires_in: int | float | None = None
    token_type: str | None = None
    error: Any = None
    error_description: str | None = None


_answer = msgspec.json.Decoder(TokenAnswer)


def b64url(data: bytes) -> bytes:
    return base64.urlsafe_b64encode(data).rstrip(b"=")


class ServiceAccount:
    """The fields of a service-account key the flow needs, with the private key loaded once."""

    __slots__ = ("client_email", "token_uri", "private_key_id", "key", "cache_key")

    def __init__(self, info: Any) -> None:
        if not isinstance(info, dict):
            raise InvalidRequest(f"{FIELD} must be an object (the service account's JSON key)", param=FIELD)
        for name in ("client_email", "private_key", "token_uri"):
            value = info.get(name)
            if not isinstance(value, str) or not value.strip():
                raise InvalidRequest(f"{FIELD}.{name} is required (a non-empty string)", param=f"{FIELD}.{name}")
        key_id = info.get("private_key_id")
        if key_id is not None and not isinstance(key_id, str):
            raise InvalidRequest(f"{FIELD}.private_key_id must be a string", param=f"{FIELD}.private_key_id")
        self.client_email: str = info["client_email"]
        self.token_uri: str = info["token_uri"]
        self.private_key_id: str | None = key_id
        check_url(self.token_uri, f"{FIELD}.token_uri")
        # cryptography (some 6 MB resident) is loaded by the first service account a worker signs with
        from cryptography.exceptions import UnsupportedAlgorithm
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        try:
            key = serialization.load_pem_private_key(info["private_key"].encode(), password=None)
        except (ValueError, TypeError, UnsupportedAlgorithm):
            raise InvalidRequest(
                f"{FIELD}.private_key is not a valid unencrypted PEM private key", param=f"{FIELD}.private_key"
            ) from None
        if not isinstance(key, rsa.RSAPrivateKey):
            raise InvalidRequest(f"{FIELD}.private_key must be an RSA key (RS256)", param=f"{FIELD}.private_key")
        self.key = key
        self.cache_key = (self.client_email, self.token_uri, self.private_key_id, info["private_key"])

    def assertion(self, now: int | None = None) -> str:
        """A signed RS256 JWT assertion for the token exchange."""
        iat = int(time.time()) if now is None else now
        header: dict[str, str] = {"alg": "RS256", "typ": "JWT"}
        if self.private_key_id:
            header["kid"] = self.private_key_id
        claims = {"iss": self.client_email, "scope": SCOPE, "aud": self.token_uri, "iat": iat,
                  "exp": iat + ASSERTION_LIFETIME_S}
        signing_input = b64url(_encode(header)) + b"." + b64url(_encode(claims))
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        signature = self.key.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
        return (signing_input + b"." + b64url(signature)).decode("ascii")


class _Entry:
    __slots__ = ("lock", "token", "refresh_at", "failed_at", "failure")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.token: str | None = None
        self.refresh_at = 0.0
        self.failed_at = -1.0
        self.failure: GatewayError | None = None


class TokenCache:
    """Access tokens per service account; one refresh at a time per account."""

    def __init__(self, client: UpstreamClient) -> None:
        self._client = client
        self._accounts: BoundedCache[tuple[Any, ...], ServiceAccount] = BoundedCache(1024)
        self._entries: dict[tuple, _Entry] = {}
        #: token exchanges made (observability and tests)
        self.exchanges = 0

    def account(self, info: Any) -> ServiceAccount:
        """The parsed account for a config's key object (parsed once per distinct key)."""
        if isinstance(info, dict):
            probe = (info.get("client_email"), info.get("token_uri"), info.get("private_key_id"),
                     info.get("private_key"))
            try:
                hit = self._accounts.get(probe)
            except TypeError:  # unhashable values: let ServiceAccount name the field
                hit = None
            if hit is not None:
                return hit
        account = ServiceAccount(info)
        return self._accounts.put(account.cache_key, account)

    async def token(self, info: Any) -> str:
        """A valid access token for the account described by ``info`` (a config's key object)."""
        account = self.account(info)
        entry = self._entries.get(account.cache_key)
        if entry is None:
            if len(self._entries) >= 4096:  # forget idle accounts rather than grow without bound
                self._entries = {k: e for k, e in self._entries.items() if e.lock.locked()}
            entry = self._entries[account.cache_key] = _Entry()
        if entry.token is not None and time.monotonic() < entry.refresh_at:
            return entry.token
        arrived = time.monotonic()
        async with entry.lock:
            if entry.token is not None and time.monotonic() < entry.refresh_at:
                return entry.token
            if entry.failure is not None and entry.failed_at >= arrived:
                raise entry.failure  # the refresh this request waited for failed: share its answer
            try:
                token, expires_in = await self._exchange(account)
            except GatewayError as error:
                entry.failure = error
                entry.failed_at = time.monotonic()
                raise
            entry.failure = None
            entry.token = token
            entry.refresh_at = time.monotonic() + max(0.0, expires_in - REFRESH_MARGIN_S)
            return token

    async def _exchange(self, account: ServiceAccount) -> tuple[str, float]:
        uri = account.token_uri
        try:
            await self._client.check(uri)
        except Forbidden as exc:
            raise Forbidden(f"{FIELD}.token_uri refused: {exc.message}", param=f"{FIELD}.token_uri") from None
        assertion = account.assertion()
        form = urlencode({"grant_type": GRANT_TYPE, "assertion": assertion})
        request = UpstreamRequest(uri, {"content-type": "application/x-www-form-urlencoded"}, form.encode())
        self.exchanges += 1
        try:
            async with asyncio.timeout(TOKEN_TIMEOUT_S):
                response = await self._client.open(request)
                try:
                    body = await self._client.read_body(response)
                    status = response.status
                finally:
                    response.release()
        except (UpstreamTimeout, TimeoutError):
            raise UpstreamTimeout(f"{PROVIDER} token endpoint {uri} timed out", extra={"provider": PROVIDER}) \
                from None
        except UpstreamUnreachable as exc:  # the upstream client's own words for what went wrong
            raise UpstreamUnreachable(f"{PROVIDER} token endpoint {uri} could not be reached: {exc.message}",
                                      extra={"provider": PROVIDER}) from None
        try:
            answer = _answer.decode(body)
        except msgspec.DecodeError:
            answer = None
        if 400 <= status < 500:
            detail = ""
            if answer is not None and answer.error is not None:
                detail = f": {answer.error}" + (f" ({answer.error_description})" if answer.error_description else "")
            refused = UpstreamError(
                f"{PROVIDER} token endpoint {uri} refused the service account {account.client_email} "
                f"(HTTP {status}){bounded(detail)}",
                status=401, type="authentication_error", code="token_exchange_failed", param=FIELD,
                extra={"provider": PROVIDER},
            )
            raise scrubbed(refused, sent_secrets(request, None, assertion))
        if status != 200 or answer is None or not answer.access_token:
            raise BadUpstreamResponse(
                f"{PROVIDER} token endpoint {uri} answered HTTP {status} without an access_token",
                extra={"provider": PROVIDER},
            )
        expires_in = float(answer.expires_in) if answer.expires_in is not None else 3600.0
        return answer.access_token, expires_in

