"""Reading WebSocket sessions in tests, for the Realtime API and the Responses API's WebSocket mode: through the
openai SDK's connection objects or a raw ``websockets`` client, every event up to the one that ends a step (each read
bounded at 20 s)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

#: the events that end a Responses WebSocket turn
TURN_ENDS = ("response.completed", "error")


async def until(connection: Any, kind: str) -> list:
    """Every event of an SDK connection up to and including the first of ``kind``."""
    seen = []
    async with asyncio.timeout(20):
        while True:
            event = await connection.recv()
            seen.append(event)
            if event.type == kind:
                return seen


async def raw_until(ws: Any, kind: str) -> list[dict]:
    """Every event of a raw ``websockets`` client up to and including the first of ``kind``."""
    seen = []
    async with asyncio.timeout(20):
        while True:
            event = json.loads(await ws.recv())
            seen.append(event)
            if event["type"] == kind:
                return seen


async def turn(connection: Any, **body: Any) -> list:
    """One ``response.create`` on an SDK Responses connection and its events up to ``response.completed`` (or an
    ``error``)."""
    await connection.response.create(**body)
    seen = []
    async with asyncio.timeout(20):
        async for event in connection:
            seen.append(event)
            if event.type in TURN_ENDS:
                return seen
    raise AssertionError(f"the socket closed after {[e.type for e in seen]}")


async def raw_turn(ws: Any, event: dict) -> list[dict]:
    """Send one raw Responses ``event`` and read its events up to ``response.completed`` (or an ``error``)."""
    await ws.send(json.dumps(event))
    seen = []
    async with asyncio.timeout(20):
        while True:
            doc = json.loads(await ws.recv())
            seen.append(doc)
            if doc["type"] in TURN_ENDS:
                return seen
