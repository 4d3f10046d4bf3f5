"""default.pii: emails, phones, Luhn-valid cards and IPs found (fail) or redacted (pass), checked on random text."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.guardrails.checks.pii import CATEGORIES, find_pii, luhn_valid, redact_text
from gateway.guardrails.text import GuardrailRequest, Subject
from tests.guardrails.checks.subjects import answer, judge, param_fault, passes


@pytest.mark.parametrize(
    ("text", "category"),
    [
        ("write to jane.doe+tag@mail.example.com please", "email"),
        ("call +1 (415) 555-0123 today", "phone"),
        ("call 020 7946 0958", "phone"),
        ("card 4111 1111 1111 1111", "creditCard"),
        ("card 5500-0000-0000-0004", "creditCard"),
        ("host 192.168.10.20.", "ipAddress"),
        ("v6 2001:db8::ff00:42:8329 here", "ipAddress"),
    ],
)
def test_each_category_is_found(text, category):
    assert [found[2] for found in find_pii(text, CATEGORIES)] == [category]


@pytest.mark.parametrize(
    "text",
    ["card 4111 1111 1111 1112", "on 2024-01-15 12:30:45", "order 12345", "std::vector<int>", "version 1.2.3",
     "pi is 3.14159"],
)
def test_lookalikes_are_not_found(text):
    assert find_pii(text, CATEGORIES) == []


def test_luhn():
    assert luhn_valid("79927398713")
    assert not luhn_valid("79927398710")


def test_a_find_fails_the_check_and_data_counts_without_values():
    result = judge("default.pii", {}, answer("mail me: a@example.com or b@example.com"))
    assert result.verdict is False
    assert result.data == {"found": {"email": 2}}
    assert "example.com" not in result.explanation
    assert passes("default.pii", {}, answer("nothing personal"))


def test_categories_limit_what_is_looked_for():
    assert passes("default.pii", {"categories": ["creditCard"]}, answer("mail a@example.com"))


def test_redaction_passes_and_rewrites_every_message():
    body = {"messages": [{"role": "user", "content": "I am a@example.com"},
                         {"role": "user", "content": [{"type": "text", "text": "card 4111111111111111"}]}]}
    subject = Subject("before", GuardrailRequest(body, "chat"))
    check_result = judge("default.pii", {"redact": True}, subject)
    assert check_result.verdict is True and check_result.data == {"redacted": {"email": 1, "creditCard": 1}}
    text = "mail a@example.com, call +44 20 7946 0958 from 10.0.0.1"
    assert redact_text(text, find_pii(text, CATEGORIES)) == "mail [EMAIL], call [PHONE] from [IP_ADDRESS]"


def test_bad_category_is_named():
    assert param_fault("default.pii", {"categories": ["ssn"]}) == "input_guardrails[0].default.pii.categories[0]"
    assert param_fault("default.pii", {"categories": []}) == "input_guardrails[0].default.pii.categories"


_FILLER = st.text(alphabet=st.sampled_from(list("abc xyz,.;!?\n")), max_size=30)
_FINDS = st.sampled_from(["jane@example.com", "4111 1111 1111 1111", "+1 415 555 0123", "10.20.30.40",
                          "5500-0000-0000-0004", "2001:db8::1"])


@settings(max_examples=200, deadline=None)
@given(parts=st.lists(st.tuples(_FILLER, _FINDS), min_size=1, max_size=4), tail=_FILLER)
def test_redacted_text_holds_no_find_and_keeps_the_rest(parts, tail):
    text = "".join(f"{filler} {find} " for filler, find in parts) + tail
    finds = find_pii(text, CATEGORIES)
    assert len(finds) == len(parts)
    redacted = redact_text(text, finds)
    assert find_pii(redacted, CATEGORIES) == []
    for filler, find in parts:
        assert find not in redacted
        assert filler in redacted
