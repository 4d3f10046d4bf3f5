"""Condition matching and group_by buckets, on compiled policies (the request path's view of a policy)."""

from __future__ import annotations

from gateway.api.config_checks import config_checks
from gateway.controlplane.policies import MAX_COUNT, Condition, GroupBy, RateLimitPolicy, UsageLimitPolicy
from gateway.policies.compiled import COST, CompiledPolicy, RequestFacts, from_units, in_units


def rate(conditions: list[dict], group_by: tuple[str, ...] = ("api_key",), value: int = 10) -> CompiledPolicy:
    return CompiledPolicy(RateLimitPolicy(
        id="p1", type="requests", unit="rpm", value=value, conditions=[Condition(**c) for c in conditions],
        group_by=[GroupBy(k) for k in group_by]))


def facts(model: str | None = "gpt-4o-mini", provider: str | None = "vendorA", key_id: str | None = "key-1",
          workspace: str = "default", **metadata) -> RequestFacts:
    return RequestFacts(workspace, provider, model, metadata, lambda: key_id)


def test_exact_values_lists_and_the_wildcard():
    assert rate([{"key": "model", "value": "gpt-4o-mini"}]).matches(facts())
    assert not rate([{"key": "model", "value": "gpt-4o"}]).matches(facts())
    assert rate([{"key": "model", "value": ["gpt-4o", "gpt-4o-mini"]}]).matches(facts())
    assert rate([{"key": "model", "value": "*"}]).matches(facts())
    assert rate([{"key": "model", "value": "gpt-4o*"}]).matches(facts())
    assert not rate([{"key": "model", "value": "claude*"}]).matches(facts())


def test_every_condition_must_match():
    both = rate([{"key": "provider", "value": "vendorA"}, {"key": "api_key", "value": "key-1"}])
    assert both.matches(facts())
    assert not both.matches(facts(key_id="key-2"))
    assert not both.matches(facts(provider="anthropic"))


def test_excludes_win_over_value():
    policy = rate([{"key": "model", "value": "*", "excludes": ["gpt-4o-mini"]}])
    assert not policy.matches(facts())
    assert policy.matches(facts(model="gpt-4o"))
    assert not rate([{"key": "model", "value": "*", "excludes": "gpt*"}]).matches(facts(model="gpt-4.1"))


def test_metadata_keys_and_missing_values():
    user = rate([{"key": "metadata._user", "value": "*"}])
    assert user.matches(facts(_user="alice"))
    assert not user.matches(facts())  # no _user: the wildcard needs a value
    assert rate([{"key": "metadata.tier", "value": "3"}]).matches(facts(tier=3))  # non-strings read as JSON
    assert rate([{"key": "workspace_id", "value": "ws"}]).matches(facts(workspace="ws"))


def test_buckets_follow_the_group_by_values():
    policy = rate([{"key": "workspace_id", "value": "*"}], group_by=("metadata._user",))
    alice, bob = policy.bucket(facts(_user="alice")), policy.bucket(facts(_user="bob"))
    assert alice.id != bob.id and alice.label == "alice"
    assert policy.bucket(facts(_user="alice")).id == alice.id
    assert policy.bucket(facts()).label == ""  # no value: the bucket of the empty value
    two = rate([{"key": "model", "value": "*"}], group_by=("api_key", "model"))
    assert two.bucket(facts()).label == '["key-1","gpt-4o-mini"]'
    assert two.bucket(facts(model="a|b")).id != two.bucket(facts(model="a", key_id="key-1|b")).id


def test_counter_names_change_with_the_window():
    policy = rate([{"key": "model", "value": "*"}])
    key, ttl, end = policy.counter("b", 60_000 * 5 + 10)
    later, _, _ = policy.counter("b", 60_000 * 6)
    assert key != later and end == 60_000 * 6 and ttl > end - (60_000 * 5 + 10)


def test_cost_limits_count_micro_dollars():
    policy = CompiledPolicy(UsageLimitPolicy(
        id="p2", type="cost", credit_limit=12.5, alert_threshold=10.0, conditions=[Condition("model", "*")],
        group_by=[GroupBy("api_key")], created_at="2026-01-01T00:00:00.000Z"))
    assert policy.limit == 12_500_000 and policy.alert == 10_000_000
    assert in_units(COST, 0.000001) == 1 and from_units(COST, 1_500_000) == 1.5


def test_the_provider_of_a_multi_target_config_is_the_first_target_depth_first():
    from gateway.config.validate import ConfigParser
    from gateway.policies.gate import first_provider
    from gateway.routing.plan import Planner

    parser = ConfigParser(config_checks())
    planner = Planner(parser)

    config = parser.parse(b'{"strategy": {"mode": "fallback"}, "targets": [{"strategy": {"mode": "loadbalance"}, '
                          b'"targets": [{"provider": "anthropic", "api_key": "a"}, {"provider": "vendorA", '
                          b'"api_key": "b"}]}, {"provider": "cohere", "api_key": "c"}]}')
    assert first_provider(planner.plan(config)) == "anthropic"
    assert first_provider(planner.plan(parser.parse(b'{"provider": "vendorA", "api_key": "k"}'))) == "vendorA"


def test_limits_stored_before_the_bounds_count_as_the_largest_limit():
    """A record written before the API bounded limits (1e308 USD, a 10**30 rate) compiles to the largest limit
    rather than failing every request of its workspace."""
    usage = UsageLimitPolicy(id="u1", type="cost", credit_limit=1e308, alert_threshold=float("inf"),
                             conditions=[Condition(key="model", value="*")], group_by=[GroupBy("model")],
                             created_at="2026-01-01T00:00:00.000Z")
    compiled = CompiledPolicy(usage)
    assert compiled.limit == compiled.alert == MAX_COUNT
    assert rate([{"key": "model", "value": "*"}], value=10**30).limit == MAX_COUNT
    assert in_units(COST, float("nan")) == MAX_COUNT and in_units(COST, -1.0) == 0
    assert in_units(COST, 1_000_000_000) == MAX_COUNT
