"""What the test apps' harnesses share (the SDK MCP server's ``tests/support/mcp_server_app.py`` and the SDK A2A
agent's ``tests/support/a2a_agent_app.py``): an ASGI request's body read once and given again to the SDK, a request
as the control routes report it (headers lower-cased, repeated ones joined, the body decoded), a JSON answer, and
the ``--require-header NAME:VALUE`` option both processes take.
"""

from __future__ import annotations

from typing import Any

import msgspec

Scope = dict[str, Any]
Message = dict[str, Any]


async def read_body(receive: Any) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if message["type"] != "http.request" or not message.get("more_body"):
            return b"".join(chunks)


def replay(body: bytes, receive: Any) -> Any:
    """A ``receive`` that gives the SDK the body already read, then waits on the connection (a disconnect)."""
    sent = False

    async def receive_again() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return receive_again


def request_headers(scope: Scope) -> dict[str, str]:
    """The request's headers, names lower-cased, the values of a repeated name joined with ``, ``."""
    headers: dict[str, str] = {}
    for raw_name, raw_value in scope["headers"]:
        name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return headers


def decoded_body(body: bytes) -> Any:
    """The body as JSON, as text when it is not JSON, None when empty."""
    if not body:
        return None
    try:
        return msgspec.json.decode(body)
    except msgspec.DecodeError:
        return body.decode("utf-8", "replace")


async def send_json(send: Any, status: int, document: Any, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    data = msgspec.json.encode(document)
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": head + (headers or [])})
    await send({"type": "http.response.body", "body": data})


def required_header(option: str | None) -> tuple[str, str] | None:
    """``--require-header NAME:VALUE`` as ``(name, value)`` (None when not given)."""
    if not option:
        return None
    name, _, value = option.partition(":")
    return name, value
