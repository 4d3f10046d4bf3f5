"""What a cached answer costs through the gateway, against a direct upstream call, in one interleaved run.

Starts ``gateway mock-upstream`` and ``gateway serve`` (one worker, default settings; ``--redis URL`` puts the
state store in Redis) and measures at concurrency 1, one keep-alive connection per path, paths interleaved request
by request with the order rotating each round:

- ``direct``: a chat request to the mock;
- ``gateway``: the same through the gateway without a cache (its plain pass-through);
- ``hit``: the same through the gateway with ``cache.mode: simple``, answered from the cache;
- ``stream_hit``: the streamed request answered from the cache (replayed as SSE);
- ``semantic_hit``: a paraphrase with ``cache.mode: semantic``: an exact miss, one embedding of the packaged
  model, a search of the worker's index and the cached answer (``SEMANTIC_HIT``).

Prints one JSON document (progress on stderr): p50/p99/mean ms per path, and each cache path's p50 against the
direct call and the pass-through. Quick run: ``python bench/cache.py --requests 300``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))

from overhead import busy_cpus, summary_ms
from procs import Stack
from rawhttp import Connection, build_request

PATHS = ("direct", "gateway", "hit", "stream_hit", "semantic_hit")
QUESTION = "How do I reverse a list in Python?"
SEMANTIC_QUESTION = "What is the capital of France?"  # not QUESTION: its exact entry would answer it first
PARAPHRASE = "What's the capital city of France?"


def chat(question: str, stream: bool = False) -> bytes:
    body = {"model": "gpt-bench", "max_tokens": 64, "messages": [{"role": "user", "content": question}]}
    return msgspec.json.encode({**body, "stream": True} if stream else body)


def requests_for(stack: Stack) -> dict[str, tuple[str, bytes]]:
    mock = f"{stack.mock.url}/v1"
    plain = {"content-type": "application/json", "authorization": "Bearer sk-bench"}
    url = stack.gateway.url + "/v1/chat/completions"

    def through(cache: str | None, probe: bool = False) -> dict[str, str]:
        config: dict = {"provider": "vendorA", "api_key": "sk-bench", "custom_host": mock}
        if cache:
            config["cache"] = {"mode": cache}
        if probe:  # a 446 is never stored: asks whether the cache answers without adding an entry
            config["output_guardrails"] = [{"deny": True, "default.contains": {"words": ["~"], "operator": "all"}}]
        return {"content-type": "application/json", "x-gateway-api-key": stack.admin_key,
                "x-gateway-config": json.dumps(config)}

    return {
        "direct": (mock + "/chat/completions", build_request(mock + "/chat/completions", chat(QUESTION), plain)),
        "gateway": (url, build_request(url, chat(QUESTION), through(None))),
        "hit": (url, build_request(url, chat(QUESTION), through("simple"))),
        "stream_hit": (url, build_request(url, chat(QUESTION, True), through("simple"))),
        "semantic_hit": (url, build_request(url, chat(PARAPHRASE), through("semantic"))),
        "semantic_prime": (url, build_request(url, chat(SEMANTIC_QUESTION), through("semantic"))),
        "semantic_probe": (url, build_request(url, chat(PARAPHRASE), through("semantic", probe=True))),
    }


def fetch(url: str, raw: bytes) -> tuple[int, bytes]:
    conn = Connection(url)
    try:
        return conn.fetch(raw)
    finally:
        conn.close()


def prime(reqs: dict[str, tuple[str, bytes]], log) -> None:
    """Store the answers the cache paths hit, and wait until the paraphrase is a semantic hit."""
    for name in ("hit", "semantic_prime"):
        status, body = fetch(*reqs[name])
        if status != 200:
            raise RuntimeError(f"priming {name}: {status} {body[:300]!r}")
    deadline = time.monotonic() + 60
    while True:
        conn = Connection(reqs["semantic_probe"][0])
        try:
            conn.sock = conn._open()
            conn.sock.sendall(reqs["semantic_probe"][1])
            head = conn.sock.recv(65536)
        finally:
            conn.close()
        if b"x-gateway-cache-status: SEMANTIC_HIT" in head:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"the paraphrase never became a semantic hit: {head[:400]!r}")
        time.sleep(0.2)
    log("primed: the cached and the semantic answers are in place")


def check_statuses(reqs: dict[str, tuple[str, bytes]]) -> dict[str, str]:
    found = {}
    for name in ("hit", "stream_hit", "semantic_hit"):
        conn = Connection(reqs[name][0])
        try:
            conn.sock = conn._open()
            conn.sock.sendall(reqs[name][1])
            head = conn.sock.recv(65536).split(b"\r\n\r\n", 1)[0].decode("latin-1").lower()
        finally:
            conn.close()
        found[name] = head.split("x-gateway-cache-status: ", 1)[1].split("\r\n", 1)[0].upper()
    return found


def latency(reqs: dict[str, tuple[str, bytes]], count: int, warmup: int) -> dict:
    conns = {name: Connection(reqs[name][0]) for name in PATHS}
    totals: dict[str, list[int]] = {name: [] for name in PATHS}
    errors = dict.fromkeys(PATHS, 0)
    try:
        for i in range(warmup + count):
            shift = i % len(PATHS)
            for name in PATHS[shift:] + PATHS[:shift]:
                status, _, total_ns = conns[name].send(reqs[name][1])
                errors[name] += status != 200
                if i >= warmup:
                    totals[name].append(total_ns)
    finally:
        for conn in conns.values():
            conn.close()
    lat = {name: summary_ms(totals[name]) for name in PATHS}
    return {
        "latency_ms": lat,
        "p50_minus_direct_ms": {n: round(lat[n]["p50"] - lat["direct"]["p50"], 4) for n in PATHS[1:]},
        "p50_minus_gateway_ms": {n: round(lat[n]["p50"] - lat["gateway"]["p50"], 4) for n in PATHS[2:]},
        "errors": errors,
        "requests": count,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--requests", type=int, default=2000, help="measured requests per path")
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--redis", default=None, help="a Redis URL for the state store (default: embedded)")
    args = parser.parse_args(argv)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    env = {}
    if args.redis:
        env = {"GATEWAY_REDIS_URL": args.redis, "GATEWAY_REDIS_KEY_PREFIX": f"gwbench:{os.getpid()}:"}
    before = busy_cpus()
    with Stack(log, gateway_env=env) as stack:
        stack.start_proxies(1, floor=False)
        reqs = requests_for(stack)
        prime(reqs, log)
        statuses = check_statuses(reqs)
        log(f"cache statuses: {statuses}")
        result = latency(reqs, args.requests, args.warmup)
        result["statuses"] = statuses
    result["store"] = "redis" if args.redis else "embedded"
    result["busy_cpus_before"] = before
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
