"""The sessions the gateway holds for handshake-era MCP clients (2025-11-25 and older): made by ``initialize``,
named by the ``Mcp-Session-Id`` the client sends back, kept in the state store so any worker or instance on the same
store serves the next request.

A session belongs to the gateway key that opened it and to the endpoint it was opened on (``/v1/mcp`` or one
server's ``/v1/mcp/{slug}``): presented with another key or on another endpoint it is unknown (404, as an expired
one), so a session id learnt by someone else opens nothing. Its id is 32 random bytes (base64url). It lives
GATEWAY_MCP_SESSION_TTL_MS after its last renewal; a session in use is renewed once half of that has passed, so an
active client keeps it and an idle one loses it. ``DELETE`` ends it. Stateless clients (2026-07-28) have none.
"""

from __future__ import annotations

import secrets
import time

import msgspec

from gateway.state.base import StateStore

_PREFIX = "mcp:session:"


class Session(msgspec.Struct, frozen=True):
    key_id: str
    workspace: str
    #: the endpoint it was opened on: a server slug, or "" for the combined endpoint
    endpoint: str
    version: str
    #: when it was last renewed (epoch seconds)
    renewed: float


class Sessions:
    """Handshake-era client sessions in ``store`` (see the module docstring)."""

    def __init__(self, store: StateStore, ttl_s: float) -> None:
        self.store = store
        self.ttl_s = ttl_s

    async def open(self, key_id: str, workspace: str, endpoint: str, version: str) -> str:
        session_id = secrets.token_urlsafe(32)
        await self._put(session_id, Session(key_id, workspace, endpoint, version, time.time()))
        return session_id

    async def find(self, session_id: str, key_id: str, endpoint: str) -> Session | None:
        """The session ``session_id`` when it is alive and belongs to ``key_id`` on ``endpoint`` (renewed when half
        its life has passed); None otherwise."""
        if not session_id or len(session_id) > 128:
            return None
        raw = await self.store.get(_PREFIX + session_id)
        if raw is None:
            return None
        try:
            session = msgspec.json.decode(raw, type=Session)
        except msgspec.DecodeError:
            return None
        if session.key_id != key_id or session.endpoint != endpoint:
            return None
        now = time.time()
        if now - session.renewed > self.ttl_s / 2:
            session = msgspec.structs.replace(session, renewed=now)
            await self._put(session_id, session)
        return session

    async def close(self, session_id: str) -> None:
        await self.store.delete(_PREFIX + session_id)

    async def _put(self, session_id: str, session: Session) -> None:
        await self.store.set(_PREFIX + session_id, msgspec.json.encode(session), int(self.ttl_s * 1000))
