"""The exact-match cache key: what changes it and what does not."""

from __future__ import annotations

from gateway.cache.keys import IGNORED_FIELDS, partition, simple_key
from gateway.schema.config import Config

TARGET = Config(provider="vendorA", custom_host="http://127.0.0.1:1/v1", api_key="sk-a")
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0}


def key(body=BODY, config=TARGET, endpoint="chat", workspace="ws", namespace=None, metadata=None) -> str:
    return simple_key(partition(workspace, namespace, metadata), config, endpoint, body)


def test_fields_that_do_not_change_the_answer_do_not_change_the_key():
    base = key()
    for extra in ({"stream": True}, {"stream_options": {"include_usage": True}}, {"user": "u1"}, {"store": True},
                  {"metadata": {"a": "b"}}, {"prompt_cache_key": "p"}, {"safety_identifier": "s"}):
        assert key({**BODY, **extra}) == base, extra
    assert {"stream", "user"} <= IGNORED_FIELDS


def test_everything_else_in_the_body_does():
    base = key()
    for change in ({"temperature": 1}, {"model": "other"}, {"seed": 1}, {"n": 2},
                   {"messages": [{"role": "user", "content": "hi!"}]}):
        assert key({**BODY, **change}) != base, change


def test_object_key_order_does_not_matter():
    reordered = {"temperature": 0, "messages": [{"content": "hi", "role": "user"}], "model": "m"}
    assert key(reordered) == key()


def test_target_endpoint_and_workspace_are_part_of_the_key():
    base = key()
    assert key(config=Config(provider="groq", api_key="sk-a")) != base
    assert key(config=Config(provider="vendorA", custom_host="http://127.0.0.1:2/v1", api_key="sk-a")) != base
    assert key(endpoint="completions") != base
    assert key(workspace="other") != base
    # the provider key is not: one workspace's clients share answers whatever key they call with
    assert key(config=Config(provider="vendorA", custom_host="http://127.0.0.1:1/v1", api_key="sk-b")) == base


def test_metadata_partitions_unless_a_namespace_is_given():
    assert key(metadata={"team": "a"}) != key(metadata={"team": "b"})
    assert key(metadata={"a": 1, "b": 2}) == key(metadata={"b": 2, "a": 1})
    assert key(namespace="n1", metadata={"team": "a"}) == key(namespace="n1", metadata={"team": "b"})
    assert key(namespace="n1") != key(namespace="n2")
    assert key(namespace="n1") != key()
    assert key(namespace="n1", workspace="other") != key(namespace="n1")  # a namespace never crosses workspaces


def test_workspaces_whose_ids_extend_one_another_never_share_a_key():
    keys = {key(workspace=ws, namespace=ns) for ws, ns in (
        ("team", "blue:x"), ("team:blue", "x"), ("team:blue:x", None), ("team", None), ("team", ":blue"))}
    assert len(keys) == 5
