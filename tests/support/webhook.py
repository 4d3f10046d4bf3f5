"""A guardrail webhook service for tests against the real gateway: a threaded HTTP server on 127.0.0.1.

``POST /verdict/true`` and ``/verdict/false`` answer ``{"verdict": ..., "explanation": ...}``; ``/slow/<ms>`` waits
that long first (then passes); ``/status/<code>`` answers that status. ``received`` holds each request's path and
JSON body, ``user_agents`` each request's ``User-Agent``, ``received_headers`` its path and headers (names
lower-cased).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class WebhookServer:
    def __init__(self) -> None:
        self.received: list[tuple[str, Any]] = []
        self.user_agents: list[str | None] = []
        self.received_headers: list[tuple[str, dict[str, str]]] = []
        received, user_agents, received_headers = self.received, self.user_agents, self.received_headers

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                return None

            def do_POST(self) -> None:  # http.server's name
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"null")
                received_headers.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
                received.append((self.path, body))
                user_agents.append(self.headers.get("user-agent"))
                parts = self.path.strip("/").split("/")
                status, doc = 200, {"verdict": True, "explanation": "the webhook passed it"}
                if parts[0] == "verdict":
                    verdict = parts[1] == "true"
                    doc = {"verdict": verdict, "explanation": f"the webhook said {verdict}"}
                elif parts[0] == "slow":
                    time.sleep(int(parts[1]) / 1000)
                elif parts[0] == "status":
                    status = int(parts[1])
                data = json.dumps(doc).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the gateway gave up waiting (a timeout test)
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> WebhookServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
