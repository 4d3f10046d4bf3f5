"""Chat completions through the real gateway with the official openai SDK (non-streamed smoke test)."""


def test_openai_sdk_gets_a_chat_completion(openai_client):
    client = openai_client()
    completion = client.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "hi"}])
    assert completion.object == "chat.completion"
    assert completion.choices[0].message.content.startswith("Hello from the gateway mock")
    assert completion.usage.total_tokens > 0
