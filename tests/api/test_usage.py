"""Usage is counted on every path, through the real gateway: streams ask vendorA-wire upstreams for usage the
client did not ask for (and hide it again), a stream the client leaves is a 499 and one that breaks is the error it
ended with, both with the usage so far; every log item and the token metric say where the figures come from."""

from __future__ import annotations

import time
import uuid

import msgspec
import pytest

from gateway.observability.estimate import MESSAGE_OVERHEAD_TOKENS, tokens_for
from gateway_mock.cloudA import CREDENTIALS as CLOUDA_CREDENTIALS
from gateway_mock.cloudC import TEST_TOKEN as CLOUDC_TOKEN
from tests.support.headers import headers_for
from tests.support.http import _conn, post, request, stream_events
from tests.support.poll import wait_logs
from tests.support.servers import ADMIN_KEY

CLOUDA_KEY = "AKIDMOCKEXAMPLE"
TRANSLATED = ["vendorA", "anthropic", "cloudA", "cloudC"]
CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Say hello to the usage counter"}]}
PROMPT_ESTIMATE = tokens_for(len(CHAT["messages"][0]["content"])) + MESSAGE_OVERHEAD_TOKENS


def provider_headers(provider: str, base: str, trace: str) -> dict[str, str]:
    """Headers sending the request to ``provider``'s mock under ``base`` (translated ones too)."""
    if provider == "cloudA":
        config = {"provider": "cloudA", "cloudA_access_key_id": CLOUDA_KEY,
                  "cloudA_secret_access_key": CLOUDA_CREDENTIALS[CLOUDA_KEY][0], "cloudA_region": "us-east-1",
                  "custom_host": base}
    elif provider == "cloudC":
        config = {"provider": "cloudC", "api_key": CLOUDC_TOKEN, "custom_host": base + "/v1",
                  "cloudC_project_id": "proj-1", "cloudC_region": "us-central1"}
    else:
        return headers_for(base + "/v1", provider, trace_id=trace)
    return {"x-gateway-api-key": ADMIN_KEY, "x-gateway-config": msgspec.json.encode(config).decode(),
            "content-type": "application/json", "x-gateway-trace-id": trace}


def new_trace() -> str:
    return f"usage-{uuid.uuid4().hex}"


@pytest.mark.parametrize("endpoint, body", [
    ("chat/completions", CHAT),
    ("completions", {"model": "gpt-3.5-turbo-instruct", "prompt": "Say hello to the usage counter"}),
])
def test_a_stream_the_client_asked_no_usage_for_is_still_counted(gateway, mock, endpoint, body):
    base, trace = mock.scenario(), new_trace()
    status, _, events = stream_events(f"{gateway.url}/v1/{endpoint}", {**body, "stream": True},
                                      headers_for(base + "/v1", trace_id=trace))
    received = list(events)
    assert status == 200 and received[-1] == b"[DONE]"
    chunks = [msgspec.json.decode(e) for e in received[:-1]]
    assert all(c["choices"] for c in chunks)  # the usage-only chunk was not relayed
    assert not any(b'"usage"' in e for e in received)  # nor the "usage": null members
    sent = msgspec.json.decode(mock.calls(base)["requests"][0]["body"])
    assert sent["stream_options"] == {"include_usage": True}
    item = wait_logs(gateway, trace, timeout=8)[0]
    assert item["usage_source"] == "reported" and item["status"] == 200
    assert item["prompt_tokens"] > 0 and item["completion_tokens"] > 0
    assert item["total_tokens"] == item["prompt_tokens"] + item["completion_tokens"]


def test_a_client_that_asked_for_usage_gets_it_and_its_bytes_go_up_unchanged(gateway, mock):
    base, trace = mock.scenario(), new_trace()
    raw = msgspec.json.encode({**CHAT, "stream": True, "stream_options": {"include_usage": True}})
    status, _, events = stream_events(f"{gateway.url}/v1/chat/completions", msgspec.json.decode(raw),
                                      headers_for(base + "/v1", trace_id=trace))
    received = [msgspec.json.decode(e) for e in list(events)[:-1]]
    assert status == 200
    assert received[-1]["choices"] == [] and received[-1]["usage"]["completion_tokens"] > 0
    assert mock.calls(base)["requests"][0]["body"].encode() == raw
    item = wait_logs(gateway, trace, timeout=8)[0]
    assert item["usage_source"] == "reported"
    assert item["completion_tokens"] == received[-1]["usage"]["completion_tokens"]


def test_include_usage_false_is_overridden_upstream_and_hidden_downstream(gateway, mock):
    base, trace = mock.scenario(), new_trace()
    body = {**CHAT, "stream": True, "stream_options": {"include_usage": False}}
    status, _, events = stream_events(f"{gateway.url}/v1/chat/completions", body,
                                      headers_for(base + "/v1", trace_id=trace))
    received = list(events)
    assert status == 200 and not any(b'"usage"' in e for e in received)
    assert msgspec.json.decode(mock.calls(base)["requests"][0]["body"])["stream_options"] == {"include_usage": True}
    assert wait_logs(gateway, trace, timeout=8)[0]["usage_source"] == "reported"


