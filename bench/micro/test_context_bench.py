"""Micro benchmark of headers -> RequestContext (gateway.http.context.build_context): compiled twin vs pure Python.

Run: ``python -m pytest bench/micro/test_context_bench.py --benchmark-enable -s``.
"""

from __future__ import annotations

import pytest

from gateway.http import context as pure_context
from tests.support.twins import compiled_twin

#: what the overhead benchmark's client sends: a bearer, the gateway key, a provider and a custom host
HEADERS = [
    (b"host", b"127.0.0.1:8787"), (b"content-type", b"application/json"), (b"authorization", b"Bearer sk-bench"),
    (b"x-gateway-api-key", b"gw-0123456789abcdef"), (b"x-gateway-provider", b"vendorA"),
    (b"x-gateway-custom-host", b"http://127.0.0.1:9797/v1"), (b"content-length", b"120"),
]


@pytest.mark.parametrize("twin", ["compiled", "pure"])
def test_build_context(benchmark, twin: str) -> None:
    module = compiled_twin("context") if twin == "compiled" else pure_context
    ctx = benchmark(module.build_context, HEADERS)
    assert ctx.provider == "vendorA" and ctx.bearer == "sk-bench"
    if benchmark.stats:
        print(f"\nbuild_context ({twin}): {benchmark.stats.stats.median * 1e6:.2f} us")
