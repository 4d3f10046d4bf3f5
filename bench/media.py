"""What relaying images and audio costs: a large base64 image answer and a streamed speech answer, direct to the mock
vs the floor proxy vs the gateway, interleaved at concurrency 1 (``overhead.latency``).

- ``image``: ``POST /v1/images/generations`` for a ``gpt-image-1`` 1536x1024 image: the mock answers about 2.1 MB
  of JSON, nearly all base64, which the gateway relays as it arrives without decoding (the floor reads it whole and
  sends it on: the same bytes).
- ``speech``: ``POST /v1/audio/speech`` for 50 words as WAV (about 0.96 MB), which the mock sends in 32 pieces
  5 ms apart; the gateway relays each piece as it arrives (time to first byte shows it), the floor reads the whole
  answer first (it streams only SSE).

Prints one JSON document (p50/p99 of each path, added over direct, first byte). Quick run:
``python bench/media.py --requests 30``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))

from overhead import latency
from procs import Stack
from rawhttp import Connection, build_request

SPEECH_SCENARIO = "bench-speech32"
IMAGE = {"model": "gpt-image-1", "prompt": "a lighthouse at dusk", "size": "1536x1024"}
SPEECH = {"model": "gpt-4o-mini-tts", "voice": "alloy", "response_format": "wav",
          "input": " ".join(["word"] * 50)}


def requests_for(stack: Stack, kind: str) -> dict[str, tuple[str, bytes]]:
    """Target name -> (url, request bytes) for one image or speech request."""
    body = msgspec.json.encode(IMAGE if kind == "image" else SPEECH)
    base = f"/s/{SPEECH_SCENARIO}" if kind == "speech" else ""
    path = base + ("/v1/images/generations" if kind == "image" else "/v1/audio/speech")
    route = "/v1/images/generations" if kind == "image" else "/v1/audio/speech"
    plain = {"content-type": "application/json", "authorization": "Bearer sk-bench"}
    gateway = {**plain, "x-gateway-api-key": stack.admin_key, "x-gateway-provider": "vendorA",
               "x-gateway-custom-host": f"{stack.mock.url}{base}/v1"}
    assert stack.floor is not None and stack.gateway is not None and stack.mock is not None
    out = {"direct": (stack.mock.url + path, plain), "floor": (stack.floor.url + path, plain),
           "gateway": (stack.gateway.url + route, gateway)}
    return {name: (url, build_request(url, body, headers)) for name, (url, headers) in out.items()}


def verify(reqs: dict[str, tuple[str, bytes]]) -> dict[str, int]:
    """One request per target: 200, and the body's size on the wire (the same for every path, give or take
    the chunk framing)."""
    sizes = {}
    for name, (url, raw) in reqs.items():
        conn = Connection(url)
        try:
            status, body = conn.fetch(raw)
        finally:
            conn.close()
        if status != 200:
            raise RuntimeError(f"{name} answered {status}: {body[:300]!r}")
        sizes[name] = len(body)
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--kinds", nargs="+", default=["image", "speech"], choices=["image", "speech"])
    args = parser.parse_args()
    report: dict = {"workers": 1}
    with Stack(log=lambda text: print(text, file=sys.stderr)) as stack:
        stack.scenario(SPEECH_SCENARIO, [{"chunks": 32, "chunk_delay_ms": 5}])
        stack.start_proxies(1)
        try:
            for kind in args.kinds:
                reqs = requests_for(stack, kind)
                report[kind] = {"body_bytes": verify(reqs), **latency(reqs, args.requests, args.warmup, True)}
        finally:
            stack.stop_proxies()
    print(msgspec.json.format(msgspec.json.encode(report)).decode())


if __name__ == "__main__":
    main()