def test_an_upstream_that_ignores_include_usage_is_estimated(gateway, mock):
    base, trace = mock.scenario([{"no_usage": True}]), new_trace()
    status, _, events = stream_events(f"{gateway.url}/v1/chat/completions", {**CHAT, "stream": True},
                                      headers_for(base + "/v1", trace_id=trace))
    text = "".join(msgspec.json.decode(e)["choices"][0]["delta"].get("content") or "" for e in list(events)[:-1])
    assert status == 200
    item = wait_logs(gateway, trace, timeout=8)[0]
    assert item["usage_source"] == "estimated" and item["status"] == 200
    assert item["prompt_tokens"] == PROMPT_ESTIMATE
    assert abs(item["completion_tokens"] - tokens_for(len(text))) <= 2
    assert item["cost_usd"] > 0


def test_a_json_answer_without_usage_is_estimated(gateway, mock):
    base, trace = mock.scenario([{"no_usage": True}]), new_trace()
    resp = post(f"{gateway.url}/v1/chat/completions", CHAT, headers_for(base + "/v1", trace_id=trace))
    assert resp.status == 200 and "usage" not in resp.json()
    item = wait_logs(gateway, trace, timeout=8)[0]
    assert item["usage_source"] == "estimated"
    assert item["prompt_tokens"] == PROMPT_ESTIMATE
    assert item["completion_tokens"] == tokens_for(len(resp.json()["choices"][0]["message"]["content"]))


def test_a_json_answer_with_usage_is_reported(gateway, mock):
    base, trace = mock.scenario(), new_trace()
    resp = post(f"{gateway.url}/v1/chat/completions", CHAT, headers_for(base + "/v1", trace_id=trace))
    item = wait_logs(gateway, trace, timeout=8)[0]
    assert item["usage_source"] == "reported"
    assert item["completion_tokens"] == resp.json()["usage"]["completion_tokens"]


@pytest.mark.parametrize("provider", TRANSLATED)
def test_a_stream_the_client_leaves_is_a_499_with_the_usage_so_far(served_gateway, mock, provider):
    """The completion is the text relayed so far, whatever the provider's stream looks like (anthropic reports
    an opening output count in message_start; cloudC's first chunk carries the role and text together)."""
    base, trace = mock.scenario([{"chunks": 40, "chunk_delay_ms": 100}]), new_trace()
    conn, path = _conn(f"{served_gateway.url}/v1/chat/completions", 30)
    conn.request("POST", path, body=msgspec.json.encode({**CHAT, "stream": True}),
                 headers=provider_headers(provider, base, trace))
    resp = conn.getresponse()
    assert resp.status == 200
    text = ""
    for _ in range(200):  # the role chunk and the first eight words
        line = resp.readline()
        if line.startswith(b"data: "):
            text += msgspec.json.decode(line[6:])["choices"][0]["delta"].get("content") or ""
            if len(text.split()) >= 8:
                break
    conn.sock.close()
    conn.close()
    item = wait_logs(served_gateway, trace, timeout=8)[0]
    assert item["status"] == 499 and item["usage_source"] == "estimated", item
    assert item["prompt_tokens"] == PROMPT_ESTIMATE
    assert tokens_for(len(text)) - 2 <= item["completion_tokens"] < 40, (text, item)  # these words, not the reply


@pytest.mark.parametrize("provider", TRANSLATED)
@pytest.mark.parametrize("step, status", [({"stream_error": "cut"}, 502), ({"stream_error": "middle"}, None)])
def test_a_stream_that_breaks_is_logged_as_its_error_with_the_usage_so_far(gateway, mock, provider, step, status):
    base, trace = mock.scenario([step]), new_trace()
    code, _, events = stream_events(f"{gateway.url}/v1/chat/completions", {**CHAT, "stream": True},
                                    provider_headers(provider, base, trace))
    received = list(events)
    assert code == 200 and b'"error"' in received[-2]
    text = "".join(msgspec.json.decode(e)["choices"][0]["delta"].get("content") or "" for e in received[:-2])
    item = wait_logs(gateway, trace, timeout=8)[0]
    assert item["status"] == (status or item["status"]) and item["status"] >= 400 and item["error"]
    assert item["usage_source"] == "estimated", item
    assert item["prompt_tokens"] == PROMPT_ESTIMATE
    assert text and abs(item["completion_tokens"] - tokens_for(len(text))) <= 3, (text, item)


def test_requests_without_an_answer_have_no_usage(gateway, mock):
    trace = new_trace()
    assert post(f"{gateway.url}/v1/chat/completions", CHAT,
                headers_for(mock.scenario([{"status": 400}]) + "/v1", trace_id=trace)).status == 400
    item = wait_logs(gateway, trace, timeout=8)[0]
    assert item["usage_source"] == "none" and item["total_tokens"] == 0


