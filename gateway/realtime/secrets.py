"""Client secrets: short-lived, single-use credentials a server mints for a browser, so a page never holds a gateway
key (docs/websockets.md#client-secrets).

``POST /v1/realtime/client_secrets`` (the gateway key, scope ``inference``, and the provider named by a slug or a
saved config id) mints ``gwrt_<random>``; the browser offers it as the subprotocol ``openai-insecure-api-key.<secret>``.
The state store keeps, under the secret's SHA-256 and for its lifetime only, the grant: the workspace, the minting
gateway key sealed with the gateway's secret key (so a revoked key's secrets stop working, and the key's scopes and
policies apply to the session as if it had connected itself), the provider slug or saved config id, and the model
it is bound to (if any). A secret opens one session: the first use claims it (an atomic ``set_if_absent`` across
workers and instances); a second, an expired or an unknown one is a 401.

The request body mirrors the Realtime API's own client-secret request as far as the gateway applies it:
``{"expires_after": {"anchor": "created_at", "seconds": 10..7200}, "session": {"type": "realtime", "model": ...}}``
(default 600 s); any other session field is refused with a 400 naming it (the gateway does not configure sessions).
"""

from __future__ import annotations

import hashlib
import secrets as random_source
import time
from typing import Callable, Literal

import msgspec

from gateway.controlplane.secrets import SecretBox, SecretError
from gateway.http.errors import InvalidRequest, Unauthorized
from gateway.state.base import StateStore

PREFIX = "gwrt_"
MIN_SECONDS, MAX_SECONDS, DEFAULT_SECONDS = 10, 7200, 600
_GRANT_KEY = "realtime-secret:"
_USED_KEY = "realtime-secret-used:"
_SEAL_CONTEXT = "realtime-client-secret"
UNKNOWN = "unknown, expired or already used client secret"


class ExpiresAfter(msgspec.Struct, forbid_unknown_fields=True):
    anchor: Literal["created_at"] = "created_at"
    seconds: int = DEFAULT_SECONDS


class SessionParams(msgspec.Struct, forbid_unknown_fields=True):
    type: Literal["realtime"] = "realtime"
    model: str | None = None


class MintRequest(msgspec.Struct, forbid_unknown_fields=True):
    expires_after: ExpiresAfter | None = None
    session: SessionParams | None = None


class Grant(msgspec.Struct, gc=False):
    """What a secret opens: the minting key (sealed in the store, open once redeemed), its workspace, the provider
    slug or saved config id, the model (None: any) and when it expires (Unix seconds)."""

    workspace: str
    key: str
    provider: str | None
    config: str | None
    model: str | None
    expires_at: int


_decode_request = msgspec.json.Decoder(MintRequest).decode
_decode_grant = msgspec.json.Decoder(Grant).decode
_encode = msgspec.json.encode


def parse_mint(body: bytes) -> MintRequest:
    """The mint request (an empty body: the defaults); a 400 naming the field that is wrong."""
    if not body.strip():
        return MintRequest()
    try:
        request = _decode_request(body)
    except msgspec.ValidationError as exc:
        text = str(exc)
        path = text.rpartition(" - at `$.")[2].rstrip("`") if " - at `$." in text else "body"
        raise InvalidRequest(f"invalid client secret request: {text}", param=path) from None
    except msgspec.DecodeError as exc:
        raise InvalidRequest(f"the body is not valid JSON: {exc}", param="body") from None
    seconds = request.expires_after.seconds if request.expires_after else DEFAULT_SECONDS
    if not MIN_SECONDS <= seconds <= MAX_SECONDS:
        raise InvalidRequest(f"expires_after.seconds must be between {MIN_SECONDS} and {MAX_SECONDS}, got {seconds}",
                             param="expires_after.seconds")
    return request


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


class ClientSecrets:
    """Mints and redeems client secrets in the state store; ``box`` opens the gateway's secret box on first use."""

    def __init__(self, store: StateStore, box: Callable[[], SecretBox]) -> None:
        self.store = store
        self._box = box

    async def mint(self, api_key: str, workspace: str, provider: str | None, config: str | None, model: str | None,
                   seconds: int) -> tuple[str, int]:
        """A new secret and its expiry (Unix seconds)."""
        value = PREFIX + random_source.token_urlsafe(32)
        expires_at = int(time.time()) + seconds
        grant = Grant(workspace, self._box().seal(api_key.encode(), _SEAL_CONTEXT), provider, config, model,
                      expires_at)
        await self.store.set(_GRANT_KEY + _digest(value), _encode(grant), seconds * 1000)
        return value, expires_at

    async def redeem(self, value: str) -> Grant:
        """The grant of ``value`` with its key opened, claimed for this session; 401 when there is none to claim."""
        digest = _digest(value)
        stored = await self.store.get(_GRANT_KEY + digest)
        if stored is None:
            raise Unauthorized(UNKNOWN, param="sec-websocket-protocol")
        grant = _decode_grant(stored)
        left_ms = (grant.expires_at - int(time.time())) * 1000
        if left_ms <= 0 or not await self.store.set_if_absent(_USED_KEY + digest, b"1", left_ms + 1000):
            raise Unauthorized(UNKNOWN, param="sec-websocket-protocol")
        await self.store.delete(_GRANT_KEY + digest)
        try:
            key = self._box().open(grant.key, _SEAL_CONTEXT).decode()
        except SecretError:
            raise Unauthorized(UNKNOWN + " (sealed with another secret key)", param="sec-websocket-protocol") from None
        return msgspec.structs.replace(grant, key=key)
