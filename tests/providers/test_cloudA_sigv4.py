"""cloudA SigV4 signing: AWS's published test-suite vectors, path double-encoding, verification and the adapter."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.http.errors import InvalidRequest
from gateway.providers.base import UpstreamCall
from gateway.providers.cloudA import CloudAAdapter, sigv4
from gateway.schema.chat import parse_chat

# AWS Signature Version 4 test suite: shared inputs of every case.
SUITE_KEY = sigv4.Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
SUITE_TIME = "20150830T123600Z"
SUITE_HOST = "example.amazonaws.com"
SUITE_SCOPE = "20150830/us-east-1/service/aws4_request"
SUITE_TOKEN = (
    "AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPfIeoIYRqTflfKD8Y"
    "UuwthAx7mSEI/qkPpKPi/kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7WZ0wq5VSXDvp75YU9HFvlRd8Tx6q6fE"
    "8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+scqKmlzm8FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQwj2"
    "ICCR/oLxBA=="
)
EMPTY = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

# get-vanilla: canonical request, string to sign and signature as published.
GET_VANILLA_CREQ = f"GET\n/\n\nhost:{SUITE_HOST}\nx-amz-date:{SUITE_TIME}\n\nhost;x-amz-date\n{EMPTY}"
GET_VANILLA_STS = (f"AWS4-HMAC-SHA256\n{SUITE_TIME}\n{SUITE_SCOPE}\n"
                   "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63")
GET_VANILLA_SIG = "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
# post-vanilla
POST_VANILLA_CREQ = f"POST\n/\n\nhost:{SUITE_HOST}\nx-amz-date:{SUITE_TIME}\n\nhost;x-amz-date\n{EMPTY}"
POST_VANILLA_STS = (f"AWS4-HMAC-SHA256\n{SUITE_TIME}\n{SUITE_SCOPE}\n"
                    "553f88c9e4d10fc9e109e2aeb65f030801b70c2f6468faca261d401ae622fc87")
POST_VANILLA_SIG = "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"
# post-x-www-form-urlencoded: a body and a signed content-type
FORM_CREQ = ("POST\n/\n\ncontent-type:application/x-www-form-urlencoded\nhost:example.amazonaws.com\n"
             "x-amz-date:20150830T123600Z\n\ncontent-type;host;x-amz-date\n"
             "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e")
FORM_STS = (f"AWS4-HMAC-SHA256\n{SUITE_TIME}\n{SUITE_SCOPE}\n"
            "42a5e5bb34198acb3e84da4f085bb7927f2bc277ca766e6d19c73c2154021281")
FORM_SIG = "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a"

# (case, method, path as sent, query, signature)
PATH_CASES = [
    ("get-vanilla", "GET", "/", "", GET_VANILLA_SIG),
    ("post-vanilla", "POST", "/", "", POST_VANILLA_SIG),
    ("get-vanilla-query-order-key-case", "GET", "/", "Param2=value2&Param1=value1",
     "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"),
    ("get-utf8", "GET", "/ሴ", "", "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85"),
    ("get-space", "GET", "/example space/", "", "652487583200325589f1fba4c7e578f72c47cb61beeca81406b39ddec1366741"),
    ("get-unreserved", "GET", "/-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", "",
     "07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f"),
]


def suite_headers(method: str, path: str = "/", query: str = "", **kw) -> dict[str, str]:
    return sigv4.sign(method, SUITE_HOST, path, kw.pop("body", b""), kw.pop("credentials", SUITE_KEY), "us-east-1",
                      "service", query=query, when=SUITE_TIME, content_sha256=False, **kw)


@pytest.mark.parametrize(("creq", "sts", "sig", "method"), [
    (GET_VANILLA_CREQ, GET_VANILLA_STS, GET_VANILLA_SIG, "GET"),
    (POST_VANILLA_CREQ, POST_VANILLA_STS, POST_VANILLA_SIG, "POST"),
])
def test_vanilla_canonical_request_string_to_sign_and_signature_match_the_suite(creq, sts, sig, method):
    canonical, signed = sigv4.canonical_request(method, "/", "", {"Host": SUITE_HOST, "X-Amz-Date": SUITE_TIME},
                                                EMPTY)
    assert canonical == creq and signed == "host;x-amz-date"
    assert sigv4.string_to_sign(SUITE_TIME, SUITE_SCOPE, canonical) == sts
    key = sigv4.signing_key(SUITE_KEY.secret_access_key, "20150830", "us-east-1", "service")
    assert sigv4.signature(key, sts) == sig
    assert suite_headers(method)["authorization"] == (
        f"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/{SUITE_SCOPE}, SignedHeaders=host;x-amz-date, Signature={sig}")


def test_form_post_with_body_and_content_type_matches_the_suite():
    body = b"Param1=value1"
    canonical, _ = sigv4.canonical_request(
        "POST", "/", "", {"Content-Type": "application/x-www-form-urlencoded", "Host": SUITE_HOST,
                          "X-Amz-Date": SUITE_TIME}, hashlib.sha256(body).hexdigest())
    assert canonical == FORM_CREQ
    assert sigv4.string_to_sign(SUITE_TIME, SUITE_SCOPE, canonical) == FORM_STS
    headers = suite_headers("POST", body=body, headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert headers["authorization"].endswith(
        f"SignedHeaders=content-type;host;x-amz-date, Signature={FORM_SIG}")


@pytest.mark.parametrize(("case", "method", "path", "query", "sig"), PATH_CASES, ids=[c[0] for c in PATH_CASES])
def test_suite_paths_and_queries_sign_as_published(case, method, path, query, sig):
    assert suite_headers(method, path, query)["authorization"].endswith(f"Signature={sig}")


def test_session_token_is_signed_like_post_sts_header_before():
    headers = suite_headers("POST", credentials=sigv4.Credentials(*SUITE_KEY[:2], SUITE_TOKEN))
    assert headers["x-amz-security-token"] == SUITE_TOKEN
    assert headers["authorization"] == (
        f"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/{SUITE_SCOPE}, SignedHeaders=host;x-amz-date;x-amz-security-token, "
        "Signature=85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead")


def test_already_encoded_model_path_is_encoded_once_more():
    sent = "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse"
    assert sigv4.canonical_uri(sent) == "/model/anthropic.claude-3-5-sonnet-20240620-v1%253A0/converse"
    arn = "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123%3Ainference-profile%2Fus.x/converse-stream"
    assert sigv4.canonical_uri(arn) == (
        "/model/arn%253Aaws%253Abedrock%253Aus-east-1%253A123%253Ainference-profile%252Fus.x/converse-stream")


def test_paths_are_normalised_for_non_s3_services():
    assert sigv4.canonical_uri("//example//") == "/example/"
    assert sigv4.canonical_uri("/a/./b/../c") == "/a/c"
    assert sigv4.canonical_uri("") == "/"


def test_header_values_are_trimmed_and_inner_spaces_collapsed():
    block, signed = sigv4.canonical_headers({"My-Header1": "  value1  ", "My-Header2": '"a   b   c"', "HOST": "h"})
    assert block == 'host:h\nmy-header1:value1\nmy-header2:"a b c"\n'
    assert signed == "host;my-header1;my-header2"


def test_sign_adds_payload_hash_and_token_and_signs_every_header_it_returns():
    body = b'{"messages":[]}'
    headers = sigv4.sign("POST", "bedrock-runtime.eu-west-1.amazonaws.com", "/model/m/converse", body,
                         sigv4.Credentials("AKID", "secret", "tok"), "eu-west-1", "bedrock",
                         headers={"Content-Type": "application/json"})
    assert headers["x-amz-content-sha256"] == hashlib.sha256(body).hexdigest()
    assert headers["x-amz-security-token"] == "tok"
    parsed = sigv4.parse_authorization(headers["authorization"])
    assert parsed.service == "bedrock" and parsed.region == "eu-west-1"
    assert set(parsed.signed_headers) == set(headers) - {"authorization"}
    assert sigv4.verify("POST", "/model/m/converse", "", headers, body, "secret", parsed)


@pytest.mark.parametrize("tamper", ["body", "secret", "host", "date", "path", "content-type"])
def test_verify_refuses_any_change_to_what_was_signed(tamper):
    body = b'{"a":1}'
    path = "/model/a%3Ab/converse"
    headers = sigv4.sign("POST", "127.0.0.1:9000", path, body, sigv4.Credentials("AKID", "secret"), "us-east-1",
                         "bedrock", headers={"content-type": "application/json"})
    parsed = sigv4.parse_authorization(headers["authorization"])
    secret = "secret"
    if tamper == "body":
        body = b'{"a":2}'
    elif tamper == "secret":
        secret = "other"
    elif tamper == "host":
        headers["host"] = "127.0.0.1"
    elif tamper == "date":
        seconds = "58Z" if headers["x-amz-date"].endswith("59Z") else "59Z"  # always a different second
        headers["x-amz-date"] = headers["x-amz-date"][:-3] + seconds
    elif tamper == "path":
        path = "/model/a:b/converse"
    else:
        headers["content-type"] = "text/plain"
    assert not sigv4.verify("POST", path, "", headers, body, secret, parsed)


@pytest.mark.parametrize("value", ["", "Bearer x", "AWS4-HMAC-SHA256 Credential=AK/2015/us/svc/aws4_request",
                                   "AWS4-HMAC-SHA256 Credential=AK/x, SignedHeaders=host, Signature=ab"])
def test_malformed_authorization_headers_are_not_parsed(value):
    assert sigv4.parse_authorization(value) is None


def test_amz_date_is_the_basic_iso_format_in_utc():
    assert sigv4.amz_date(1440938160) == SUITE_TIME
    assert len(sigv4.amz_date()) == 16


segment = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="/"), min_size=1, max_size=20)


@settings(max_examples=200, deadline=None)
@given(st.lists(segment, min_size=1, max_size=4), st.binary(max_size=64))
def test_any_sent_path_round_trips_through_sign_and_verify(segments, body):
    segments = [s for s in segments if s not in (".", "..")] or ["x"]
    path = "/" + "/".join(sigv4.uri_encode(s) for s in segments)
    headers = sigv4.sign("POST", "h:1", path, body, sigv4.Credentials("AK", "sk"), "us-east-1", "bedrock")
    parsed = sigv4.parse_authorization(headers["authorization"])
    assert sigv4.verify("POST", path, "", headers, body, "sk", parsed)
    assert sigv4.canonical_uri(path) == "/" + "/".join(sigv4.uri_encode(sigv4.uri_encode(s)) for s in segments)


# --- the adapter's signing ------------------------------------------------------------------------------------

class Target:
    provider = "cloudA"
    custom_host = None
    cloudA_access_key_id = "AKIDMOCKEXAMPLE"
    cloudA_secret_access_key = "secret"
    cloudA_session_token = None
    cloudA_region = None
    strict_vendorA_compliance = None

    def __init__(self, **kw):
        self.__dict__.update(kw)


def call_for(target: Target, model: str = "anthropic.claude-3-5-sonnet-20240620-v1:0", stream: bool = False):
    body = ('{"model":"%s","messages":[{"role":"user","content":"hi"}]%s}'
            % (model, ',"stream":true' if stream else "")).encode()
    return UpstreamCall("chat", target, body, parse_chat(body), stream, None, "cloudA")


async def test_default_url_uses_the_region_and_encodes_the_model_id():
    request = await CloudAAdapter().build_request(call_for(Target(cloudA_region="eu-central-1")))
    assert request.url == ("https://bedrock-runtime.eu-central-1.amazonaws.com/model/"
                           "anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse")
    assert request.headers["host"] == "bedrock-runtime.eu-central-1.amazonaws.com"
    parsed = sigv4.parse_authorization(request.headers["authorization"])
    assert (parsed.region, parsed.service) == ("eu-central-1", "bedrock")


async def test_region_defaults_to_us_east_1_and_stream_uses_converse_stream():
    request = await CloudAAdapter().build_request(call_for(Target(), model="us.meta/x", stream=True))
    assert request.url == "https://bedrock-runtime.us-east-1.amazonaws.com/model/us.meta%2Fx/converse-stream"


async def test_custom_host_keeps_its_prefix_and_port_in_what_is_signed():
    target = Target(custom_host="http://127.0.0.1:8123/s/abc/", cloudA_session_token="tok")
    request = await CloudAAdapter().build_request(call_for(target))
    path = "/s/abc/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse"
    assert request.url == "http://127.0.0.1:8123" + path
    assert request.headers["host"] == "127.0.0.1:8123"
    parsed = sigv4.parse_authorization(request.headers["authorization"])
    assert "x-amz-security-token" in parsed.signed_headers and "content-type" in parsed.signed_headers
    assert sigv4.verify("POST", path, "", request.headers, request.body, "secret", parsed)
    assert not sigv4.verify("POST", path.replace("%3A", ":"), "", request.headers, request.body, "secret", parsed)


async def test_default_port_is_left_out_of_the_host():
    request = await CloudAAdapter().build_request(call_for(Target(custom_host="https://proxy.example:443")))
    assert request.headers["host"] == "proxy.example"


@pytest.mark.parametrize(("field", "kw"), [
    ("cloudA_access_key_id", {"cloudA_access_key_id": None}),
    ("cloudA_secret_access_key", {"cloudA_secret_access_key": ""}),
    ("cloudA_region", {"cloudA_region": "evil.example/x"}),
])
async def test_missing_or_bad_settings_are_400s_naming_the_field(field, kw):
    with pytest.raises(InvalidRequest) as info:
        await CloudAAdapter().build_request(call_for(Target(**kw)))
    assert info.value.status == 400 and info.value.param == field and field in info.value.message
