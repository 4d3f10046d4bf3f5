"""The floors: the least a Python proxy on Granian + uvloop does (no parsing, auth or logging), two ways.

- stock (default): one ``aiohttp.ClientSession`` relaying bytes, what a plain aiohttp relay costs;
- lean (``--lean``): the gateway's own lean exchange (``gateway.upstream.lean.LeanTransport``: the keep-alive pool,
  the compiled request head, llhttp) relaying the same bytes, the least this stack can do with it.
"""

import argparse
import os
from pathlib import Path

import aiohttp

UPSTREAM = os.environ.get("FLOOR_UPSTREAM", "http://127.0.0.1:9797")
LEAN = os.environ.get("FLOOR_LEAN") == "1"
_RELAY = {b"content-type", b"authorization", b"x-api-key", b"anthropic-version"}
state: dict = {}


async def _start() -> None:
    if LEAN:
        from gateway.settings import Settings
        from gateway.upstream.lean import LeanTransport

        state["lean"] = LeanTransport(Settings(allow_private_hosts=("127.0.0.1",)))
        await state["lean"].start()
    else:
        state["session"] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), auto_decompress=False)


async def _stop() -> None:
    await (state["lean"] if LEAN else state["session"]).close()


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while (await receive())["type"] == "lifespan.startup":
            await _start()
            await send({"type": "lifespan.startup.complete"})
        await _stop()  # the next lifespan message is the shutdown
        return await send({"type": "lifespan.shutdown.complete"})
    body, more = b"", True
    while more:
        message = await receive()
        body, more = body + message.get("body", b""), message.get("more_body", False)
    headers = {k.decode(): v.decode() for k, v in scope["headers"] if k in _RELAY}
    if LEAN:
        return await _lean(scope, body, headers, send)
    async with state["session"].post(UPSTREAM + scope["path"], data=body, headers=headers) as resp:
        ctype = resp.headers.get("content-type", "application/json").encode()
        await send({"type": "http.response.start", "status": resp.status, "headers": [(b"content-type", ctype)]})
        if not ctype.startswith(b"text/event-stream"):
            return await send({"type": "http.response.body", "body": await resp.read()})
        async for chunk in resp.content.iter_any():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})


async def _lean(scope, body, headers, send):
    from gateway.upstream.request import UpstreamRequest

    resp = await state["lean"].open(UpstreamRequest(UPSTREAM + scope["path"], headers, body), True)
    try:
        ctype = resp.headers.get("content-type", "application/json").encode()
        await send({"type": "http.response.start", "status": resp.status, "headers": [(b"content-type", ctype)]})
        if not ctype.startswith(b"text/event-stream"):
            return await send({"type": "http.response.body", "body": await resp.read_body()})
        async for chunk in resp.chunks():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    finally:
        resp.release()


if __name__ == "__main__":
    from granian import Granian
    from granian.constants import Interfaces, Loops

    parser = argparse.ArgumentParser(description="floor proxy for bench/overhead.py")
    parser.add_argument("--port", type=int, default=8788)
    parser.add_argument("--upstream", default=UPSTREAM)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--lean", action="store_true", help="relay through the gateway's lean exchange")
    args = parser.parse_args()
    os.environ["FLOOR_UPSTREAM"] = args.upstream.rstrip("/")  # read again by each worker at import
    os.environ["FLOOR_LEAN"] = "1" if args.lean else "0"
    Granian("floor_proxy:app", address="127.0.0.1", port=args.port, interface=Interfaces.ASGI,
            workers=args.workers, loop=Loops.uvloop, log_access=False, log_level="warning", backlog=4096,
            backpressure=16_384,  # the gateway's defaults: a worker serves every stream of a burst at once
            working_dir=Path(__file__).resolve().parent).serve()
