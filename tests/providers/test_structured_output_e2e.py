"""Structured output through the real gateway with the official SDK: ``parse`` and ``stream`` with a pydantic model
return the parsed object for anthropic and cloudA (a forced output tool upstream) and cloudC (responseSchema)."""

from __future__ import annotations

import msgspec
import openai
import pytest
from openai import OpenAI
from pydantic import BaseModel

from gateway.providers.structured_output import PERMISSIVE_OBJECT
from tests.providers import test_cloudA_e2e as cloudA
from tests.providers import test_cloudC_e2e as cloudC
from tests.support.http import post
from tests.support.servers import ADMIN_KEY

ASK = [{"role": "system", "content": "Answer in the requested format."},
       {"role": "user", "content": "What is the forecast for Paris?"}]
MODELS = {"anthropic": "claude-test-1", "cloudA": cloudA.MODEL, "cloudC": cloudC.MODEL}


class City(BaseModel):
    name: str
    population: int


class Forecast(BaseModel):
    city: City
    days: list[str]
    sunny: bool


class GetWeather(BaseModel):
    location: str


#: what the mock's schema sampler makes for Forecast (strings "Paris", integers 1, one array item, booleans true)
EXPECTED = Forecast(city=City(name="Paris", population=1), days=["Paris"], sunny=True)


def sdk(gateway, mock, provider: str, base: str) -> OpenAI:
    if provider == "anthropic":
        headers = {"x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "anthropic",
                   "x-gateway-custom-host": base + "/v1"}
    elif provider == "cloudA":
        headers = cloudA.config_headers(base)
        del headers["content-type"]
    else:
        return cloudC.client(gateway, cloudC.config(base))
    return OpenAI(base_url=f"{gateway.url}/v1", api_key="sk-provider-token", default_headers=headers, max_retries=0,
                  timeout=60, http_client=gateway.http_client())


def raw_headers(provider: str, base: str) -> dict[str, str]:
    if provider == "anthropic":
        return {"x-gateway-api-key": ADMIN_KEY, "x-gateway-provider": "anthropic",
                "x-gateway-custom-host": base + "/v1", "authorization": "Bearer sk-ant",
                "content-type": "application/json"}
    return cloudA.config_headers(base)


def sent(mock, base: str, n: int = 0) -> dict:
    return msgspec.json.decode(mock.calls(base)["requests"][n]["body"])


def assert_output_tool_forced(provider: str, body: dict) -> None:
    if provider == "anthropic":
        assert body["tools"][-1]["name"] == "json_response"
        assert body["tool_choice"] == {"type": "tool", "name": "json_response", "disable_parallel_tool_use": True}
        schema = body["tools"][-1]["input_schema"]
    elif provider == "cloudA":
        spec = body["toolConfig"]["tools"][-1]["toolSpec"]
        assert spec["name"] == "json_response"
        assert body["toolConfig"]["toolChoice"] == {"tool": {"name": "json_response"}}
        schema = spec["inputSchema"]["json"]
    else:
        config = body["generationConfig"]
        assert config["responseMimeType"] == "application/json"
        schema = config["responseSchema"]
        assert "$defs" not in schema and "$ref" not in msgspec.json.encode(schema).decode()
        assert schema["properties"]["city"]["properties"]["population"] == {"title": "Population", "type": "integer"}
        return
    assert schema["properties"]["city"] == {"$ref": "#/$defs/City"} and "City" in schema["$defs"]


@pytest.mark.parametrize("provider", ["anthropic", "cloudA", "cloudC"])
def test_parse_returns_the_parsed_model(gateway, mock, provider):
    base = mock.scenario()
    done = sdk(gateway, mock, provider, base).chat.completions.parse(
        model=MODELS[provider], messages=ASK, response_format=Forecast)
    choice = done.choices[0]
    assert choice.message.parsed == EXPECTED
    assert msgspec.json.decode(choice.message.content) == EXPECTED.model_dump()
    assert not choice.message.tool_calls
    assert choice.finish_reason == "stop"
    assert done.system_fingerprint is None
    assert_output_tool_forced(provider, sent(mock, base))


@pytest.mark.parametrize("provider", ["anthropic", "cloudA", "cloudC"])
def test_streamed_parse_returns_the_parsed_model(gateway, mock, provider):
    base = mock.scenario()
    client = sdk(gateway, mock, provider, base)
    with client.beta.chat.completions.stream(model=MODELS[provider], messages=ASK, response_format=Forecast) as stream:
        events = list(stream)
        final = stream.get_final_completion()
    assert final.choices[0].message.parsed == EXPECTED
    assert not final.choices[0].message.tool_calls
    assert final.choices[0].finish_reason == "stop"
    pieces = [e.delta for e in events if e.type == "content.delta"]
    assert len(pieces) >= 2 and msgspec.json.decode("".join(pieces)) == EXPECTED.model_dump()
    assert not [e for e in events if e.type.startswith("tool_calls.")]
    assert_output_tool_forced(provider, sent(mock, base))


