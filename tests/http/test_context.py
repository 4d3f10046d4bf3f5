"""Header parsing into the RequestContext: spellings, types, forwarding and masking rules."""

import pytest

from gateway.http.context import build_context
from gateway.http.errors import InvalidRequest


def ctx(*pairs):
    return build_context([(k.lower().encode(), v.encode()) for k, v in pairs])  # ASGI names are lower-case


@pytest.mark.parametrize("name", ["x-gateway-virtual-key", "x-gateway-virtual_key", "x-gateway-virtualKey"])
def test_three_spellings_of_a_gateway_header(name):
    assert ctx((name, "vk")).virtual_key == "vk"


def test_typed_headers():
    c = ctx(("x-gateway-metadata", '{"_user": "u"}'), ("x-gateway-request-timeout", "1500"),
            ("x-gateway-cache-force-refresh", "true"), ("x-gateway-cache-namespace", "ns"),
            ("x-gateway-cloudB-resource-name", "res"), ("X-cloudC-LLM-Request-Type", "shared"))
    assert c.metadata == {"_user": "u"} and c.request_timeout == 1500 and c.cache_force_refresh
    assert c.cache_namespace == "ns" and c.cloudB_resource_name == "res" and c.cloudC_llm_request_type == "shared"


@pytest.mark.parametrize("pair", [("x-gateway-metadata", "[1]"), ("x-gateway-request-timeout", "-1"),
                                  ("x-gateway-forward-headers", "[1, 2]")])
def test_bad_values_name_the_header(pair):
    with pytest.raises(InvalidRequest) as info:
        ctx(pair)
    assert info.value.param == pair[0]


def test_sensitive_headers_are_never_forwarded_even_when_listed():
    c = ctx(("x-gateway-forward-headers", "x-a, x-b, host, content-length"),
            ("x-gateway-sensitive-headers", "X-B"), ("x-a", "1"), ("x-b", "2"), ("host", "h"),
            ("content-length", "3"))
    assert c.forwarded() == {"x-a": "1"}


def test_traceparent_supplies_the_trace_id():
    c = ctx(("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
    assert c.trace_id == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert ctx(("x-gateway-trace-id", "mine")).trace_id == "mine"
    generated = {ctx().trace_id for _ in range(100)}
    assert len(generated) == 100 and all(len(t) == 32 for t in generated)


def test_bearer_token_is_taken_from_authorization():
    assert ctx(("authorization", "Bearer sk-abc")).bearer == "sk-abc"
