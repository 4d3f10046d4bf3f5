"""The mock's own SigV4 verifier against AWS's published Signature Version 4 test suite (aws-sig-v4-test-suite).

Each case's canonical request, string to sign and signature are the suite's, as data; the verifier shares no code
with the gateway's signer (``tests/providers/test_cloudA_mock.py`` checks the two against each other).
"""

from __future__ import annotations

import pytest

from gateway_mock import sigv4

# The suite's shared inputs.
SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
STAMP = "20150830T123600Z"
HOST = "example.amazonaws.com"
EMPTY_SHA = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
SCOPE = "20150830/us-east-1/service/aws4_request"
BASE = {"host": HOST, "x-amz-date": STAMP}


def authorization(signed: str, sig: str) -> sigv4.Authorization | None:
    return sigv4.parse(f"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/{SCOPE}, SignedHeaders={signed}, Signature={sig}")


# (case, method, path as sent, query, headers, body, canonical request, string to sign, signature)
FULL_CASES = [
    ("get-vanilla", "GET", "/", "", BASE, b"",
     f"GET\n/\n\nhost:{HOST}\nx-amz-date:{STAMP}\n\nhost;x-amz-date\n{EMPTY_SHA}",
     f"AWS4-HMAC-SHA256\n{STAMP}\n{SCOPE}\nbb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63",
     "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"),
    ("post-vanilla", "POST", "/", "", BASE, b"",
     f"POST\n/\n\nhost:{HOST}\nx-amz-date:{STAMP}\n\nhost;x-amz-date\n{EMPTY_SHA}",
     f"AWS4-HMAC-SHA256\n{STAMP}\n{SCOPE}\n553f88c9e4d10fc9e109e2aeb65f030801b70c2f6468faca261d401ae622fc87",
     "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"),
    ("post-x-www-form-urlencoded", "POST", "/", "",
     {"content-type": "application/x-www-form-urlencoded", **BASE}, b"Param1=value1",
     f"POST\n/\n\ncontent-type:application/x-www-form-urlencoded\nhost:{HOST}\nx-amz-date:{STAMP}\n\n"
     "content-type;host;x-amz-date\n9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e",
     f"AWS4-HMAC-SHA256\n{STAMP}\n{SCOPE}\n42a5e5bb34198acb3e84da4f085bb7927f2bc277ca766e6d19c73c2154021281",
     "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a"),
]

# (case, method, path as sent, query, signature): the suite's path and query cases, host and x-amz-date signed
SIGNATURE_CASES = [
    ("get-vanilla-query-order-key-case", "GET", "/", "Param2=value2&Param1=value1",
     "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"),
    ("get-utf8", "GET", "/ሴ", "", "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85"),
    ("get-space", "GET", "/example space/", "", "652487583200325589f1fba4c7e578f72c47cb61beeca81406b39ddec1366741"),
    ("get-unreserved", "GET", "/-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", "",
     "07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f"),
]


@pytest.mark.parametrize(("case", "method", "path", "query", "headers", "body", "creq", "sts", "sig"), FULL_CASES,
                         ids=[c[0] for c in FULL_CASES])
def test_canonical_request_string_to_sign_and_signature_are_the_suites(case, method, path, query, headers, body,
                                                                       creq, sts, sig):
    signed = ";".join(sorted(headers))
    auth = authorization(signed, sig)
    assert auth is not None and auth.signed_headers == tuple(sorted(headers))
    assert sigv4.canonical_request(method, path, query, headers, auth.signed_headers, body) == creq
    assert sigv4.string_to_sign(STAMP, auth, creq) == sts
    assert sigv4.signature(SECRET, auth, sts) == sig
    assert sigv4.is_signed_by(SECRET, auth, method, path, query, headers, body)


@pytest.mark.parametrize(("case", "method", "path", "query", "sig"), SIGNATURE_CASES,
                         ids=[c[0] for c in SIGNATURE_CASES])
def test_the_suites_paths_and_queries_verify(case, method, path, query, sig):
    auth = authorization("host;x-amz-date", sig)
    assert auth is not None
    assert sigv4.is_signed_by(SECRET, auth, method, path, query, BASE, b"")


def test_anything_changed_fails_verification():
    auth = authorization("host;x-amz-date", FULL_CASES[0][-1])
    assert auth is not None
    assert not sigv4.is_signed_by("another secret", auth, "GET", "/", "", BASE, b"")
    assert not sigv4.is_signed_by(SECRET, auth, "GET", "/other", "", BASE, b"")
    assert not sigv4.is_signed_by(SECRET, auth, "GET", "/", "", {**BASE, "host": "example.org"}, b"")
    assert not sigv4.is_signed_by(SECRET, auth, "GET", "/", "", {**BASE, "x-amz-date": "20150831T123600Z"}, b"")


def test_the_path_is_encoded_once_more_than_it_was_sent():
    assert sigv4.canonical_uri("/model/anthropic.claude-v2%3A1/converse") == "/model/anthropic.claude-v2%253A1/converse"
    assert sigv4.canonical_uri("/a/./b/../c//d/") == "/a/c/d/"
    assert sigv4.canonical_uri("") == "/"


@pytest.mark.parametrize("value", [
    "", "AWS4-HMAC-SHA1 Credential=a/b/c/d/aws4_request, SignedHeaders=host, Signature=ab",
    "AWS4-HMAC-SHA256 Credential=a/b/c/d/aws4_request, SignedHeaders=host",
    "AWS4-HMAC-SHA256 Credential=a/b/c/aws4_request, SignedHeaders=host, Signature=ab",
    "AWS4-HMAC-SHA256 Credential=a/b/c/d/e, SignedHeaders=host, Signature=ab",
    "AWS4-HMAC-SHA256 Credential=a/b/c/d/aws4_request, SignedHeaders=host, Signature=",
])
def test_malformed_authorization_headers_do_not_parse(value):
    assert sigv4.parse(value) is None
