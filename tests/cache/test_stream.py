"""A streamed answer assembled into its JSON form, and a JSON answer replayed as a stream: round trips agree."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.cache.stream import StreamAssembler, replay, replayable

HEAD = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 7, "model": "m", "system_fingerprint": "fp"}


def sse(*docs) -> bytes:
    return b"".join(b"data: " + json.dumps(d).encode() + b"\n\n" for d in docs)


def chunk(delta=None, finish=None, index=0, **extra):
    return {**HEAD, "choices": [{"index": index, "delta": delta or {}, "logprobs": None, "finish_reason": finish}],
            **extra}


def assemble(data: bytes, endpoint="chat", pieces: int = 1) -> StreamAssembler:
    assembler = StreamAssembler(endpoint)
    step = max(1, len(data) // pieces)
    for i in range(0, len(data), step):
        assembler.feed(data[i:i + step])
    return assembler


def test_a_chat_stream_adds_up_to_its_answer_whatever_the_chunking():
    data = sse(chunk({"role": "assistant", "content": ""}), chunk({"content": "Hel"}), chunk({"content": "lo"}),
               chunk(finish="stop"), {**HEAD, "choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 2,
                                                                        "total_tokens": 3}}) + b"data: [DONE]\n\n"
    for pieces in (1, 3, 17, len(data)):
        answer = assemble(data, pieces=pieces).answer()
        assert answer == {
            "id": "chatcmpl-1", "object": "chat.completion", "created": 7, "model": "m", "system_fingerprint": "fp",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello"}, "logprobs": None,
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
        }


def test_tool_calls_are_joined_by_index():
    data = sse(chunk({"role": "assistant", "content": None, "tool_calls": [
        {"index": 0, "id": "call_1", "type": "function", "function": {"name": "get", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"a":'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}), chunk(finish="tool_calls"))
    message = assemble(data).answer()["choices"][0]["message"]
    assert message == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get", "arguments": '{"a":1}'}}]}


def test_what_cannot_be_replayed_leaves_the_assembler_broken_but_readable():
    thinking = assemble(sse(chunk({"content_blocks": [{"index": 0, "delta": {"thinking": "hm"}}]}),
                            chunk({"content": "ok"}), chunk(finish="stop")))
    assert thinking.broken and thinking.answer() is None
    assert thinking.answer(whole=False)["choices"][0]["message"]["content"] == "ok"
    errored = assemble(sse(chunk({"content": "a"}), {"error": {"message": "boom"}}))
    assert errored.broken and errored.answer() is None
    assert StreamAssembler("chat").answer() is None


def test_a_completions_stream_assembles_and_replays():
    head = {"id": "cmpl-1", "object": "text_completion", "created": 3, "model": "m"}
    data = sse({**head, "choices": [{"index": 0, "text": "Hi", "logprobs": None, "finish_reason": None}]},
               {**head, "choices": [{"index": 0, "text": " there", "logprobs": None, "finish_reason": "length"}]})
    answer = assemble(data, "completions").answer()
    assert answer["choices"] == [{"index": 0, "text": "Hi there", "logprobs": None, "finish_reason": "length"}]
    again = assemble(b"".join(replay(answer, "completions", False)), "completions").answer()
    assert again == answer


def test_replayed_chunks_are_vendorA_chunks_and_usage_only_when_asked():
    answer = {"id": "c", "object": "chat.completion", "created": 1, "model": "m",
              "choices": [{"index": 0, "message": {"role": "assistant", "content": "yes"}, "logprobs": None,
                           "finish_reason": "stop"}], "usage": {"prompt_tokens": 1, "completion_tokens": 1,
                                                                "total_tokens": 2}}
    events = [json.loads(e[6:]) for e in replay(answer, "chat", False)]
    assert all(e["object"] == "chat.completion.chunk" and e["id"] == "c" for e in events)
    assert [e["choices"][0]["delta"] for e in events] == [{"role": "assistant", "content": ""}, {"content": "yes"}, {}]
    assert events[-1]["choices"][0]["finish_reason"] == "stop" and "usage" not in events[-1]
    with_usage = [json.loads(e[6:]) for e in replay(answer, "chat", True)]
    assert with_usage[-1]["choices"] == [] and with_usage[-1]["usage"]["total_tokens"] == 2


def test_answers_the_replay_cannot_carry_are_not_replayable():
    good = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "x", "refusal": None}}]}
    assert replayable(good, "chat")
    assert not replayable({"choices": [{"index": 0, "message": {"role": "assistant", "content": "x",
                                                                 "audio": {"id": "a"}}}]}, "chat")
    assert not replayable({"choices": [{"index": 0, "text": "x", "logprobs": {"tokens": []}}]}, "completions")
    assert not replayable({"data": []}, "chat")


texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)


@settings(max_examples=200, deadline=None)
@given(contents=st.lists(st.one_of(st.none(), texts), min_size=1, max_size=3),
       tools=st.lists(st.tuples(st.text(min_size=1, max_size=8), texts), max_size=2),
       finish=st.sampled_from(["stop", "length", "tool_calls"]))
def test_replay_then_assemble_gives_the_answer_back(contents, tools, finish):
    choices = []
    for i, content in enumerate(contents):
        message = {"role": "assistant", "content": content}
        if tools and i == 0:
            message["tool_calls"] = [{"id": f"call_{j}", "type": "function", "function": {"name": n, "arguments": a}}
                                     for j, (n, a) in enumerate(tools)]
        choices.append({"index": i, "message": message, "logprobs": None, "finish_reason": finish})
    answer = {"id": "x", "object": "chat.completion", "created": 5, "model": "m", "choices": choices}
    assert replayable(answer, "chat")
    rebuilt = assemble(b"".join(replay(answer, "chat", False)), pieces=5).answer()
    for choice in answer["choices"]:  # an empty content streams as nothing: it comes back as null
        if choice["message"]["content"] == "":
            choice["message"]["content"] = None
    assert rebuilt == answer
