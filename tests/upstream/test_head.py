"""The request head the lean exchange writes (``gateway.upstream.head`` and its compiled twin
``gateway._speedups.head``): both twins give the same bytes; CR, LF or NUL in a value, a name that is not a token
and a path with spaces are refused naming the header (and the gateway answers 400 naming it); a request's own Host,
User-Agent and Accept-Encoding replace the defaults; Content-Length, Transfer-Encoding and Connection are the
exchange's own; a hypothesis run holds the twins to the same bytes (or the same refusal) for random headers."""

from __future__ import annotations

from types import ModuleType

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.upstream import head as pure
from gateway.upstream.head import HeaderRefused, TargetHead
from gateway.upstream.lean import LeanTransport
from tests.support.asgi import AppClient, in_process
from tests.support.headers import headers_for
from tests.support.lean import ScriptedConnection, ScriptedUpstream, answer
from tests.support.twins import compiled_twin

DEFAULTS = TargetHead("api.example", 443, "https", "gateway/9.9", "gzip, deflate, br")
TOKEN_EXTRA = "!#$%&'*+-.^_`|~"
TOKEN = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789" + TOKEN_EXTRA),
                min_size=1, max_size=20)


@pytest.fixture(params=["pure", "compiled"])
def twin(request: pytest.FixtureRequest) -> ModuleType:
    return pure if request.param == "pure" else compiled_twin("head")


def test_a_post_head_carries_its_request_line_headers_defaults_and_length(twin):
    head = twin.request_head("POST", "/v1/chat/completions?x=1", DEFAULTS,
                             {"Authorization": "Bearer sk-1", "content-type": "application/json"}, 17)
    assert head == (b"POST /v1/chat/completions?x=1 HTTP/1.1\r\n"
                    b"Authorization: Bearer sk-1\r\ncontent-type: application/json\r\n"
                    b"Host: api.example\r\nUser-Agent: gateway/9.9\r\nAccept-Encoding: gzip, deflate, br\r\n"
                    b"Content-Length: 17\r\n\r\n")


@pytest.mark.parametrize(("method", "length", "sized"), [
    ("GET", 0, False), ("DELETE", 0, False), ("POST", 0, True), ("PUT", 0, True), ("GET", 3, True)])
def test_content_length_is_written_for_a_body_or_a_method_that_carries_one(twin, method, length, sized):
    head = twin.request_head(method, "/", DEFAULTS, {}, length)
    assert (b"Content-Length: %d\r\n" % length in head) is sized


@pytest.mark.parametrize(("host", "port", "scheme", "authority"), [
    ("api.example", 443, "https", b"api.example"), ("api.example", 80, "http", b"api.example"),
    ("api.example", 8443, "https", b"api.example:8443"), ("::1", 8080, "http", b"[::1]:8080"),
    ("[::1]", 443, "https", b"[::1]"), ("b\u00fccher.example", 443, "https", b"xn--bcher-kva.example")])
def test_the_default_host_line_names_the_authority(host, port, scheme, authority):
    assert TargetHead(host, port, scheme, "a", "gzip").host == b"Host: " + authority + b"\r\n"


def test_the_requests_own_host_user_agent_and_accept_encoding_replace_the_defaults(twin):
    head = twin.request_head("POST", "/", DEFAULTS, {"HOST": "other.example", "user-agent": "sdk/1.0",
                                                     "Accept-Encoding": "identity"}, 2)
    assert head.count(b"Host:") + head.count(b"HOST:") == 1 and b"HOST: other.example\r\n" in head
    assert b"user-agent: sdk/1.0\r\n" in head and b"gateway/9.9" not in head
    assert b"Accept-Encoding: identity\r\n" in head and b"gzip" not in head


def test_the_requests_framing_headers_are_dropped_for_the_exchanges_own(twin):
    head = twin.request_head("POST", "/", DEFAULTS, {"Content-Length": "999", "transfer-encoding": "chunked",
                                                     "CONNECTION": "upgrade", "x-kept": "1"}, 5)
    assert b"999" not in head and b"chunked" not in head and b"upgrade" not in head
    assert head.endswith(b"x-kept: 1\r\nHost: api.example\r\nUser-Agent: gateway/9.9\r\n"
                         b"Accept-Encoding: gzip, deflate, br\r\nContent-Length: 5\r\n\r\n")


