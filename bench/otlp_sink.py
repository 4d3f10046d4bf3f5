"""A loopback OTLP/HTTP trace collector for benchmarks: it accepts what the gateway's exporter sends and counts it.

``POST /v1/traces`` (OTLP/HTTP JSON, as the exporter posts its batches) is read whole and answered ``200 {}`` (an
``ExportTraceServiceResponse`` with nothing rejected); its spans are counted by their ``"spanId"`` members, without
decoding. ``GET /count`` answers ``{"requests": n, "spans": m}``. Anything else is a 404. HTTP/1.1 keep-alive, one
event loop: the exporter sends a batch at a time (up to 512 spans), so this costs the box little beside what it
measures.

Run: ``python bench/otlp_sink.py --port 4318``.
"""

from __future__ import annotations

import argparse
import asyncio
import re

_LENGTH = re.compile(rb"(?im)^content-length:\s*(\d+)\s*$")
counts = {"requests": 0, "spans": 0}


def _answer(status: bytes, body: bytes) -> bytes:
    return (b"HTTP/1.1 " + status + b"\r\ncontent-type: application/json\r\ncontent-length: "
            + str(len(body)).encode() + b"\r\n\r\n" + body)


async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = _LENGTH.search(head)
            body = await reader.readexactly(int(length.group(1))) if length else b""
            line = head.split(b"\r\n", 1)[0]
            if line.startswith(b"POST /v1/traces "):
                counts["requests"] += 1
                counts["spans"] += body.count(b'"spanId"')
                writer.write(_answer(b"200 OK", b"{}"))
            elif line.startswith(b"GET /count "):
                writer.write(_answer(b"200 OK", b'{"requests":%d,"spans":%d}' % (counts["requests"],
                                                                                  counts["spans"])))
            else:
                writer.write(_answer(b"404 Not Found", b'{"error":"not found"}'))
            await writer.drain()
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        pass
    finally:
        writer.close()


async def main(port: int) -> None:
    server = await asyncio.start_server(serve, "127.0.0.1", port, limit=1 << 20)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    asyncio.run(main(parser.parse_args().port))
