"""Helpers shared by the micro benchmarks: chat calls, network-sized stream chunks, stream rewriting, rates."""

from __future__ import annotations

from typing import Any

import msgspec

from gateway.http.context import RequestContext
from gateway.providers.base import CHAT, ProviderAdapter, UpstreamCall
from gateway.schema.chat import parse_chat
from gateway.schema.config import Config

encode = msgspec.json.encode
CHUNK_SIZE = 1400


def chat_call(target: Config, body: dict, stream: bool = False) -> UpstreamCall:
    """A chat call to ``target``'s provider carrying ``body``."""
    raw = encode(body)
    return UpstreamCall(CHAT, target, raw, parse_chat(raw), stream, RequestContext(), target.provider)


def run(coroutine: Any) -> Any:
    """Drive a coroutine that never suspends (an adapter's build_request that awaits nothing)."""
    try:
        coroutine.send(None)
    except StopIteration as stop:
        return stop.value
    raise RuntimeError("build_request suspended")


def chunked(raw: bytes, size: int = CHUNK_SIZE) -> list[bytes]:
    """``raw`` cut into network-sized chunks."""
    return [raw[i: i + size] for i in range(0, len(raw), size)]


def rewrite(adapter: ProviderAdapter, call: UpstreamCall, chunks: list[bytes]) -> int:
    """Feed ``chunks`` through the adapter's stream transformer; the number of events it gave out."""
    transformer = adapter.stream(call)
    out = 0
    for chunk in chunks:
        out += len(transformer.feed(chunk))
    return out + len(transformer.close())


def report(benchmark: Any, events: int) -> None:
    """Record (``extra_info["events_per_s"]``) and print the rate of a benchmark that handles ``events`` a round."""
    stats = getattr(benchmark, "stats", None)
    if stats is None:  # benchmarks disabled: the function ran once, untimed
        return
    rate = events / stats.stats.mean
    benchmark.extra_info["events_per_s"] = round(rate)
    print(f"\n{benchmark.name}: {rate:,.0f} events/s")