@pytest.mark.parametrize("value", ["a\rb", "a\nb", "a\x00b", "sk-1\r\nx-injected: 1", "\n"])
def test_cr_lf_or_nul_in_a_value_is_refused_naming_the_header(twin, value):
    with pytest.raises(HeaderRefused) as refused:
        twin.request_head("POST", "/", DEFAULTS, {"x-fine": "ok", "X-Broken": value}, 0)
    assert refused.value.name == "X-Broken"
    assert "'X-Broken'" in str(refused.value) and "CR, LF or NUL" in str(refused.value)


@pytest.mark.parametrize("name", ["", "x broken", "x:colon", "x\r\ny", "caf\u00e9", "a/b", "x\x00", "(x)",
                                  "\udc80", "x\ud800"])
def test_a_name_that_is_not_a_token_is_refused(twin, name):
    with pytest.raises(HeaderRefused) as refused:
        twin.request_head("POST", "/", DEFAULTS, {name: "v"}, 0)
    assert refused.value.name == name and "is not a valid header name" in str(refused.value)


@pytest.mark.parametrize("path", ["/a b", "/a\r\nx: y", "/\x00"])
def test_a_path_with_spaces_or_breaks_is_refused(twin, path):
    with pytest.raises(HeaderRefused) as refused:
        twin.request_head("GET", path, DEFAULTS, {}, 0)
    assert refused.value.name == ":path"


def test_tabs_and_non_ascii_values_are_written_as_utf_8(twin):
    head = twin.request_head("POST", "/", DEFAULTS, {"x-note": "caf\u00e9\tok"}, 0)
    assert b"x-note: caf\xc3\xa9\tok\r\n" in head


HEADERS = st.dictionaries(
    st.one_of(TOKEN, st.sampled_from(["Host", "user-agent", "ACCEPT-ENCODING", "Content-Length",
                                      "transfer-encoding", "Connection"]),
              st.text(st.characters(exclude_categories=()), max_size=6)),
    st.one_of(st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40), st.text(max_size=10)),
    max_size=12)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(method=st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH"]), headers=HEADERS,
       length=st.integers(0, 1 << 40), path=st.sampled_from(["/", "/v1/chat/completions?a=b&c=%20"]))
def test_both_twins_write_the_same_bytes_or_refuse_the_same_header(method, headers, length, path):
    compiled = compiled_twin("head")
    outcomes = []
    for twin in (pure, compiled):
        try:
            outcomes.append(twin.request_head(method, path, DEFAULTS, headers, length))
        except HeaderRefused as refused:
            outcomes.append(("refused", refused.name, str(refused)))
        except UnicodeEncodeError:  # a lone surrogate outside surrogateescape's range: neither can write it
            outcomes.append("unencodable")
    assert outcomes[0] == outcomes[1]


async def test_the_gateway_answers_400_naming_a_forwarded_header_that_would_break_the_head():
    """An ASGI server refuses such a header from a client itself; the app, driven directly, gets it and refuses it
    before anything is sent upstream."""

    async def serve(conn: ScriptedConnection) -> None:
        while await conn.request():
            await conn.send(answer(200, b"{}", "content-type: application/json"))

    async with ScriptedUpstream(serve) as upstream, in_process({"GATEWAY_LOG_FILE": "off"}) as app:
        assert isinstance(app.runtime.exchange.transport, LeanTransport)
        headers = headers_for(upstream.url + "/v1", **{"x-gateway-forward-headers": "x-trace-tag",
                                                       "x-trace-tag": "a\x00b"})
        resp = await AppClient(app, lifespan=False).request(
            "POST", "/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "hi"}]}, headers)
    assert resp.status == 400, resp.text
    error = msgspec.json.decode(resp.body)["error"]
    assert error["param"] == "x-trace-tag" and "x-trace-tag" in error["message"]
    assert "CR, LF or NUL" in error["message"]
    assert upstream.requests == []
