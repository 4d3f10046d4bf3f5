"""The ASGI edge of a WebSocket the gateway serves: refusing an upgrade, accepting it, frames in and out, the close.

ASGI facts relied on (the ASGI spec 2.3, as Granian 2.8 serves it, checked against Granian 2.8.9): a ``websocket``
scope starts with a ``websocket.connect`` message; the app answers ``websocket.accept`` (``subprotocol``: the one
chosen from the scope's ``subprotocols``) or refuses. Granian offers the ``websocket.http.response`` extension
(``extensions`` in the scope), so a refusal is a real HTTP answer (``websocket.http.response.start`` then
``.body``) with the gateway's JSON error; a server without it gets ``websocket.close`` before the accept, which it
answers with HTTP 403 (the JSON body is then lost). After the accept, frames arrive as ``websocket.receive`` with
``text`` or ``bytes`` and go out as ``websocket.send``; ``websocket.close`` carries a code and a reason (at most
123 bytes of UTF-8, the WebSocket limit); the client's leaving is ``websocket.disconnect`` with its code, and a
send after it raises. Pings and pongs never reach the app: the server answers them.
"""

from __future__ import annotations

from gateway.http.errors import GatewayError
from gateway.http.types import Receive, Scope, Send

HTTP_RESPONSE = "websocket.http.response"
#: the longest close reason a close frame carries (125 bytes of payload less the 2-byte code)
MAX_REASON_BYTES = 123
#: close codes an endpoint may not send in a close frame (they only report what happened)
UNSENDABLE = frozenset({1005, 1006, 1015})


def bounded_reason(reason: str) -> str:
    """``reason`` cut to what a close frame carries, on a character boundary."""
    data = reason.encode()
    if len(data) <= MAX_REASON_BYTES:
        return reason
    return data[:MAX_REASON_BYTES].decode("utf-8", "ignore")


def sendable(code: int, fallback: int = 1000) -> int:
    """``code`` when a close frame may carry it, else ``fallback`` (1005, 1006 and 1015 are never sent)."""
    return fallback if code in UNSENDABLE or not (1000 <= code < 5000) else code


class ClientSocket:
    """One upgrade request from a client, refused or accepted, then its frames both ways and its close."""

    __slots__ = ("_receive", "_send", "can_answer_http", "accepted", "closed", "close_code", "subprotocols")

    def __init__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self._receive = receive
        self._send = send
        self.can_answer_http = HTTP_RESPONSE in (scope.get("extensions") or {})
        self.subprotocols: list[str] = list(scope.get("subprotocols") or ())
        self.accepted = False
        #: set once either side closed (or the client left)
        self.closed = False
        #: the code the socket closed with, once it did
        self.close_code: int | None = None

    async def wait_connect(self) -> bool:
        """The server's ``websocket.connect`` (False: the client left before it)."""
        message = await self._receive()
        return message["type"] == "websocket.connect"

    async def refuse(self, error: GatewayError) -> None:
        """Refuse the upgrade with ``error``'s status and JSON body (a bare 403 where the server cannot answer
        HTTP)."""
        self.closed = True
        self.close_code = error.status
        try:
            if self.can_answer_http:
                headers = [(b"content-type", b"application/json"), *(error.headers or ())]
                await self._send({"type": "websocket.http.response.start", "status": error.status,
                                  "headers": headers})
                await self._send({"type": "websocket.http.response.body", "body": error.body()})
            else:
                await self._send({"type": "websocket.close", "code": 1008, "reason": bounded_reason(error.message)})
        except Exception:  # noqa: BLE001 - the client left while the gateway decided: no one to answer
            pass

    async def accept(self, subprotocol: str | None, headers: list[tuple[bytes, bytes]] | None = None) -> None:
        """Accept the upgrade (``headers``: added to the 101 answer where the server sends them; Granian 2.8.9 does
        not); raises ``ConnectionError`` when the client has left."""
        message: dict = {"type": "websocket.accept"}
        if subprotocol:
            message["subprotocol"] = subprotocol
        if headers:
            message["headers"] = headers
        try:
            await self._send(message)
        except Exception as exc:  # the server raises its own error type for a gone client
            self.closed = True
            raise ConnectionError("the client left before its upgrade was accepted") from exc
        self.accepted = True

    async def receive(self) -> str | bytes | int:
        """The next frame (text as ``str``, binary as ``bytes``), or the close code once the client left."""
        while True:
            message = await self._receive()
            kind = message["type"]
            if kind == "websocket.receive":
                text = message.get("text")
                return text if text is not None else (message.get("bytes") or b"")
            if kind == "websocket.disconnect":
                self.closed = True
                self.close_code = int(message.get("code") or 1005)
                return self.close_code

    async def send(self, frame: str | bytes) -> None:
        """Send one frame; raises ``ConnectionError`` when the client has left."""
        message = {"type": "websocket.send", "text": frame} if isinstance(frame, str) else \
            {"type": "websocket.send", "bytes": frame}
        try:
            await self._send(message)
        except Exception as exc:  # the server raises its own error type for a gone client
            self.closed = True
            raise ConnectionError("the client left") from exc

    async def close(self, code: int, reason: str = "") -> None:
        """Close with ``code`` (one a close frame may carry) and ``reason`` (bounded); nothing if already closed."""
        if self.closed:
            return
        self.closed = True
        self.close_code = code
        try:
            await self._send({"type": "websocket.close", "code": sendable(code), "reason": bounded_reason(reason)})
        except Exception:  # noqa: BLE001 - the client left first: nothing to close
            pass