def test_the_token_metric_is_labelled_with_the_usage_source(gateway, mock):
    model = f"gpt-4o-mini-{uuid.uuid4().hex[:8]}"
    assert post(f"{gateway.url}/v1/chat/completions", {**CHAT, "model": model},
                headers_for(mock.scenario() + "/v1", trace_id=new_trace())).status == 200
    assert post(f"{gateway.url}/v1/chat/completions", {**CHAT, "model": model},
                headers_for(mock.scenario([{"no_usage": True}]) + "/v1", trace_id=new_trace())).status == 200
    deadline = time.monotonic() + 8
    wanted = [f'kind="{kind}",model="{model}",provider="vendorA",usage_source="{source}"'
              for kind in ("input", "output") for source in ("reported", "estimated")]
    while True:
        text = request("GET", f"{gateway.url}/metrics", headers={"x-gateway-api-key": ADMIN_KEY}).text
        if all(w in text for w in wanted) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    for w in wanted:
        assert w in text, w


@pytest.mark.parametrize("provider", TRANSLATED)
@pytest.mark.parametrize("leave_after", [2, 4, 10])
def test_a_stream_left_after_some_events_counts_the_text_of_every_event_relayed(served_gateway, mock, provider,
                                                                             leave_after):
    """Whichever path relayed them (vendorA relays aligned chunks as received, without splitting them), the text
    of every event that reached the client before it left is counted, and nothing it never got."""
    base, trace = mock.scenario([{"chunks": 40, "chunk_delay_ms": 150}]), new_trace()
    conn, path = _conn(f"{served_gateway.url}/v1/chat/completions", 30)
    conn.request("POST", path, body=msgspec.json.encode({**CHAT, "stream": True}),
                 headers=provider_headers(provider, base, trace))
    resp = conn.getresponse()
    assert resp.status == 200
    text, seen = "", 0
    for _ in range(400):
        line = resp.readline()
        if line.startswith(b"data: "):
            seen += 1
            text += msgspec.json.decode(line[6:])["choices"][0]["delta"].get("content") or ""
            if seen == leave_after:
                break
    conn.sock.close()
    conn.close()
    assert seen == leave_after and text
    item = wait_logs(served_gateway, trace, timeout=8)[0]
    assert item["status"] == 499 and item["usage_source"] == "estimated", item
    assert item["prompt_tokens"] == PROMPT_ESTIMATE
    # the events read, and at most the two or three more already on their way when the client closed
    assert tokens_for(len(text)) <= item["completion_tokens"] <= tokens_for(len(text)) + 3, (text, item)


def _left_after(gateway, path: str, body: dict, headers: dict, texts_of, leave_after: int) -> str:
    """Stream ``body`` to ``path`` and leave after ``leave_after`` events that carried text; the text read."""
    conn, target = _conn(f"{gateway.url}{path}", 30)
    conn.request("POST", target, body=msgspec.json.encode({**body, "stream": True}), headers=headers)
    resp = conn.getresponse()
    assert resp.status == 200
    text, seen = "", 0
    for _ in range(600):
        line = resp.readline()
        if line.startswith(b"data: "):
            piece = texts_of(msgspec.json.decode(line[6:]))
            if piece:
                text += piece
                seen += 1
                if seen == leave_after:
                    break
    conn.sock.close()
    conn.close()
    assert seen == leave_after, text
    return text


def _chat_text(doc: dict) -> str:
    return doc["choices"][0]["delta"].get("content") or "" if doc.get("choices") else ""


def _responses_text(doc: dict) -> str:
    return doc["delta"] if doc.get("type") == "response.output_text.delta" else ""


def _messages_text(doc: dict) -> str:
    return doc["delta"].get("text", "") if doc.get("type") == "content_block_delta" else ""


SPACED_DOORS = [
    ("/v1/chat/completions", "vendorA", CHAT, _chat_text),
    ("/v1/responses", "vendorA", {"model": "gpt-4o-mini", "input": "Say hello to the usage counter"},
     _responses_text),
    ("/v1/messages", "anthropic", {"model": "claude-3-5-sonnet-20240620", "max_tokens": 256,
                                   "messages": [{"role": "user", "content": "Say hello to the usage counter"}]},
     _messages_text),
]


@pytest.mark.parametrize("path, provider, body, texts_of", SPACED_DOORS,
                         ids=["chat", "responses-forwarded", "messages-forwarded"])
@pytest.mark.parametrize("leave_after", [2, 4, 8])
def test_a_stream_left_from_an_upstream_writing_spaced_json_counts_its_text(served_gateway, mock, path, provider,
                                                                           body, texts_of, leave_after):
    """An upstream whose JSON has a space after each colon (most Python servers) has its relayed text counted too:
    the estimate reads the events' decoded JSON, not byte patterns."""
    base, trace = mock.scenario([{"chunks": 40, "chunk_delay_ms": 150, "spaced_json": True}]), new_trace()
    headers = provider_headers(provider, base, trace)
    text = _left_after(served_gateway, path, body, headers, texts_of, leave_after)
    item = wait_logs(served_gateway, trace, timeout=8)[0]
    assert item["status"] == 499 and item["usage_source"] == "estimated", item
    assert item["completion_tokens"] > 0 and item["prompt_tokens"] > 0, item
    # the events read, and at most the two or three more already on their way when the client closed
    assert tokens_for(len(text)) <= item["completion_tokens"] <= tokens_for(len(text)) + 3, (text, item)
