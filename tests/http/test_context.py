"""Header parsing into the RequestContext: spellings, types, forwarding and masking rules, the same from the pure
``build_context`` and its compiled twin."""

from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.http import context as pure_context
from gateway.http.context import RequestContext
from gateway.http.errors import InvalidRequest
from gateway.process_ids import TRACE_IDS
from tests.support.twins import compiled_twin


@pytest.fixture(params=["pure", "compiled"], autouse=True)
def twin(request: pytest.FixtureRequest) -> ModuleType:
    module = pure_context if request.param == "pure" else compiled_twin("context")
    _BUILD[0] = module.build_context
    return module


_BUILD = [pure_context.build_context]


def ctx(*pairs):
    return _BUILD[0]([(k.lower().encode(), v.encode()) for k, v in pairs])  # ASGI names are lower-case


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


@pytest.mark.parametrize(("name", "deep"), [
    ("x-gateway-metadata", '{"a":' * 5000 + "1" + "}" * 5000), ("x-gateway-metadata", "[" * 5000 + "]" * 5000),
    ("x-gateway-forward-headers", "[" * 5000 + "]" * 5000), ("x-gateway-sensitive-headers", "[" * 5000 + "]" * 5000)])
def test_json_nested_past_the_decoders_depth_is_a_400_naming_the_header(name, deep):
    with pytest.raises(InvalidRequest) as info:
        ctx((name, deep))
    assert info.value.param == name and info.value.status == 400


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


def test_header_lists_that_are_not_byte_pairs_fail_as_the_pure_one_does(twin):
    with pytest.raises(TypeError):
        twin.build_context([("x-gateway-provider", "vendorA")])
    assert twin.build_context([]).trace_id


# --- the twins agree on any header list --------------------------------------------------------------------------

_NAMES = sorted(pure_context._SETTERS) + [
    b"authorization", b"traceparent", b"x-cloudc-llm-request-type", b"host", b"x-gateway-", b"x-gateway-API-KEY",
    b"x-gateway-unknown", b"content-type"]
_VALUES = st.one_of(
    st.sampled_from([b"vendorA", b"Bearer sk-1", b"bearer  sk-2 ", b"true", b"nope", b"1500", b"-3", b'{"a": 1}',
                     b"[1]", b'["x-a", "X-B"]', b"x-a, x-b", b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                     b"\xe9t\xe9", b""]),
    st.binary(max_size=12))


def _state(build, headers):
    try:
        made = build(headers)
    except InvalidRequest as exc:
        return ("error", exc.status, exc.param, str(exc))
    generated = made.trace_id.startswith(TRACE_IDS.prefix) and len(made.trace_id) == 32
    return tuple("<generated>" if name == "trace_id" and generated else getattr(made, name)
                 for name in RequestContext.__slots__)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_NAMES), _VALUES), max_size=8))
def test_the_twins_read_any_header_list_alike(headers):
    compiled = compiled_twin("context")
    assert _state(compiled.build_context, headers) == _state(pure_context.build_context, headers)
