"""Micro benchmark of the lean exchange's request head (gateway.upstream.head.request_head): compiled twin vs pure.

Run: ``python -m pytest bench/micro/test_head_bench.py --benchmark-enable -s``.
"""

from __future__ import annotations

import pytest

from gateway.upstream import head as pure_head
from tests.support.twins import compiled_twin

#: what a vendorA chat request carries: the provider key, the content type and one forwarded header
HEADERS = {"authorization": "Bearer sk-bench-0123456789abcdef0123456789abcdef", "content-type": "application/json",
           "x-request-id": "req-0123456789"}
DEFAULTS = pure_head.TargetHead("api.vendora.example", 443, "https", "gateway/0.1.0", "gzip, deflate, br")


@pytest.mark.parametrize("twin", ["compiled", "pure"])
def test_request_head(benchmark, twin: str) -> None:
    module = compiled_twin("head") if twin == "compiled" else pure_head
    head = benchmark(module.request_head, "POST", "/v1/chat/completions", DEFAULTS, HEADERS, 212)
    assert head.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n") and head.endswith(b"Content-Length: 212\r\n\r\n")
    if benchmark.stats:
        print(f"\nrequest_head ({twin}): {benchmark.stats.stats.median * 1e6:.2f} us")
