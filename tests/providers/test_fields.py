"""FieldTable: which fields a translating adapter reports as dropped, and which values it refuses."""

from __future__ import annotations

import msgspec
import pytest

from gateway.http.errors import InvalidRequest
from gateway.providers.anthropic.request import CHAT_FIELDS as ANTHROPIC
from gateway.providers.cloudA.converse import CHAT_FIELDS as CLOUD_A
from gateway.providers.fields import MAX_NAMED, FieldTable, above_one, is_true
from gateway.schema.chat import parse_chat

TABLE = FieldTable(frozenset({"model", "messages"}), {"n": (above_one, "n > 1 is not supported by p"),
                                                       "logprobs": (is_true, "logprobs is not supported by p")},
                   loose_only=frozenset({"thinking"}))


def body(**fields) -> bytes:
    return msgspec.json.encode({"model": "m", "messages": [{"role": "user", "content": "hi"}], **fields})


def test_fields_not_taken_are_named_in_body_order_and_nulls_and_honoured_values_are_not():
    raw = body(seed=1, n=1, logprobs=False, zeta=None, service_tier="auto", thinking={"type": "enabled"})
    assert TABLE.dropped(raw) == b"seed,service_tier,thinking"
    assert TABLE.dropped(raw, strict=False) == b"seed,service_tier"
    assert TABLE.dropped(body()) is None


def test_names_that_cannot_go_in_a_header_are_left_out_and_the_list_is_bounded():
    assert TABLE.dropped(body(**{"a\r\nx-evil": 1, "ok": 1, "é": 2})) == b"ok"
    many = body(**{f"f{i}": i for i in range(MAX_NAMED + 10)})
    assert TABLE.dropped(many).count(b",") == MAX_NAMED - 1


@pytest.mark.parametrize("fields,param", [({"n": 2}, "n"), ({"logprobs": True}, "logprobs")])
def test_refused_values_are_400s_naming_the_field(fields, param):
    with pytest.raises(InvalidRequest) as info:
        TABLE.refuse(parse_chat(body(**fields)))
    assert info.value.param == param and info.value.status == 400
    TABLE.refuse(parse_chat(body(n=1, logprobs=False)))


def test_the_provider_tables_know_every_field_the_chat_body_types():
    """A field of ChatRequest is either taken, refused, or dropped on purpose (listed here)."""
    typed = set(parse_chat(body()).__struct_fields__)
    deliberately_dropped = {
        # ``metadata``: vendorA's stored-completion tags, which neither provider has (anthropic's own metadata holds
        # a user id alone, which ``user`` gives)
        "anthropic": {"frequency_penalty", "presence_penalty", "logit_bias", "seed", "metadata"},
        "cloudA": {"frequency_penalty", "presence_penalty", "logit_bias", "seed", "user", "parallel_tool_calls",
                   "thinking", "metadata"},
    }
    for name, table in (("anthropic", ANTHROPIC), ("cloudA", CLOUD_A)):
        assert typed - table.taken - set(table.refused) == deliberately_dropped[name], name
