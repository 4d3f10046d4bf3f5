"""Admission plans, cached per request signature: bounded, and a full cache forgets its oldest plans only."""

from __future__ import annotations

from gateway.policies import plans
from gateway.policies.plans import WorkspacePolicies
from tests.policies.test_compiled import facts, rate


def test_a_plan_is_reused_for_its_signature_and_the_cache_keeps_the_newest(monkeypatch):
    monkeypatch.setattr(plans, "MAX_PLANS", 3)
    policies = WorkspacePolicies([rate([{"key": "model", "value": "*"}])])
    first, made = policies.plan(facts(key_id="key-0"), 0)
    assert made and policies.plan(facts(key_id="key-0"), 1) == (first, False)
    for n in range(1, 4):
        policies.plan(facts(key_id=f"key-{n}"), 1)
    assert len(policies.plans) == 3
    # the three newest signatures are still planned (not all forgotten at once); the oldest is made again
    assert [policies.plan(facts(key_id=f"key-{n}"), 2)[1] for n in (1, 2, 3)] == [False, False, False]
    assert policies.plan(facts(key_id="key-0"), 2)[1]
