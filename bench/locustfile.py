"""Locust scenarios against a running gateway that routes to the mock upstream (``gateway mock-upstream``).

Environment:

- ``BENCH_GATEWAY_URL`` (default ``http://127.0.0.1:8787``; locust's ``--host`` wins when given);
- ``BENCH_ADMIN_KEY`` (else ``GATEWAY_ADMIN_KEY``): the gateway key sent as ``x-gateway-api-key``;
- ``BENCH_MOCK_URL`` (default ``http://127.0.0.1:9797``): the mock, as the gateway reaches it (custom host);
- ``BENCH_THINK_S`` (default 0): each user waits a random 0..N seconds between requests (0: closed loop);
- ``BENCH_FINAL_CSV``: when set, the final request stats are written there in the format of ``--csv``'s
  ``_stats.csv`` after the users stop (``--csv`` itself is rewritten once a second, so it can miss the last second).

User classes (pick with locust's positional class names; ``bench/load.sh --scenario``):

- ``ShortChatUser``: a short non-streamed chat;
- ``StreamChatUser``: a streamed chat, read to ``data: [DONE]`` (the timing is the whole stream's);
- ``FallbackUser``: an ``x-gateway-config`` with strategy fallback whose first target is a mock scenario that
  always answers 503 and whose second is the mock: every request makes two upstream calls and must be answered
  by ``config.targets[1]``;
- ``CacheUser``: the same request again and again with ``cache: {mode: simple}``: after the first, cache hits
  (a response without ``x-gateway-cache-status: HIT`` past the first few counts as a failure);
- ``MixedUser``: all of the above in one user, weighted 6 short : 2 stream : 1 fallback : 2 cache.
"""

from __future__ import annotations

import csv
import json
import os
import random
import urllib.request

from locust import FastHttpUser, between, constant, events, task
from locust.stats import PERCENTILES_TO_REPORT, StatsCSV

GATEWAY_URL = os.environ.get("BENCH_GATEWAY_URL", "http://127.0.0.1:8787")
ADMIN_KEY = os.environ.get("BENCH_ADMIN_KEY") or os.environ.get("GATEWAY_ADMIN_KEY", "")
MOCK_URL = os.environ.get("BENCH_MOCK_URL", "http://127.0.0.1:9797").rstrip("/")
THINK_S = float(os.environ.get("BENCH_THINK_S", "0") or 0)
FAILING_SCENARIO = "load-always-503"
PATH = "/v1/chat/completions"

QUESTIONS = (
    "What is the capital of France?",
    "Summarise the plot of Hamlet in one sentence.",
    "Give me three names for a grey cat.",
    "Translate 'good morning' into Spanish.",
)

SHORT_HEADERS = {
    "x-gateway-api-key": ADMIN_KEY,
    "x-gateway-provider": "vendorA",
    "x-gateway-custom-host": f"{MOCK_URL}/v1",
    "authorization": "Bearer sk-load-test",
    "content-type": "application/json",
}
FALLBACK_CONFIG = json.dumps({
    "strategy": {"mode": "fallback"},
    "targets": [
        {"provider": "vendorA", "custom_host": f"{MOCK_URL}/s/{FAILING_SCENARIO}/v1"},
        {"provider": "vendorA", "custom_host": f"{MOCK_URL}/v1"},
    ],
}, separators=(",", ":"))
CACHE_CONFIG = json.dumps({"cache": {"mode": "simple"}, "provider": "vendorA", "custom_host": f"{MOCK_URL}/v1"},
                          separators=(",", ":"))
CONFIG_HEADERS = {
    "x-gateway-api-key": ADMIN_KEY,
    "authorization": "Bearer sk-load-test",
    "content-type": "application/json",
}
CACHED_BODY = json.dumps({"model": "gpt-load", "messages": [{"role": "user", "content": QUESTIONS[0]}]})


def chat_body(stream: bool = False) -> str:
    return json.dumps({"model": "gpt-load", "max_tokens": 64, "stream": stream,
                       "messages": [{"role": "system", "content": "You are concise."},
                                    {"role": "user", "content": random.choice(QUESTIONS)}]})