@pytest.mark.parametrize("provider", ["anthropic", "cloudA"])
@pytest.mark.parametrize("stream", [False, True])
def test_json_object_answers_a_json_object(gateway, mock, provider, stream):
    base = mock.scenario()
    client = sdk(gateway, mock, provider, base)
    kwargs = {"model": MODELS[provider], "messages": ASK, "response_format": {"type": "json_object"}}
    if stream:
        chunks = list(client.chat.completions.create(stream=True, **kwargs))
        content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert chunks[-1].choices[0].finish_reason == "stop"
    else:
        content = client.chat.completions.create(**kwargs).choices[0].message.content
    assert msgspec.json.decode(content) == {"answer": "Paris"}
    body = sent(mock, base)
    schema = body["tools"][0]["input_schema"] if provider == "anthropic" else \
        body["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"]["json"]
    assert schema == PERMISSIVE_OBJECT


@pytest.mark.parametrize("provider", ["anthropic", "cloudA"])
def test_client_tools_first_then_the_structured_answer(gateway, mock, provider):
    """With tools and tool_choice auto the model may call a client tool; its next turn gives the parsed answer."""
    base = mock.scenario([{"tool_name": "GetWeather"}, {"tool_name": "json_response"}])
    client = sdk(gateway, mock, provider, base)
    tools = [openai.pydantic_function_tool(GetWeather)]
    first = client.chat.completions.parse(model=MODELS[provider], messages=ASK, tools=tools, response_format=Forecast)
    message = first.choices[0].message
    assert first.choices[0].finish_reason == "tool_calls" and message.parsed is None
    [call] = message.tool_calls
    assert call.function.name == "GetWeather" and call.function.parsed_arguments == GetWeather(location="Paris")
    body = sent(mock, base)
    if provider == "anthropic":
        assert [t["name"] for t in body["tools"]] == ["GetWeather", "json_response"]
        assert body["tool_choice"] == {"type": "any"}
    else:
        assert [t["toolSpec"]["name"] for t in body["toolConfig"]["tools"]] == ["GetWeather", "json_response"]
        assert body["toolConfig"]["toolChoice"] == {"any": {}}
    follow = [*ASK, message.model_dump(exclude_none=True, include={"role", "content", "tool_calls"}),
              {"role": "tool", "tool_call_id": call.id, "content": "18C and sunny"}]
    second = client.chat.completions.parse(model=MODELS[provider], messages=follow, tools=tools,
                                           response_format=Forecast)
    assert second.choices[0].message.parsed == EXPECTED and not second.choices[0].message.tool_calls
    assert second.choices[0].finish_reason == "stop"


@pytest.mark.parametrize("provider", ["anthropic", "cloudA"])
def test_a_forced_client_tool_wins_over_response_format(gateway, mock, provider):
    base = mock.scenario()
    done = sdk(gateway, mock, provider, base).chat.completions.create(
        model=MODELS[provider], messages=ASK, tools=[cloudA.WEATHER], tool_choice="required",
        response_format={"type": "json_object"})
    choice = done.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.tool_calls[0].function.name == "get_weather"
    body = sent(mock, base)
    names = [t["name"] for t in body["tools"]] if provider == "anthropic" else \
        [t["toolSpec"]["name"] for t in body["toolConfig"]["tools"]]
    assert names == ["get_weather"]


@pytest.mark.parametrize("provider", ["anthropic", "cloudA"])
@pytest.mark.parametrize("response_format,param", [
    ({"type": "xml"}, "response_format.type"),
    ({"type": "json_schema", "json_schema": "Forecast"}, "response_format.json_schema"),
    ({"type": "json_schema", "json_schema": {"name": "list", "schema": {"type": "array"}}},
     "response_format.json_schema.schema"),
])
def test_bad_response_format_is_a_400_naming_the_field(gateway, mock, provider, response_format, param):
    base = mock.scenario()
    resp = post(f"{gateway.url}/v1/chat/completions",
                {"model": MODELS[provider], "messages": ASK, "response_format": response_format},
                raw_headers(provider, base))
    assert resp.status == 400, resp.text
    assert resp.json()["error"]["param"] == param
    assert mock.calls(base)["calls"] == 0


def test_anthropic_response_format_with_thinking_is_a_400(gateway, mock):
    base = mock.scenario()
    resp = post(f"{gateway.url}/v1/chat/completions",
                {"model": MODELS["anthropic"], "messages": ASK, "max_tokens": 2048,
                 "thinking": {"type": "enabled", "budget_tokens": 1024}, "response_format": {"type": "json_object"}},
                raw_headers("anthropic", base))
    assert resp.status == 400 and resp.json()["error"]["param"] == "response_format"
    assert "thinking" in resp.json()["error"]["message"]
    assert mock.calls(base)["calls"] == 0
