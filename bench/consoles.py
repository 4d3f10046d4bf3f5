"""Connected consoles for the benchmarks: N ``GET /v1/logs/stream`` connections read by one separate process.

As a script: ``python bench/consoles.py --url http://127.0.0.1:8787 --key KEY --count 100`` opens the connections,
reads every byte until SIGTERM/SIGINT (or ``--seconds``), then prints one JSON summary: connections that got a
200, ``event: log`` frames and bytes received, connections the server closed. ``Consoles`` runs it from
``bench/overhead.py --consoles N`` beside a load, so the readers never share a process (or the GIL) with the load
generator or the latency client.
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from urllib.parse import urlsplit


def read_consoles(url: str, key: str, count: int, seconds: float, query: str = "") -> dict:
    parts = urlsplit(url)
    request = (f"GET /v1/logs/stream{query} HTTP/1.1\r\nHost: {parts.hostname}:{parts.port}\r\n"
               f"x-gateway-api-key: {key}\r\naccept: text/event-stream\r\n\r\n").encode()
    selector = selectors.DefaultSelector()
    heads: dict[socket.socket, bytes] = {}
    stats = {"connections": count, "ok": 0, "refused": 0, "events": 0, "skipped_notices": 0, "bytes": 0,
             "closed_by_server": 0}
    for _ in range(count):
        sock = socket.create_connection((parts.hostname, parts.port), timeout=10)
        sock.sendall(request)
        sock.setblocking(False)
        heads[sock] = b""
        selector.register(sock, selectors.EVENT_READ)
    stop = {"now": False}

    def finish(signum, frame) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, finish)
    signal.signal(signal.SIGINT, finish)
    deadline = time.monotonic() + seconds
    while not stop["now"] and time.monotonic() < deadline and selector.get_map():
        for key_, _ in selector.select(timeout=0.2):
            sock = key_.fileobj
            try:
                data = sock.recv(1 << 16)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                data = b""
            if not data:
                stats["closed_by_server"] += 1
                selector.unregister(sock)
                sock.close()
                continue
            stats["bytes"] += len(data)
            stats["events"] += data.count(b"event: log\n")
            stats["skipped_notices"] += data.count(b"event: skipped\n")
            head = heads.get(sock)
            if head is not None:
                head += data
                if b"\r\n" in head:
                    stats["ok" if head.startswith(b"HTTP/1.1 200") else "refused"] += 1
                    del heads[sock]
                else:
                    heads[sock] = head
    for key_ in list(selector.get_map().values()):
        key_.fileobj.close()
    return stats


class Consoles:
    """``count`` console connections to ``url`` read by a child process; ``stop()`` returns its summary."""

    def __init__(self, url: str, key: str, count: int) -> None:
        script = os.path.abspath(__file__)
        self.proc = subprocess.Popen([sys.executable, script, "--url", url, "--key", key, "--count", str(count)],
                                     stdout=subprocess.PIPE, text=True)
        time.sleep(1.0)  # connected and past the first empty poll before any measurement starts

    def stop(self) -> dict:
        self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=30)
        try:
            return json.loads(out)
        except ValueError:
            return {"error": f"the console readers printed {out[:200]!r}"}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--count", type=int, default=100)
    p.add_argument("--seconds", type=float, default=3600.0)
    p.add_argument("--query", default="", help="e.g. ?status=5xx")
    args = p.parse_args()
    started = time.process_time()
    stats = read_consoles(args.url, args.key, args.count, args.seconds, args.query)
    stats["reader_cpu_s"] = round(time.process_time() - started, 2)
    print(json.dumps(stats), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
