"""The mock's WebSocket side: one ``Socket`` over the ASGI websocket messages, and the session-wide scenario knobs.

ASGI facts relied on (the ASGI spec, version 2.3, which Granian 2.x serves): a ``websocket`` scope starts with a
``websocket.connect`` message; the app answers ``websocket.accept`` (``subprotocol`` names the one chosen from the
scope's ``subprotocols``) or refuses. A refusal is an HTTP answer through the ``websocket.http.response`` extension
(``websocket.http.response.start`` then ``.body``) when the server offers it, else a ``websocket.close`` before the
accept (the server then answers 403). After the accept, frames come as ``websocket.receive`` with ``text`` or
``bytes`` and go as ``websocket.send`` with one of them; ``websocket.close`` carries a code and reason; the client's
leaving is a ``websocket.disconnect`` with its code.

A provider module lists its WebSocket routes in ``WS_ROUTES`` (``(compiled path regex, handler)``; the handler takes
the ``MockRequest`` of the upgrade request and the ``Socket``). The app records each session in its scenario like a
request, plus ``frames`` (the client's last 100 text frames) and ``close`` (``{"code", "by"}``, by ``client`` or
``server``).
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

import msgspec

from gateway_mock.asgi import Receive, Scope, Send
from gateway_mock.kit import MockRequest

_encode = msgspec.json.encode
#: the client frames a scenario keeps, and how much of each
_KEPT_FRAMES = 100
_KEPT_FRAME_CHARS = 4096


class Socket:
    """One accepted (or refused) WebSocket: frames in and out, the close, and what the scenario records."""

    def __init__(self, scope: Scope, receive: Receive, send: Send, entry: dict[str, Any] | None = None) -> None:
        self._receive = receive
        self._send = send
        self._lock = asyncio.Lock()
        self.subprotocols: list[str] = list(scope.get("subprotocols") or ())
        self._can_answer_http = "websocket.http.response" in (scope.get("extensions") or {})
        #: the scenario's record of this session (None outside a scenario)
        self.entry = entry
        self.accepted = False
        self.closed = False
        #: the close code, once either side closed
        self.close_code: int | None = None
        #: server events sent as binary frames (a scenario knob)
        self.binary = False

    async def wait_connect(self) -> bool:
        message = await self._receive()
        return message["type"] == "websocket.connect"

    async def accept(self, subprotocol: str | None = None) -> None:
        message: dict[str, Any] = {"type": "websocket.accept"}
        if subprotocol:
            message["subprotocol"] = subprotocol
        await self._send(message)
        self.accepted = True

    async def refuse(self, status: int, body: bytes, content_type: bytes = b"application/json") -> None:
        """Refuse the upgrade with an HTTP answer (or a bare 403 where the server cannot send one)."""
        self.closed = True
        self.close_code = status
        if self.entry is not None:
            self.entry["close"] = {"code": status, "by": "server"}
        if self._can_answer_http:
            await self._send({"type": "websocket.http.response.start", "status": status,
                              "headers": [(b"content-type", content_type)]})
            await self._send({"type": "websocket.http.response.body", "body": body})
        else:
            await self._send({"type": "websocket.close", "code": 1008})

    async def receive(self) -> str | bytes | None:
        """The next frame (text as ``str``, binary as ``bytes``), or None once the client left."""
        while not self.closed:
            message = await self._receive()
            kind = message["type"]
            if kind == "websocket.disconnect":
                self._note_close(int(message.get("code") or 1005), "client")
                return None
            if kind != "websocket.receive":
                continue
            text = message.get("text")
            frame: str | bytes = text if text is not None else (message.get("bytes") or b"")
            if self.entry is not None:
                frames = self.entry.setdefault("frames", [])
                kept = frame if isinstance(frame, str) else frame.decode("utf-8", "replace")
                frames.append(kept[:_KEPT_FRAME_CHARS])
                del frames[:-_KEPT_FRAMES]
            return frame
        return None

    async def send_json(self, doc: Any) -> None:
        data = _encode(doc)
        await self.send_frame(data if self.binary else data.decode())

    async def send_frame(self, frame: str | bytes) -> None:
        if self.closed:
            raise ConnectionResetError("the WebSocket is closed")
        message = {"type": "websocket.send", "bytes": frame} if isinstance(frame, bytes) else \
            {"type": "websocket.send", "text": frame}
        async with self._lock:
            try:
                await self._send(message)
            except Exception as exc:
                self._note_close(1006, "client")
                raise ConnectionResetError("the client left") from exc

    async def close(self, code: int = 1000, reason: str = "") -> None:
        if self.closed:
            return
        self._note_close(code, "server")
        try:
            async with self._lock:
                await self._send({"type": "websocket.close", "code": code, "reason": reason})
        except Exception:  # noqa: BLE001 - the peer left first: nothing to close
            pass

    def _note_close(self, code: int, by: str) -> None:
        self.closed = True
        self.close_code = code
        if self.entry is not None and "close" not in self.entry:
            self.entry["close"] = {"code": code, "by": by}


WsHandler = Callable[[MockRequest, Socket], Awaitable[None]]


def chosen_subprotocol(offered: list[str], preferred: str) -> str | None:
    """The subprotocol to echo: ``preferred`` when offered, else none (never a credential-carrying one)."""
    return preferred if preferred in offered else None


def bearer(req: MockRequest) -> str | None:
    """The ``Authorization: Bearer`` token of the upgrade request, if any."""
    value = req.headers.get("authorization", "")
    scheme, _, token = value.partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None
