"""The card the gateway serves for an agent (gateway/agents/card.py): the gateway as the only JSON-RPC endpoint, the
gateway key as the only credential, no signatures; a 1.0 card in 1.0's shape, a 0.3 card in 0.3's, as the official
SDK's client (a2a-sdk 1.3.0) reads them."""

from __future__ import annotations

import msgspec
from a2a.client.card_resolver import parse_agent_card

from gateway.agents.card import rewritten, served_card, served_result

AGENT = "http://10.0.0.7:9000/a2a"
OWN = "https://gw.example/v1/agents/helper"


def card_1_0() -> dict:
    return {
        "name": "Helper", "version": "1.0.0", "description": "d", "capabilities": {"streaming": True},
        "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
        "supportedInterfaces": [
            {"url": AGENT, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": "http://10.0.0.7:9000/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
            {"url": "10.0.0.7:9001", "protocolBinding": "GRPC", "protocolVersion": "1.0"}],
        "securitySchemes": {"oauth": {"oauth2SecurityScheme": {"flows": {}}}},
        "securityRequirements": [{"schemes": {"oauth": {"list": ["read"]}}}],
        "skills": [{"id": "s", "name": "S", "description": "d", "tags": [],
                    "securityRequirements": [{"schemes": {"oauth": {"list": []}}}]}],
        "signatures": [{"protected": "x", "signature": "y"}],
    }


def card_0_3() -> dict:
    return {
        "name": "Legacy", "version": "0.1", "description": "d", "url": AGENT, "protocolVersion": "0.3.0",
        "preferredTransport": "JSONRPC", "capabilities": {}, "defaultInputModes": [], "defaultOutputModes": [],
        "additionalInterfaces": [{"url": AGENT, "transport": "JSONRPC"},
                                 {"url": "http://10.0.0.7:9000/v1", "transport": "HTTP+JSON"}],
        "securitySchemes": {"key": {"type": "apiKey", "in": "header", "name": "x-agent-key"}},
        "security": [{"key": []}], "skills": [],
    }


def test_a_1_0_card_keeps_only_its_json_rpc_interface_at_the_gateway_and_the_gateway_key():
    served = msgspec.json.decode(served_card(msgspec.json.encode(card_1_0()), AGENT, OWN))
    assert served["supportedInterfaces"] == [{"url": OWN, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]
    assert "10.0.0.7" not in msgspec.json.encode(served).decode()
    assert "signatures" not in served and "securityRequirements" not in served["skills"][0]
    card = parse_agent_card(served)  # as the SDK's client reads it
    assert [i.url for i in card.supported_interfaces] == [OWN]
    assert card.security_schemes["gatewayKey"].api_key_security_scheme.name == "x-gateway-api-key"
    assert card.security_schemes["gatewayKey"].api_key_security_scheme.location == "header"
    assert card.security_schemes["gatewayBearer"].http_auth_security_scheme.scheme == "Bearer"
    assert [set(r.schemes) for r in card.security_requirements] == [{"gatewayKey"}, {"gatewayBearer"}]


def test_a_0_3_card_names_the_gateway_as_its_url_in_its_own_shape():
    served = rewritten(card_0_3(), AGENT, OWN)
    assert served["url"] == OWN and served["preferredTransport"] == "JSONRPC"
    assert served["additionalInterfaces"] == [{"url": OWN, "transport": "JSONRPC"}]
    assert served["securitySchemes"]["gatewayKey"] == {
        "type": "apiKey", "description": served["securitySchemes"]["gatewayKey"]["description"], "in": "header",
        "name": "x-gateway-api-key"}
    assert served["security"] == [{"gatewayKey": []}, {"gatewayBearer": []}]
    card = parse_agent_card(served)
    assert [(i.url, i.protocol_binding) for i in card.supported_interfaces] == [(OWN, "JSONRPC")] * 2
    assert card.security_schemes["gatewayKey"].api_key_security_scheme.name == "x-gateway-api-key"


def test_the_stored_card_is_left_as_it_was():
    stored = card_1_0()
    rewritten(stored, AGENT, OWN)
    assert stored == card_1_0()


def test_an_extended_card_in_an_answer_is_rewritten_and_other_results_are_not():
    extended = served_result("GetExtendedAgentCard", card_1_0(), AGENT, OWN)
    assert [i["url"] for i in extended["supportedInterfaces"]] == [OWN]
    assert served_result("agent/getAuthenticatedExtendedCard", card_0_3(), AGENT, OWN)["url"] == OWN
    task = {"id": "t", "url": AGENT}
    assert served_result("GetTask", task, AGENT, OWN) is task
