"""The WebSocket floors of ``bench/realtime.py``: the least a Python relay on Granian + uvloop does, and Granian alone.

- relay (default): each upgrade opens an aiohttp WebSocket to ``--upstream`` plus the request's path and query, then
  two pumps copy frames (text stays text) one at a time each way, as the gateway's relay does, with nothing else: no
  authentication, usage, records, limits or idle timeout. The gateway's relay less this is what the gateway itself
  costs per message and per session.
- hold (``--hold``): the upgrade is accepted and each frame echoed, no upstream: what Granian's ASGI WebSocket costs
  alone (its memory per open socket, mostly).

Served like the gateway: ASGI, uvloop, the gateway's backlog and backpressure, one worker by default.
"""

import argparse
import asyncio
import os
from pathlib import Path

import aiohttp

UPSTREAM = os.environ.get("FLOOR_WS_UPSTREAM", "")
HOLD = os.environ.get("FLOOR_WS_HOLD") == "1"
state: dict = {}


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while (await receive())["type"] == "lifespan.startup":
            state["session"] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
            await send({"type": "lifespan.startup.complete"})
        await state["session"].close()
        return await send({"type": "lifespan.shutdown.complete"})
    if scope["type"] == "http":  # the readiness probe
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        return await send({"type": "http.response.body", "body": b"ok"})
    await receive()  # websocket.connect
    if HOLD:
        return await _echo(receive, send)
    query = scope.get("query_string") or b""
    url = UPSTREAM + scope["path"] + ("?" + query.decode("latin-1") if query else "")
    headers = {k.decode(): v.decode() for k, v in scope["headers"] if k == b"authorization"}
    upstream = await state["session"].ws_connect(url, headers=headers, max_msg_size=16 * 1024 * 1024)
    await send({"type": "websocket.accept"})
    pumps = [asyncio.ensure_future(_up(receive, upstream)), asyncio.ensure_future(_down(upstream, send))]
    try:
        await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for pump in pumps:
            pump.cancel()
        await asyncio.gather(*pumps, return_exceptions=True)
        await upstream.close()
        try:
            await send({"type": "websocket.close", "code": 1000})
        except Exception:  # noqa: BLE001 - the client left first
            pass


async def _up(receive, upstream):
    while True:
        message = await receive()
        if message["type"] != "websocket.receive":
            return
        text = message.get("text")
        if text is not None:
            await upstream.send_str(text)
        else:
            await upstream.send_bytes(message.get("bytes") or b"")


async def _down(upstream, send):
    while True:
        message = await upstream.receive()
        if message.type is aiohttp.WSMsgType.TEXT:
            await send({"type": "websocket.send", "text": message.data})
        elif message.type is aiohttp.WSMsgType.BINARY:
            await send({"type": "websocket.send", "bytes": message.data})
        else:
            return


async def _echo(receive, send):
    await send({"type": "websocket.accept"})
    while True:
        message = await receive()
        if message["type"] != "websocket.receive":
            return
        await send({"type": "websocket.send", "text": message.get("text") or ""})


if __name__ == "__main__":
    from granian import Granian
    from granian.constants import Interfaces, Loops

    parser = argparse.ArgumentParser(description="WebSocket floor for bench/realtime.py")
    parser.add_argument("--port", type=int, default=8789)
    parser.add_argument("--upstream", default=UPSTREAM, help="ws:// base URL the relay connects to")
    parser.add_argument("--hold", action="store_true", help="accept and echo, no upstream")
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    os.environ["FLOOR_WS_UPSTREAM"] = args.upstream.rstrip("/")  # read again by each worker at import
    os.environ["FLOOR_WS_HOLD"] = "1" if args.hold else "0"
    Granian("realtime_floor:app", address="127.0.0.1", port=args.port, interface=Interfaces.ASGI,
            workers=args.workers, loop=Loops.uvloop, log_access=False, log_level="warning", backlog=4096,
            backpressure=16_384, working_dir=Path(__file__).resolve().parent).serve()
