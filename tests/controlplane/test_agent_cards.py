"""Agent card validation (gateway.controlplane.agent_cards.validated): which endpoint a 1.0 and a 0.3 card give,
cards as the official SDK serves them accepted, and each fault a 400 naming the field's path (or a 413)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.controlplane import agent_cards
from gateway.http.errors import GatewayError
from tests.support.agent_cards import card_v03, card_v1

RPC = "https://agents.example.com/rpc"


def encode(card: Any) -> bytes:
    return json.dumps(card).encode()


def refused(body: bytes, param: str, status: int = 400) -> str:
    with pytest.raises(GatewayError) as caught:
        agent_cards.validated(body)
    assert (caught.value.status, caught.value.param) == (status, param), caught.value.message
    return caught.value.message


def test_a_card_as_the_sdk_serves_it_gives_its_first_json_rpc_interface():
    # a2a-sdk 1.3.0 serves a 1.0 card merged with the 0.3 fields of its first 0.3 interface
    card = card_v1(RPC)
    card["supportedInterfaces"].append({"url": "https://agents.example.com/v03", "protocolBinding": "JSONRPC",
                                        "protocolVersion": "0.3"})
    card.update(url="https://agents.example.com/v03", preferredTransport="JSONRPC", protocolVersion="0.3")
    read = agent_cards.validated(encode(card))
    assert (read.endpoint, read.protocol_version, read.name) == (RPC, "1.0", "Helper agent")
    assert json.loads(read.text) == card


def test_a_1_0_card_with_its_empty_fields_left_out_is_accepted():
    """ProtoJSON leaves out empty lists and strings: an SDK agent with no skills serves no skills key."""
    card = {"name": "Bare", "supportedInterfaces": [{"url": RPC, "protocolBinding": "JSONRPC",
                                                     "protocolVersion": "1.0"}],
            "skills": [{"id": "s", "name": "S"}]}
    assert agent_cards.validated(encode(card)).endpoint == RPC
    refused(encode(card_v03(RPC, skills=None)), "card.skills")  # a 0.3 card writes every required field


def test_the_first_json_rpc_interface_is_chosen_past_other_bindings():
    card = card_v1(RPC)
    card["supportedInterfaces"].insert(0, {"url": "grpc.example.com:443", "protocolBinding": "GRPC",
                                           "protocolVersion": "1.0"})
    assert agent_cards.validated(encode(card)).endpoint == RPC
    legacy = card_v03("https://agents.example.com/rest", preferredTransport="HTTP+JSON",
                      additionalInterfaces=[{"url": RPC, "transport": "JSONRPC"}])
    assert agent_cards.validated(encode(legacy)).endpoint == RPC
    refused(encode(card_v03(RPC, preferredTransport="GRPC")), "card.preferredTransport")


@pytest.mark.parametrize(("card", "param"), [
    (card_v1(RPC, supportedInterfaces=[]), "card.supportedInterfaces"),
    (card_v1(RPC, supportedInterfaces={"url": RPC}), "card.supportedInterfaces"),
    (card_v1(RPC, supportedInterfaces=[{"url": RPC, "protocolBinding": "JSONRPC"}]),
     "card.supportedInterfaces[0].protocolVersion"),
    (card_v1(RPC, supportedInterfaces=["x"]), "card.supportedInterfaces[0]"),
    (card_v1("http://user:pw@agents.example.com/rpc"), "card.supportedInterfaces[0].url"),
    (card_v03("/relative/rpc"), "card.url"),
    (card_v03(RPC, url=7), "card.url"),
    (card_v03(RPC, description=None), "card.description"),
    (card_v1(RPC, version=1), "card.version"),
    (card_v1(RPC, capabilities=[]), "card.capabilities"),
    (card_v1(RPC, defaultOutputModes="text"), "card.defaultOutputModes"),
    (card_v1(RPC, skills=[{"id": "a", "name": "A", "tags": "x"}]), "card.skills[0].tags"),
    (card_v1(RPC, skills=[{"id": "a", "name": ""}]), "card.skills[0].name"),
    (card_v1(RPC, provider={"url": "https://example.com"}), "card.provider.organization"),
    (card_v1(RPC, name=["x"]), "card.name"),
])
def test_each_fault_names_the_field(card, param):
    refused(encode(card), param)


@pytest.mark.parametrize("body", [b"", b"{", b"\xff\xfe", b"[" * 100_000 + b"]" * 100_000, b'"card"', b"null"])
def test_what_is_not_a_json_object_is_refused_naming_the_card(body):
    refused(body, "card")


def test_past_one_megabyte_is_a_413_naming_the_limit():
    assert "1048576 bytes" in refused(b" " * agent_cards.MAX_CARD_BYTES + b"{}", "card", 413)
