"""How soon a request's record reaches a connected console (``GET /v1/logs/stream``), gateway with several workers.

Starts the mock and ``gateway serve --workers N`` (default 2), opens one stream, then sends ``--requests`` chat
requests one by one, each on a new connection (so the workers share them), ``--gap`` seconds apart, and times
from each answer's last byte to its record's arrival on the stream. Prints one JSON document: p50/p90/max delay
in ms and how many records arrived.

    python bench/logstream.py --requests 200
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))

from procs import Stack

CHAT = msgspec.json.encode({"model": "gpt-bench", "messages": [{"role": "user", "content": "hi"}]})


def listen(url: str, key: str, arrivals: dict[str, float], stop: threading.Event) -> None:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    conn.request("GET", "/v1/logs/stream", headers={"x-gateway-api-key": key})
    resp = conn.getresponse()
    while not stop.is_set():
        line = resp.readline()
        if not line:
            return
        if line.startswith(b"data: "):
            arrivals[msgspec.json.decode(line[6:])["trace_id"]] = time.perf_counter()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--gap", type=float, default=0.05)
    args = p.parse_args()
    with Stack(log=lambda message: print(message, file=sys.stderr)) as stack:
        stack.start_proxies(args.workers, floor=False)
        gateway = urlsplit(stack.gateway.url)
        arrivals: dict[str, float] = {}
        answered: dict[str, float] = {}
        stop = threading.Event()
        reader = threading.Thread(target=listen, args=(stack.gateway.url, stack.admin_key, arrivals, stop),
                                  daemon=True)
        reader.start()
        time.sleep(1.0)
        headers = {"content-type": "application/json", "authorization": "Bearer sk-bench",
                   "x-gateway-api-key": stack.admin_key, "x-gateway-provider": "vendorA",
                   "x-gateway-custom-host": f"{stack.mock.url}/v1"}
        for i in range(args.requests):
            trace = f"stream-bench-{i}"
            conn = http.client.HTTPConnection(gateway.hostname, gateway.port, timeout=30)
            conn.request("POST", "/v1/chat/completions", body=CHAT, headers={**headers, "x-gateway-trace-id": trace})
            resp = conn.getresponse()
            resp.read()
            answered[trace] = time.perf_counter()
            conn.close()
            time.sleep(args.gap)
        deadline = time.monotonic() + 5
        while len(arrivals) < len(answered) and time.monotonic() < deadline:
            time.sleep(0.05)
        stop.set()
    delays = sorted((arrivals[t] - answered[t]) * 1000 for t in answered if t in arrivals)
    out = {"workers": args.workers, "requests": args.requests, "arrived": len(delays),
           "delay_ms": {"p50": round(statistics.median(delays), 1) if delays else None,
                        "p90": round(delays[int(len(delays) * 0.9) - 1], 1) if delays else None,
                        "max": round(delays[-1], 1) if delays else None}}
    print(msgspec.json.format(msgspec.json.encode(out), indent=2).decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
