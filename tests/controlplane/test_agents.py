"""A2A agent records (gateway.controlplane.agents): validation naming the field, headers sealed and masked, PUT
rules (a credential never follows a new url), the data path's target and the per-worker cache of targets."""

from __future__ import annotations

import msgspec
import pytest

from gateway.controlplane import agents
from gateway.controlplane.directory import RecordCache
from gateway.controlplane.keys import (
    ADMIN_SCOPES,
    DEFAULT_SCOPES,
    SCOPE_ADDITIONS,
    SCOPES,
    SCOPES_BEFORE_ADMIN_SCOPES,
    SCOPES_BEFORE_AGENT_SCOPES,
    SCOPES_VERSION,
    held_scopes,
)
from gateway.controlplane.secrets import SecretBox
from gateway.http.errors import InvalidRequest, RecordUnusable
from gateway.state.memory import MemoryStateStore

BOX = SecretBox.from_text("agent-test-key")
TOKEN = "Bearer agent-secret-0123456789abcdef"
URL = "https://agents.example.com"
CARD = agents.Card(text='{"name": "Helper", "url": "https://agents.example.com/rpc"}', name="Helper",
                   endpoint="https://agents.example.com/rpc", protocol_version="0.3.0")


def make(slug: str = "helper", box: SecretBox = BOX, **fields) -> agents.Agent:
    return agents.build(box, "ws", slug, {"url": URL, **fields}, CARD, "2026-12-02T00:00:00.000Z")


def refused(param: str, call, *args) -> str:
    with pytest.raises(InvalidRequest) as caught:
        call(*args)
    assert caught.value.param == param, (caught.value.param, caught.value.message)
    return caught.value.message


def test_headers_are_sealed_and_masked_and_the_card_shown_as_an_object():
    record = make(headers={"Authorization": TOKEN, "X-Team": "blue"})
    assert record.masked == {"Authorization": "Bea****cdef", "X-Team": "********"}
    assert TOKEN not in msgspec.json.encode(record).decode()
    shown = msgspec.json.decode(msgspec.json.encode(record.public()))
    assert shown["headers"] == record.masked and "sealed" not in shown
    assert shown["card"] == {"name": "Helper", "url": "https://agents.example.com/rpc"}
    assert (shown["name"], shown["endpoint"], shown["protocol_version"]) == ("Helper", CARD.endpoint, "0.3.0")
    assert agents.headers_of(BOX, record) == {"Authorization": TOKEN, "X-Team": "blue"}


@pytest.mark.parametrize(("fields", "param", "words"), [
    ({"url": None}, "url", "required"),
    ({"url": "ftp://agents.example.com"}, "url", "http"),
    ({"url": "https://user:pw@agents.example.com"}, "url", "credentials"),
    ({"url": "https://agents.example.com/a b"}, "url", "whitespace"),
    ({"url": "https://x.example.com/" + "a" * 3000}, "url", "2048"),
    ({"headers": {"Content-Type": "text/plain"}}, "headers.Content-Type", "cannot be set"),
    ({"headers": {"A2A-Version": "1.0"}}, "headers.A2A-Version", "cannot be set"),
    ({"headers": {"X-Key": "a\r\nb"}}, "headers.X-Key", "CR, LF or NUL"),
    ({"config": "[1]"}, "config", "config"),
])
def test_bad_fields_are_refused_naming_the_field(fields, param, words):
    body = {"url": URL, **fields}
    message = refused(param, agents.build, BOX, "ws", "helper", body, CARD, "")
    assert words in message


def test_a_new_url_must_send_the_headers_again():
    record = make(headers={"Authorization": TOKEN})
    message = refused("url", agents.changed_fields, BOX, record, {"url": "https://elsewhere.example.com"})
    assert "headers" in message
    refused("headers", agents.changed_fields, BOX, record,
            {"url": "https://elsewhere.example.com", "headers": {"Authorization": record.masked["Authorization"]}})
    moved = agents.changed_fields(BOX, record, {"url": "https://elsewhere.example.com", "headers": None})
    assert "headers" not in moved and moved["url"] == "https://elsewhere.example.com"


def test_a_masked_header_sent_back_keeps_the_stored_value():
    record = make(headers={"Authorization": TOKEN})
    fields = agents.changed_fields(BOX, record, {"headers": {"Authorization": record.masked["Authorization"],
                                                             "X-Team": "red"}})
    assert fields["headers"] == {"Authorization": TOKEN, "X-Team": "red"}
    refused("headers.Other", agents.changed_fields, BOX, record, {"headers": {"Other": "********"}})
    refused("url", agents.changed_fields, BOX, record, {"url": None})


def test_target_opens_the_headers_and_carries_the_card():
    record = make(headers={"Authorization": TOKEN}, config="pc-guard")
    target = agents.target(BOX, record)
    assert (target.slug, target.workspace, target.endpoint) == ("helper", "ws", CARD.endpoint)
    assert target.headers == {"Authorization": TOKEN} and target.config == "pc-guard"
    assert msgspec.json.decode(target.card)["name"] == "Helper" and target.protocol_version == "0.3.0"


async def test_agent_targets_are_cached_per_workspace_until_invalidated():
    cache = RecordCache(MemoryStateStore(), lambda: BOX)
    await cache.agents.create(make(headers={"Authorization": TOKEN}))
    first = await cache.agent_target("ws", "helper")
    assert first is not None and first.headers == {"Authorization": TOKEN}
    assert await cache.agent_target("other", "helper") is None
    assert await cache.agent_target("ws", "missing") is None
    await cache.agents.create(make("later"))
    assert await cache.agent_target("ws", "later") is not None
    assert agents.KIND in RecordCache.KINDS


async def test_an_agent_sealed_under_another_key_is_named_not_served():
    cache = RecordCache(MemoryStateStore(), lambda: BOX)
    await cache.agents.create(make("sealed", box=SecretBox.from_text("another key"), headers={"A": "b"}))
    with pytest.raises(RecordUnusable) as caught:
        await cache.agent_target("ws", "sealed")
    assert "agent 'sealed'" in caught.value.message and caught.value.status == 500


# -- scopes ---------------------------------------------------------------------------------------------------


def test_scope_table_version_three_adds_the_agents_admin_scopes():
    assert SCOPES_VERSION == len(SCOPE_ADDITIONS) == 3
    every_then, added = SCOPE_ADDITIONS[2]
    assert added == {"agents.read", "agents.write"} and every_then | added == set(SCOPES)
    assert added <= set(ADMIN_SCOPES) and "agents.invoke" not in ADMIN_SCOPES
    assert set(DEFAULT_SCOPES["admin"]) == set(SCOPES) and not added & set(DEFAULT_SCOPES["member"])


def test_full_admin_keys_of_older_tables_gain_the_agent_scopes_and_narrowed_keys_do_not():
    added = {"agents.read", "agents.write"}
    assert held_scopes("admin", SCOPES_BEFORE_AGENT_SCOPES, 2) == set(SCOPES)
    assert held_scopes("admin", SCOPES_BEFORE_ADMIN_SCOPES, 0) == set(SCOPES)  # three steps: 0 -> 1 -> 2 -> 3
    narrowed = SCOPES_BEFORE_AGENT_SCOPES - {"mcp-servers.write"}
    assert held_scopes("admin", narrowed, 2) == narrowed
    assert held_scopes("member", SCOPES_BEFORE_AGENT_SCOPES, 2) == SCOPES_BEFORE_AGENT_SCOPES
    assert not added & held_scopes("admin", SCOPES_BEFORE_AGENT_SCOPES, SCOPES_VERSION)  # a new key: as given
