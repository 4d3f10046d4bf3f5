"""The config object's shape: frozen msgspec Structs for every key of the spec's config table."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

# Numbers the spec calls "number": JSON integers stay ints, fractions stay floats.
Number = int | float


class _Node(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True, gc=False):
    """Base of the config's nested objects: frozen, unknown keys rejected, defaults left out when encoded (subclasses
    repeat ``frozen=True``, which msgspec inherits anyway, for type checkers)."""


class Condition(_Node, frozen=True):
    """One conditional-routing rule: when ``query`` matches the request, route to the target named ``then``."""

    query: dict[str, Any]
    then: str


class Strategy(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """How a config chooses among its targets (its compiled condition queries: ``ConfigParser.compiled_conditions``)."""

    mode: str
    conditions: list[Condition] | None = None
    default: str | None = None
    on_status_codes: list[int] | None = None


class CacheConfig(_Node, frozen=True):
    """Response caching: ``simple`` (exact request) or ``semantic``; ``max_age`` in seconds."""

    mode: str
    max_age: int | None = None


class CircuitBreaker(msgspec.Struct, frozen=True, omit_defaults=True, gc=False):
    """Circuit breaker of a target: opens after ``failure_threshold`` failures for ``cooldown_interval`` ms.

    Unlike the rest of the config, unknown keys are accepted and ignored here: the spec says further breaker fields
    exist without naming them, so a config written for another gateway's breaker still validates.
    """

    failure_threshold: Number
    cooldown_interval: Number
    failure_status_codes: list[int] | None = None


class RetryConfig(_Node, frozen=True):
    """Retries of one target: ``attempts`` extra tries on ``on_status_codes`` (or the default retryable set)."""

    attempts: int
    on_status_codes: list[int] | None = None
    use_retry_after_headers: bool = False


class Deployment(_Node, frozen=True):
    """One cloudB deployment a config may route to by alias."""

    deployment_id: str
    alias: str
    api_version: str
    is_default: bool = False


class Feedback(_Node, frozen=True):
    """Feedback recorded when a hook or guardrail passes or fails."""

    value: Number | None = None
    weight: Number | None = None
    metadata: dict[str, Any] | None = None


class HookOutcome(_Node, frozen=True):
    """What happens on a hook's or guardrail's failure or success (``on_fail`` / ``on_success``).

    ``deny`` is accepted only where the spec allows it: before_request_hooks and output_guardrails.
    """

    feedback: Feedback | None = None
    deny: bool | None = None


class HookCheck(_Node, frozen=True):
    """One check a hook runs: the check's id and its parameters."""

    id: str
    parameters: dict[str, Any]


class Hook(_Node, frozen=True):
    """An item of before_request_hooks or after_request_hooks (``async`` on after-request hooks only)."""

    id: str
    type: str | None = None
    checks: list[HookCheck] | None = None
    async_: bool | None = msgspec.field(default=None, name="async")
    on_fail: HookOutcome | None = None
    on_success: HookOutcome | None = None


class Guardrail(_Node, frozen=True):
    """The object form of an input_guardrails / output_guardrails item.

    On the wire every key other than id/deny/async/on_fail/on_success names a check and holds its parameters
    object; those keys are gathered into ``checks`` (check id -> parameters). Encoding a Guardrail therefore
    nests them under ``checks``; it is an in-memory form, not the wire form.
    """

    id: str | None = None
    deny: bool | None = None
    async_: bool | None = msgspec.field(default=None, name="async")
    on_fail: HookOutcome | None = None
    on_success: HookOutcome | None = None
    checks: dict[str, dict[str, Any]] = {}


# Guardrail items are ``str | Guardrail`` once validated. msgspec cannot decode an object that keeps unknown keys
# into a Struct, so the decoder reads object items as plain dicts and the validator turns each into a Guardrail
# in place (a parsed Config never leaves ``ConfigParser.parse`` still holding a dict).
if TYPE_CHECKING:
    GuardrailItems = list[str | Guardrail]
else:
    GuardrailItems = list[str | dict[str, Any]]


class Config(_Node, frozen=True):
    """A gateway config (the root or any target): every key optional, ``targets`` recursive.

    Treat a parsed Config as read-only throughout, including its lists and dicts: parsed configs are shared
    through the parse cache.
    """

    strategy: Strategy | None = None
    targets: list[Config] | None = None
    name: str | None = None
    strict_vendorA_compliance: bool | None = None
    provider: str | None = None
    api_key: str | None = None
    virtual_key: str | None = None
    prompt_id: str | None = None
    resource_name: str | None = None
    deployment_id: str | None = None
    api_version: str | None = None
    deployments: list[Deployment] | None = None
    override_params: dict[str, Any] | None = None
    default_params: dict[str, Any] | None = None
    drop_params: list[str] | None = None
    request_timeout: int | None = None
    cache: CacheConfig | None = None
    cb_config: CircuitBreaker | None = None
    retry: RetryConfig | None = None
    weight: Number | None = None
    on_status_codes: list[int] | None = None
    custom_host: str | None = None
    passthrough: bool | None = None
    forward_headers: list[str] | None = None
    vendorA_organization: str | None = None
    vendorA_project: str | None = None
    cloudA_access_key_id: str | None = None
    cloudA_secret_access_key: str | None = None
    cloudA_region: str | None = None
    cloudA_session_token: str | None = None
    cloudC_project_id: str | None = None
    cloudC_region: str | None = None
    cloudC_service_account_json: dict[str, Any] | None = None
    cloudB_region: str | None = None
    cloudB_deployment_name: str | None = None
    cloudB_endpoint_name: str | None = None
    cloudB_api_version: str | None = None
    cloudB_deployment_type: str | None = None
    before_request_hooks: list[Hook] | None = None
    after_request_hooks: list[Hook] | None = None
    input_guardrails: GuardrailItems | None = None
    output_guardrails: GuardrailItems | None = None


# The settings a target takes from its parent when it does not set them itself (conventions, "Routing").
NOT_INHERITED: frozenset[str] = frozenset({"targets", "strategy", "name", "weight", "on_status_codes"})
INHERITED_FIELDS: tuple[str, ...] = tuple(f for f in Config.__struct_fields__ if f not in NOT_INHERITED)
