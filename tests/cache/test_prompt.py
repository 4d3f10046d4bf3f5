"""What the semantic cache embeds (the last user message) and what must match exactly (everything else)."""

from __future__ import annotations

from gateway.cache.prompt import EMBED_CHARS, chat_prompt, completion_prompt
from gateway.schema.chat import parse_chat


def user(text: object) -> dict:
    return {"role": "user", "content": text}


def test_the_last_user_message_is_embedded() -> None:
    prompt = chat_prompt([{"role": "system", "content": "Be brief."}, user("Convert 10 USD to EUR")])
    assert prompt is not None
    assert prompt.text == "Convert 10 USD to EUR" and prompt.literals == ("n:10",)


def test_earlier_messages_must_match_exactly() -> None:
    question = user("And its population?")
    france = [user("What is the capital of France?"), {"role": "assistant", "content": "Paris."}, question]
    germany = [user("What is the capital of Germany?"), {"role": "assistant", "content": "Berlin."}, question]
    a, b = chat_prompt(france), chat_prompt(germany)
    assert a is not None and b is not None
    assert a.text == b.text and a.context != b.context
    assert chat_prompt(list(france)) == a


def test_a_different_system_prompt_is_another_context() -> None:
    a = chat_prompt([{"role": "system", "content": "Answer in French."}, user("Hi")])
    b = chat_prompt([{"role": "system", "content": "Answer in German."}, user("Hi")])
    assert a is not None and b is not None and a.context != b.context


def test_a_long_message_embeds_its_head_and_matches_its_tail_exactly() -> None:
    head = "Please summarise the following notes. " * 12
    a = chat_prompt([user(head + "Tail number one.")])
    b = chat_prompt([user(head + "Tail number two.")])
    assert a is not None and b is not None
    assert len(a.text) <= EMBED_CHARS and a.text == b.text
    assert a.context != b.context


def test_text_parts_are_embedded_and_other_parts_matched_exactly() -> None:
    image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    other = {"type": "image_url", "image_url": {"url": "https://example.com/b.png"}}
    a = chat_prompt([user([{"type": "text", "text": "What is in this picture?"}, image])])
    b = chat_prompt([user([{"type": "text", "text": "What is in this picture?"}, other])])
    assert a is not None and b is not None
    assert a.text == "What is in this picture?" and a.context != b.context


def test_no_semantic_step_without_a_final_user_text() -> None:
    assert chat_prompt([]) is None
    assert chat_prompt([user("hi"), {"role": "assistant", "content": "Hello"}]) is None
    assert chat_prompt([user("   ")]) is None
    assert chat_prompt([user([{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}])]) is None


def test_decoded_request_messages_work_like_dicts() -> None:
    body = b'{"model": "m", "messages": [{"role": "system", "content": "Be brief."}, ' \
           b'{"role": "user", "content": "Convert 10 USD to EUR"}]}'
    decoded = chat_prompt(parse_chat(body).messages)
    assert decoded is not None and decoded.text == "Convert 10 USD to EUR"


def test_completion_prompts() -> None:
    a = completion_prompt("Once upon a time")
    assert a is not None and a.text == "Once upon a time"
    assert completion_prompt([1, 2, 3]) is None
    assert completion_prompt("") is None
