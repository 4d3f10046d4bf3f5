"""How a policy is shown: one ``object`` for both kinds, also for records stored when rate limits had their own."""

from __future__ import annotations

import asyncio

from gateway.controlplane.policies import Condition, GroupBy, RateLimitPolicy
from gateway.policies.usage import archived, created, policy_view
from gateway.state.memory import MemoryStateStore


def test_a_rate_limit_stored_as_policy_rate_limits_is_shown_as_the_one_policy_object():
    record = RateLimitPolicy(object="policy_rate_limits", workspace_id="ws", organisation_id="org", type="requests",
                             unit="rpm", value=5, conditions=[Condition(key="api_key", value="*")],
                             group_by=[GroupBy(key="api_key")])
    view = asyncio.run(policy_view(MemoryStateStore(), record))
    assert view["object"] == "policy_usage_limits" and view["unit"] == "rpm" and view["current_usage"] == 0
    assert created(record) == {"id": record.id, "object": "policy_usage_limits"}
    assert archived(record) == {"id": record.id, "object": "policy_usage_limits", "deleted": True}
