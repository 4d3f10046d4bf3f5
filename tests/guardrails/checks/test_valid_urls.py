"""default.validUrls: every URL in the text must be well formed; nothing is fetched."""

from __future__ import annotations

import pytest

from gateway.guardrails.checks.valid_urls import valid_url
from tests.guardrails.checks.subjects import answer, judge, param_fault, passes


@pytest.mark.parametrize(
    "url",
    ["https://example.com", "http://docs.example.co.uk/a/b?q=1#x", "http://127.0.0.1:8080/x", "http://[::1]/",
     "https://localhost/x", "https://xn--bcher-kva.example/"],
)
def test_good_urls(url):
    assert valid_url(url)


@pytest.mark.parametrize(
    "url",
    ["htp://example.com", "ftp://example.com", "http://exa_mple.com", "http://example", "http://-bad-.com",
     "http://example.com:99999/", "https://example.c0m", "http://"],
)
def test_bad_urls(url):
    assert not valid_url(url)


def test_all_valid_passes_one_invalid_fails():
    assert passes("default.validUrls", {}, answer("See https://example.com/docs, and http://a.example.org."))
    result = judge("default.validUrls", {}, answer("See https://example.com and htp://broken.example"))
    assert result.verdict is False
    assert "htp://broken.example" in result.explanation
    assert passes("default.validUrls", {"not": True}, answer("htp://broken.example"))


def test_text_without_urls_passes():
    assert passes("default.validUrls", {}, answer("no links"))


def test_unknown_parameter_is_named():
    assert param_fault("default.validUrls", {"onlyDNS": True}) == "input_guardrails[0].default.validUrls.onlyDNS"
