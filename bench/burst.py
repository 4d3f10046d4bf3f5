"""Thousands of streams opened at once through one worker: the floor proxy and the gateway, in one run.

Starts ``gateway mock-upstream`` (a scenario streaming ``--chunks`` content chunks ``--delay-ms`` apart), the floor
proxies (``bench/floor_proxy.py``: stock, and ``lean`` over the gateway's lean exchange) and ``gateway serve`` with
``--workers`` workers (1 by default), then for each target in turn opens ``--streams`` streamed chats at the same
moment (one connection each, ``Connection: close``) and reads every stream to its end; each target is stopped before
the next one runs, so the mock starts each burst without the previous target's pooled connections. Prints one JSON
document on stdout (progress on stderr) with, per target:

- ``failures``: streams that did not answer 200 or did not deliver every content chunk and ``[DONE]``, with the
  reasons counted (status codes, connection errors, truncated streams, the first error messages seen);
- ``wall_s``: from the first connect to the end of the last stream;
- ``ttfb_ms`` p50/p99: time to the first response byte, and ``first_event_ms``: to the first ``data:`` event;
- ``peak_rss_mb``: the peak resident memory (VmHWM) of each server worker over the run.

Quick run: ``python bench/burst.py --streams 200 --delay-ms 50``. Full run (the default): 5,000 streams of 20
chunks 250 ms apart, about a minute. The client raises its own open-file limit; the servers inherit it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import resource
import sys
import time
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))

from procs import Stack, worker_pids
from rawhttp import build_request

SCENARIO = "bench-burst"
CHAT = {"model": "gpt-bench", "stream": True, "messages": [{"role": "user", "content": "Stream me twenty words."}]}
CONTENT = b'"delta":{"content"'


def log(message: str) -> None:
    print(f"[burst] {message}", file=sys.stderr, flush=True)


def raise_fd_limit(want: int) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = min(hard, max(soft, want))
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return target


class Outcome:
    __slots__ = ("status", "ttfb", "first_event", "chunks", "done", "error", "client_error")

    def __init__(self) -> None:
        self.status = 0
        self.ttfb: float | None = None
        self.first_event: float | None = None
        self.chunks = 0
        self.done = False
        self.error: str | None = None
        self.client_error: str | None = None


async def one_stream(host: str, port: int, raw: bytes, start: float,
                     timeout: float) -> Outcome:  # noqa: ASYNC109 - a per-read bound, applied inside
    out = Outcome()
    writer = None
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(raw)
            buf = bytearray()
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                now = time.perf_counter()
                if out.ttfb is None:
                    out.ttfb = now - start
                buf += data
                if out.first_event is None and b"data:" in buf:
                    out.first_event = now - start
            body = bytes(buf)
            out.status = int(body[9:12]) if body[:5] == b"HTTP/" else 0
            out.chunks = body.count(CONTENT)
            out.done = b"data: [DONE]" in body
            if out.status != 200:
                out.error = body[body.find(b"\r\n\r\n") + 4:][:300].decode("utf-8", "replace")
            elif b'data: {"error"' in body:
                at = body.find(b'data: {"error"')
                out.error = body[at:at + 300].decode("utf-8", "replace")
    except (TimeoutError, OSError) as exc:
        out.client_error = exc.__class__.__name__
        out.error = f"{exc.__class__.__name__}: {exc}"[:200]
    finally:
        if writer is not None:
            writer.close()
    return out


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))] * 1000, 1)


async def burst(url: str, path: str, headers: dict[str, str], streams: int, chunks: int,
                timeout: float) -> dict:  # noqa: ASYNC109 - a per-stream bound, applied inside
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    body = msgspec.json.encode(CHAT)
    raw = build_request(url + path, body, {**headers, "content-type": "application/json"})
    raw = raw.replace(b"connection: keep-alive", b"connection: close")
    start = time.perf_counter()
    outcomes = await asyncio.gather(*(one_stream(parts.hostname, parts.port, raw, start, timeout)
                                      for _ in range(streams)))
    wall = time.perf_counter() - start
    failures: dict[str, int] = {}
    samples: list[str] = []
    for o in outcomes:
        reason = None
        if o.client_error is not None:
            reason = f"client {o.client_error}"
        elif o.status != 200:
            reason = f"status {o.status}"
        elif o.error:
            reason = "in-stream error"
        elif not o.done or o.chunks != chunks:
            reason = "truncated stream"
        if reason is not None:
            failures[reason] = failures.get(reason, 0) + 1
            if o.error and len(samples) < 5 and o.error not in samples:
                samples.append(o.error)
    return {
        "streams": streams,
        "failures": sum(failures.values()),
        "failure_reasons": failures,
        "failure_samples": samples,
        "wall_s": round(wall, 2),
        "ttfb_ms": {"p50": pct([o.ttfb for o in outcomes if o.ttfb is not None], 0.5),
                    "p99": pct([o.ttfb for o in outcomes if o.ttfb is not None], 0.99)},
        "first_event_ms": {"p50": pct([o.first_event for o in outcomes if o.first_event is not None], 0.5),
                           "p99": pct([o.first_event for o in outcomes if o.first_event is not None], 0.99)},
    }


def peak_rss_mb(pid: int) -> list[float]:
    """VmHWM (peak resident set) of each worker of a server, MB."""
    out = []
    for worker in worker_pids(pid):
        try:
            for line in Path(f"/proc/{worker}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    out.append(round(int(line.split()[1]) / 1024, 1))
        except OSError:
            pass
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--streams", type=int, default=5000, help="streams opened at once per target (default 5000)")
    p.add_argument("--chunks", type=int, default=20, help="content chunks per stream (default 20)")
    p.add_argument("--delay-ms", type=int, default=250, help="upstream delay between chunks (default 250)")
    p.add_argument("--workers", type=int, default=1, help="floor and gateway workers (default 1)")
    p.add_argument("--targets", default="floor,gateway",
                   help="which to run, in order: floor, lean (the lean floor), gateway (default floor,gateway)")
    p.add_argument("--timeout", type=float, default=300.0, help="per-stream client timeout, seconds")
    p.add_argument("--output", help="also write the JSON here")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    fds = raise_fd_limit(4 * args.streams + 1024)
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    report: dict = {"settings": {"streams": args.streams, "chunks": args.chunks, "delay_ms": args.delay_ms,
                                 "workers": args.workers, "open_files_limit": fds}, "targets": {}}
    with Stack(log) as stack:
        stack.scenario(SCENARIO, [{"chunks": args.chunks, "chunk_delay_ms": args.delay_ms}])
        stack.start_proxies(args.workers)
        try:
            base = f"/s/{SCENARIO}"
            plain = {"authorization": "Bearer sk-bench"}
            routes = {
                "floor": (stack.floor.url, base + "/v1/chat/completions", plain, stack.floor.pid),
                "lean": (stack.lean.url, base + "/v1/chat/completions", plain, stack.lean.pid),
                "gateway": (stack.gateway.url, "/v1/chat/completions",
                            {**plain, "x-gateway-api-key": stack.admin_key, "x-gateway-provider": "vendorA",
                             "x-gateway-custom-host": f"{stack.mock.url}{base}/v1"}, stack.gateway.pid),
            }
            for name in args.targets.split(","):
                url, path, headers, pid = routes[name]
                log(f"{name}: {args.streams} streams at once")
                result = asyncio.run(burst(url, path, headers, args.streams, args.chunks, args.timeout))
                result["peak_rss_mb"] = peak_rss_mb(pid)
                report["targets"][name] = result
                log(f"{name}: {result['failures']} failures, {result['wall_s']} s")
                # Stop this target before the next one: its thousands of pooled keep-alive connections to the
                # single-worker mock would otherwise slow the mock down for whoever runs next (about 2x here).
                server = {"floor": stack.floor, "lean": stack.lean, "gateway": stack.gateway}[name]
                server.stop()
                time.sleep(2)
        finally:
            stack.stop_proxies()
    text = json.dumps(report, indent=2)
    print(text)
    if args.output:
        Path(args.output).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
