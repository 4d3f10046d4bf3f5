"""The literal guard: prompts that differ in a number or a quoted string never share a semantic hit."""

from __future__ import annotations

import pytest

from gateway.cache.literals import literals, same_literals


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Convert 10 USD to EUR", "Convert 100 USD to EUR"),
        ("What is 15% of 80?", "What is 25% of 80?"),
        ("Translate 'good morning' into French", "Translate 'good night' into French"),
        ('Reverse the string "abc"', 'Reverse the string "abd"'),
        ("What is -5 squared?", "What is 5 squared?"),
        ("Is 3.14 larger than 3.15?", "Is 3.14 larger than 3.16?"),
        ("Add ten and five", "Add ten and six"),
        ("Subtract 3 from 4", "Subtract 4 from 3"),
        ("Explain GPT-4", "Explain GPT-5"),
        ("Run `ls -la`", "Run `ls -l`"),
        ("Translate “hello” to German", "Translate “hallo” to German"),
        ("Sum 1.50 and 2", "Sum 1.5 and 2"),
    ],
)
def test_different_literals_block_the_hit(a: str, b: str) -> None:
    assert not same_literals(a, b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Convert 10 USD to EUR", "How much is 10 USD in EUR?"),
        ("What is the capital of France?", "Which city is France's capital?"),
        ("Pay 1,000 dollars", "pay 1000 dollars please"),
        ("Translate 'good morning' into French", "How do you say 'good morning' in French?"),
        ("what's the capital's name", "tell me the name of the capital"),
        ("Give me ten ideas", "Provide 10 ideas"),
        ("Someone often tones it down", "A person frequently softens it"),
    ],
)
def test_equal_literals_let_the_similarity_decide(a: str, b: str) -> None:
    assert same_literals(a, b)


def test_literals_are_in_order_and_quotes_keep_their_numbers() -> None:
    assert literals('He said "I have 3 cats" and 4 dogs') == ("q:I have 3 cats", "n:4")
    assert literals("use ```print(1)``` then `x`") == ("q:print(1)", "q:x")
    assert literals("«y» „z“ ‘w’") == ("q:y", "q:z", "q:w")
    assert literals("ranges 2-3 and v1.2.3") == ("n:2", "n:3", "n:1.2.3")
    assert literals("nothing to see") == ()