@events.test_start.add_listener
def script_failing_target(environment, **_kwargs) -> None:
    """The fallback scenario's first target: a mock scenario whose every answer is a 503."""
    body = json.dumps({"steps": [{"status": 503, "message": "scripted outage for the fallback scenario"}]})
    req = urllib.request.Request(f"{MOCK_URL}/_mock/scenarios/{FAILING_SCENARIO}", data=body.encode(),
                                 headers={"content-type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=10) as resp:
        if resp.status != 200:
            raise RuntimeError(f"the mock at {MOCK_URL} refused the scenario ({resp.status})")


_environment: list = []


@events.init.add_listener
def keep_environment(environment, **_kwargs) -> None:
    _environment.append(environment)


@events.quit.add_listener
def write_final_stats(exit_code: int, **_kwargs) -> None:
    """Fired after the users stopped: the exact final numbers for bench/load.sh."""
    path = os.environ.get("BENCH_FINAL_CSV")
    if path and _environment:
        with open(path, "w", newline="") as f:
            StatsCSV(_environment[0], PERCENTILES_TO_REPORT).requests_csv(csv.writer(f))


class GatewayUser(FastHttpUser):
    abstract = True
    host = GATEWAY_URL
    wait_time = between(0, THINK_S) if THINK_S > 0 else constant(0)
    #: cached requests this user sent (its first few may come before the first answer is stored)
    cached = 0

    def short_chat(self) -> None:
        with self.client.post(PATH, data=chat_body(), headers=SHORT_HEADERS, name="chat",
                              catch_response=True) as resp:
            if resp.status_code != 200:
                resp.failure(f"status {resp.status_code}: {resp.text[:200]}")
            elif b'"chat.completion"' not in resp.content:
                resp.failure("not a chat.completion")

    def stream_chat(self) -> None:
        # stream=False: locust reads the whole chunked stream before timing stops
        with self.client.post(PATH, data=chat_body(stream=True), headers=SHORT_HEADERS, name="chat stream",
                              catch_response=True) as resp:
            body = resp.content or b""
            if resp.status_code != 200:
                resp.failure(f"status {resp.status_code}: {body[:200]!r}")
            elif not body.rstrip().endswith(b"data: [DONE]") or body.count(b"chat.completion.chunk") < 2:
                resp.failure("stream did not end with data: [DONE] after chunks")

    def fallback_chat(self) -> None:
        headers = {**CONFIG_HEADERS, "x-gateway-config": FALLBACK_CONFIG}
        with self.client.post(PATH, data=chat_body(), headers=headers, name="chat fallback",
                              catch_response=True) as resp:
            used = resp.headers.get("x-gateway-last-used-option-index") if resp.headers else None
            if resp.status_code != 200:
                resp.failure(f"status {resp.status_code}: {resp.text[:200]}")
            elif used != "config.targets[1]":
                resp.failure(f"answered by {used!r}, expected config.targets[1]")

    def cached_chat(self) -> None:
        headers = {**CONFIG_HEADERS, "x-gateway-config": CACHE_CONFIG}
        with self.client.post(PATH, data=CACHED_BODY, headers=headers, name="chat cache",
                              catch_response=True) as resp:
            self.cached += 1
            if resp.status_code != 200:
                resp.failure(f"status {resp.status_code}: {resp.text[:200]}")
            elif self.cached > 3 and resp.headers.get("x-gateway-cache-status") != "HIT":
                resp.failure(f"cache status {resp.headers.get('x-gateway-cache-status')!r}, expected HIT")


class ShortChatUser(GatewayUser):
    @task
    def chat(self) -> None:
        self.short_chat()


class StreamChatUser(GatewayUser):
    @task
    def stream(self) -> None:
        self.stream_chat()


class FallbackUser(GatewayUser):
    @task
    def fallback(self) -> None:
        self.fallback_chat()


class CacheUser(GatewayUser):
    @task
    def cache(self) -> None:
        self.cached_chat()


class MixedUser(GatewayUser):
    @task(6)
    def chat(self) -> None:
        self.short_chat()

    @task(2)
    def stream(self) -> None:
        self.stream_chat()

    @task(1)
    def fallback(self) -> None:
        self.fallback_chat()

    @task(2)
    def cache(self) -> None:
        self.cached_chat()
