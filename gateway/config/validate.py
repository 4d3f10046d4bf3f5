"""Config parsing and validation: JSON text -> validated Config (``ConfigParser``, which caches by text); faults are
400s naming a JSON path.

Beyond the schema's types and unknown-key checks, a config obeys:
- strategy and a non-empty targets go together; strategy.mode is single/loadbalance/fallback/conditional;
  conditional mode needs conditions and default, each naming one of that config's targets, and every condition
  query must compile (conditions and default are checked and used only in conditional mode); a loadbalance
  config needs a target of weight > 0 (an unset weight counts as 1);
- cache.mode is simple/semantic, max_age >= 0; cb_config.failure_threshold >= 1, cooldown_interval >= 30000;
  retry.attempts is 0..RETRY_ATTEMPTS_MAX (10): a larger value is rejected with a 400, never clamped; status codes
  are integers 100..599; weight >= 0; request_timeout > 0; cloudB_deployment_type is serverless/managed;
  drop_params are dot paths without empty segments;
- hooks' and guardrails' checks are known ``default.<check>`` ids with valid parameters (``gateway.guardrails``
  validates them: ``input_guardrails[0].default.wordCount.minWords``), and an async item cannot deny;
- ``passthrough: true`` excludes targets, strategy, override_params and guardrails, and hooks count as guardrails;
- every config node (the root and each target, counting what a target inherits) satisfies one of the spec's
  required-key groups; a ``provider`` of the form ``@slug`` counts as a group of its own, like virtual_key;
- every ``provider`` is a known provider name (or an ``@slug``), and every ``custom_host`` is an http(s) URL with
  a host and without fragment, credentials or query string, wherever it sits: a fault in a target that a request
  may never reach is still a 400 naming its path (whether the host's address may be reached is checked when it is
  called);
- ``strategy`` is required with ``targets`` only when the node (counting what it inherits) has neither
  ``provider`` nor ``virtual_key``; such targets then run as ``single`` (the first target answers);
- unknown keys are rejected everywhere except inside ``cb_config``, where they are ignored;
- targets nest at most MAX_TARGET_DEPTH (32) levels;
- no string that goes into an upstream request's head (``header_values.HEADER_FIELDS``: keys, organisation and
  project, cloud credentials, hosts, regions, deployments) holds CR, LF or NUL.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import msgspec

from gateway.bounded_cache import BoundedCache
from gateway.config.inherit import Inheritance
from gateway.http.errors import ConfigError, InvalidRequest, mid_sentence
from gateway.http.fields import join_path, problem_words, read_fault
from gateway.providers.registry import is_known, provider_names
from gateway.schema import header_values
from gateway.schema.common import is_not_utf8
from gateway.schema.config import Config, Guardrail, Hook, HookOutcome, Strategy
from gateway.schema.header_values import field_with_breaks
from gateway.upstream.ssrf import check_base_url

RETRY_ATTEMPTS_MAX = 10
MAX_TARGET_DEPTH = 32

STRATEGY_MODES = ("single", "loadbalance", "fallback", "conditional")
CACHE_MODES = ("simple", "semantic")
CLOUDB_DEPLOYMENT_TYPES = ("serverless", "managed")

REQUIRED_KEY_GROUPS: tuple[tuple[str, ...], ...] = (
    ("provider", "api_key"),
    ("provider", "custom_host"),
    ("virtual_key",),
    ("strategy", "targets"),
    ("cache",),
    ("retry",),
    ("prompt_id",),
    ("forward_headers",),
    ("request_timeout",),
    ("provider", "cloudA_access_key_id", "cloudA_secret_access_key"),
    ("provider", "cloudC_region", "cloudC_service_account_json"),
    ("provider", "cloudC_region", "cloudC_project_id"),
    ("provider", "cloudB_deployment_name", "cloudB_deployment_type", "cloudB_region", "cloudB_api_version"),
    ("provider", "cloudB_endpoint_name", "cloudB_deployment_type"),
    ("after_request_hooks",),
    ("before_request_hooks",),
    ("input_guardrails",),
    ("output_guardrails",),
    ("passthrough",),
)
_GROUPS_TEXT = (
    "provider + api_key, provider + custom_host, provider as an @slug, virtual_key, strategy + targets, cache, "
    "retry, prompt_id, forward_headers, request_timeout, provider + its cloudA/cloudB/cloudC credentials, "
    "before_request_hooks, after_request_hooks, input_guardrails, output_guardrails or passthrough"
)
PASSTHROUGH_EXCLUSIVE = (
    "targets",
    "strategy",
    "override_params",
    "input_guardrails",
    "output_guardrails",
    "before_request_hooks",
    "after_request_hooks",
)
_GUARDRAIL_KEYS = frozenset({"id", "deny", "async", "on_fail", "on_success"})
_OUTCOMES = ("on_fail", "on_success")


@dataclass(frozen=True, slots=True)
class ConfigChecks:
    """The checks a config parser borrows from the layers above config (routing's condition queries, the
    guardrails' check parameters), handed in by the composition root: config never imports those layers. Each
    raises ConfigError naming the JSON path of the fault."""

    #: ``compile_query(query, where)``: the compiled condition query found at JSON path ``where``
    compile_query: Callable[[dict[str, Any], str], Any]
    #: ``validate_hook(hook, at)``: the hook's check ids and parameters
    validate_hook: Callable[[Hook, str], None]
    #: ``validate_guardrail(item, at)``: the guardrail item's check ids and parameters
    validate_guardrail: Callable[[Guardrail, str], None]


def _from_msgspec(exc: msgspec.ValidationError, prefix: str = "") -> ConfigError:
    """The ConfigError for a msgspec ValidationError raised at ``prefix`` (its ``$`` path appended)."""
    fault = read_fault(exc, prefix)
    if fault.kind == "type" and not fault.path:
        return ConfigError.at("config", f"must be a JSON object, got {fault.got}")
    return ConfigError.at(fault.path or "config", problem_words(fault))


# --- the parser and its caches ---------------------------------------------------------------------------------

_decoder = msgspec.json.Decoder(Config)

# Parsed texts: bounded by entries and by the total length of the cached texts (a text longer than a sixteenth of
# that budget is never cached). Failures are remembered apart, as (message, param), for texts up to 4 KiB, so a
# repeated bad config is answered without decoding it again.
PARSE_CACHE_MAX = 4096
PARSE_CACHE_MAX_CHARS = 2 * 1024 * 1024
FAILED_MAX = 512
FAILED_MAX_CHARS = 4096
CONDITIONS_MAX = 4096


def _text_size(text: str | bytes, config: Config) -> int:
    return len(text)


def decode_config(raw: str | bytes) -> Config:
    """Decode a config's JSON text with the schema's type checks only (no required-key groups or other rules);
    for callers that complete the config (e.g. from request headers) and then call ``ConfigParser.validate``."""
    try:
        config = _decoder.decode(raw)
    except msgspec.ValidationError as exc:
        raise _from_msgspec(exc) from None
    except msgspec.DecodeError as exc:
        if is_not_utf8(exc):
            raise ConfigError.at("config", "not valid UTF-8 (JSON text must be UTF-8 encoded)") from None
        detail = str(exc)
        raise ConfigError(f"invalid config: not valid JSON ({mid_sentence(detail)})",
                          param="config") from None
    except RecursionError:
        raise ConfigError.at("config", "nests too deeply") from None
    except UnicodeDecodeError:
        raise ConfigError.at("config", "not valid UTF-8 (JSON text must be UTF-8 encoded)") from None
    if isinstance(raw, bytes) and not raw.isascii():  # the decoder does not read the fields it skips
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ConfigError.at("config", "not valid UTF-8 (JSON text must be UTF-8 encoded)") from None
    return config


class ConfigParser:
    """JSON text -> validated Config, remembering what it parsed: texts (the same Config object for the same text
    while it stays cached), failures, compiled condition queries and (through ``inheritance``) effective targets.
    One per worker runtime."""

    def __init__(
            self, checks: ConfigChecks, inheritance: Inheritance | None = None, max_configs: int = PARSE_CACHE_MAX,
    ) -> None:
        self.checks = checks
        self.inheritance = inheritance if inheritance is not None else Inheritance()
        self._parsed: BoundedCache[str | bytes, Config] = BoundedCache(
            max_configs, max_size=PARSE_CACHE_MAX_CHARS, max_item_size=PARSE_CACHE_MAX_CHARS // 16,
            sizeof=_text_size)
        self._failed: BoundedCache[str | bytes, tuple[str, str | None]] = BoundedCache(FAILED_MAX)
        # id(strategy) -> (strategy, compiled queries in condition order); the entry holds the Strategy, so the id
        # cannot be reused while it lives
        self._conditions: BoundedCache[int, tuple[Strategy, list[Any]]] = BoundedCache(CONDITIONS_MAX)
        #: ``parse(raw) -> Config``: the validated Config for a config's JSON text; raises ConfigError (400) for text
        #: that is not JSON, not a JSON object, or not a valid config
        self.parse: Callable[[str | bytes], Config] = self._parse_function()

    def _parse_function(self) -> Callable[[str | bytes], Config]:
        """``parse``, as a closure over the cache's lookup: a hit (the hot path) costs one dict lookup and no
        attribute lookups, as little as a module-level cache would."""
        lookup = self._parsed.get
        cold = self._parse_cold

        def parse(raw: str | bytes) -> Config:
            try:
                hit = lookup(raw)
            except TypeError:  # an unhashable buffer (bytearray, memoryview): the cold path copies it to bytes
                hit = None
            if hit is not None:
                return hit
            return cold(raw)

        return parse

    def _parse_cold(self, raw: str | bytes) -> Config:
        if not isinstance(raw, (str, bytes)):
            raw = bytes(raw)
        failed = self._failed.get(raw)
        if failed is not None:
            raise ConfigError(failed[0], param=failed[1])
        try:
            cfg = self.validate(decode_config(raw))
        except ConfigError as exc:
            if len(raw) <= FAILED_MAX_CHARS:
                self._failed[raw] = (exc.message, exc.param)
            raise
        self._parsed[raw] = cfg
        return cfg

    def validate(self, cfg: Config) -> Config:
        """Check the rules the schema's types cannot express (see the module docstring); returns ``cfg`` itself.

        Object-form guardrail items still held as dicts (as decoded) are replaced in place by Guardrail Structs.
        Raises ConfigError naming the JSON path of the first fault.
        """
        if not isinstance(cfg, Config):
            raise ConfigError.at("config", "must be a JSON object")
        _check_node(self, cfg, "", None, 0)
        return cfg

    def compiled_conditions(self, strategy: Strategy) -> list[Any]:
        """The compiled queries of ``strategy.conditions``, in order: compiled once per Strategy object, then reused.

        ``parse`` compiles them while validating a conditional config, so routing only looks them up. A Strategy
        built in code is compiled on first use (a bad query raises ConfigError naming it).
        """
        got = self._conditions.get(id(strategy))
        if got is not None and got[0] is strategy:
            return got[1]
        return self.compile_conditions(strategy, "strategy")

    def compile_conditions(self, strategy: Strategy, path: str) -> list[Any]:
        """Compile (and remember) the condition queries of ``strategy``, found at JSON path ``path``."""
        compile_query = self.checks.compile_query
        compiled = [
            compile_query(condition.query, f"{path}.conditions[{i}].query")
            for i, condition in enumerate(strategy.conditions or ())
        ]
        self._conditions[id(strategy)] = (strategy, compiled)
        return compiled


# --- semantic checks --------------------------------------------------------------------------------------------


def _check_node(parser: ConfigParser, node: Config, base: str, inherited: Config | None, depth: int) -> None:
    if depth > MAX_TARGET_DEPTH:
        raise ConfigError.at(base, f"targets nest deeper than {MAX_TARGET_DEPTH} levels")
    eff = parser.inheritance.effective(inherited, node)
    _check_keys(parser.checks, node, base)
    if node.passthrough:
        _check_passthrough(node, eff, base)
    _check_routing(parser, node, eff, base)
    _check_groups(eff, base)
    if node.targets:
        prefix = join_path(base, "targets")
        for i, target in enumerate(node.targets):
            if not isinstance(target, Config):
                raise ConfigError.at(f"{prefix}[{i}]", "must be an object")
            _check_node(parser, target, f"{prefix}[{i}]", eff, depth + 1)


def _is_int(value: Any) -> bool:
    return type(value) is int


def _is_number(value: Any) -> bool:
    return type(value) is int or type(value) is float


def _status_codes(codes: list[int] | None, path: str) -> None:
    if codes is None:
        return
    for i, code in enumerate(codes):
        if type(code) is not int or not 100 <= code <= 599:
            raise ConfigError.at(f"{path}[{i}]", "must be an HTTP status code (an integer 100..599)")


def _check_provider(n: Config, base: str) -> None:
    provider = n.provider
    if provider is not None:
        if not provider or provider == "@":
            raise ConfigError.at(join_path(base, "provider"), "must be a non-empty provider name or @slug")
        if provider[0] != "@":
            if not is_known(provider):
                raise ConfigError.at(
                    join_path(base, "provider"),
                    f"unknown provider {provider!r}; accepted providers: {', '.join(provider_names())}",
                )
    if n.custom_host is not None:
        at = join_path(base, "custom_host")
        try:
            check_base_url(n.custom_host, at)
        except InvalidRequest as exc:
            raise ConfigError.at(at, exc.message[len(at) + 1:]) from None


def _check_keys(checks: ConfigChecks, n: Config, base: str) -> None:
    broken = field_with_breaks(n)
    if broken is not None:
        raise ConfigError.at(join_path(base, broken), header_values.MESSAGE)
    if n.provider is not None or n.custom_host is not None:
        _check_provider(n, base)
    if n.request_timeout is not None and (not _is_int(n.request_timeout) or n.request_timeout <= 0):
        raise ConfigError.at(join_path(base, "request_timeout"), "must be an integer > 0 (milliseconds)")
    if n.weight is not None and (not _is_number(n.weight) or n.weight < 0):
        raise ConfigError.at(join_path(base, "weight"), "must be a number >= 0")
    _status_codes(n.on_status_codes, join_path(base, "on_status_codes"))
    if n.cache is not None:
        if n.cache.mode not in CACHE_MODES:
            raise ConfigError.at(join_path(base, "cache.mode"), "must be one of simple, semantic")
        if n.cache.max_age is not None and (not _is_int(n.cache.max_age) or n.cache.max_age < 0):
            raise ConfigError.at(join_path(base, "cache.max_age"), "must be an integer >= 0 (seconds)")
    if n.cb_config is not None:
        cb = n.cb_config
        if not _is_number(cb.failure_threshold) or cb.failure_threshold < 1:
            raise ConfigError.at(join_path(base, "cb_config.failure_threshold"), "must be >= 1")
        if not _is_number(cb.cooldown_interval) or cb.cooldown_interval < 30000:
            raise ConfigError.at(join_path(base, "cb_config.cooldown_interval"), "must be >= 30000 (milliseconds)")
        _status_codes(cb.failure_status_codes, join_path(base, "cb_config.failure_status_codes"))
    if n.retry is not None:
        attempts = n.retry.attempts
        if not _is_int(attempts) or not 0 <= attempts <= RETRY_ATTEMPTS_MAX:
            raise ConfigError.at(join_path(base, "retry.attempts"), f"must be an integer 0..{RETRY_ATTEMPTS_MAX}")
        _status_codes(n.retry.on_status_codes, join_path(base, "retry.on_status_codes"))
    if n.cloudB_deployment_type is not None and n.cloudB_deployment_type not in CLOUDB_DEPLOYMENT_TYPES:
        raise ConfigError.at(join_path(base, "cloudB_deployment_type"), "must be one of serverless, managed")
    if n.drop_params is not None:
        for i, path in enumerate(n.drop_params):
            if type(path) is not str or not path or "" in path.split("."):
                raise ConfigError.at(
                    f"{join_path(base, 'drop_params')}[{i}]",
                    "must be a dot path with no empty segment (like `metadata.user` or `messages.0.name`)",
                )
    if n.before_request_hooks is not None:
        _check_hooks(checks, n.before_request_hooks, join_path(base, "before_request_hooks"), before=True)
    if n.after_request_hooks is not None:
        _check_hooks(checks, n.after_request_hooks, join_path(base, "after_request_hooks"), before=False)
    if n.input_guardrails is not None:
        _check_guardrails(checks, n.input_guardrails, join_path(base, "input_guardrails"), output=False)
    if n.output_guardrails is not None:
        _check_guardrails(checks, n.output_guardrails, join_path(base, "output_guardrails"), output=True)


def _check_outcome(outcome: HookOutcome | None, path: str, deny_allowed: bool, where: str) -> None:
    if outcome is None:
        return
    if outcome.deny is not None and not deny_allowed:
        raise ConfigError.at(f"{path}.deny", f"is allowed only on {where}")
    feedback = outcome.feedback
    if feedback is not None:
        for name in ("value", "weight"):
            value = getattr(feedback, name)
            if value is not None and not _is_number(value):
                raise ConfigError.at(f"{path}.feedback.{name}", "must be a number")


def _check_hooks(checks: ConfigChecks, hooks: list[Hook], path: str, before: bool) -> None:
    for i, hook in enumerate(hooks):
        at = f"{path}[{i}]"
        if not isinstance(hook, Hook):
            raise ConfigError.at(at, "must be an object")
        if type(hook.id) is not str or not hook.id:
            raise ConfigError.at(f"{at}.id", "must be a non-empty string")
        if before and hook.async_ is not None:
            raise ConfigError.at(f"{at}.async", "is allowed only on after_request_hooks")
        for name in _OUTCOMES:
            _check_outcome(getattr(hook, name), f"{at}.{name}", before, "before_request_hooks")
        checks.validate_hook(hook, at)


def _check_guardrails(checks: ConfigChecks, items: list[Any], path: str, output: bool) -> None:
    for i, item in enumerate(items):
        at = f"{path}[{i}]"
        if type(item) is str:
            if not item:
                raise ConfigError.at(at, "must be a non-empty guardrail id")
            continue
        if type(item) is dict:
            item = items[i] = _guardrail_from_dict(item, at)
        elif not isinstance(item, Guardrail):
            raise ConfigError.at(at, "must be a string or an object")
        if item.id is None and not item.checks:
            raise ConfigError.at(at, "must have an id or at least one check")
        for key, parameters in item.checks.items():
            if type(parameters) is not dict:
                raise ConfigError.at(join_path(at, key), "must be an object (the parameters of that check)")
        for name in _OUTCOMES:
            _check_outcome(getattr(item, name), f"{at}.{name}", output, "output_guardrails")
        checks.validate_guardrail(item, at)


def _guardrail_from_dict(raw: dict[str, Any], at: str) -> Guardrail:
    gid = raw.get("id")
    if gid is not None and (type(gid) is not str or not gid):
        raise ConfigError.at(f"{at}.id", "must be a non-empty string")
    flags = {}
    for name in ("deny", "async"):
        value = raw.get(name)
        if value is not None and type(value) is not bool:
            raise ConfigError.at(f"{at}.{name}", "must be a boolean")
        flags[name] = value
    outcomes: dict[str, HookOutcome | None] = {}
    for name in _OUTCOMES:
        value = raw.get(name)
        if value is None:
            outcomes[name] = None
            continue
        try:
            outcomes[name] = msgspec.convert(value, HookOutcome)
        except msgspec.ValidationError as exc:
            raise _from_msgspec(exc, f"{at}.{name}") from None
    checks = {}
    for key, value in raw.items():
        if key in _GUARDRAIL_KEYS:
            continue
        if type(value) is not dict:
            raise ConfigError.at(join_path(at, key), "must be an object (the parameters of that check)")
        checks[key] = value
    return Guardrail(
        id=gid,
        deny=flags["deny"],
        async_=flags["async"],
        on_fail=outcomes["on_fail"],
        on_success=outcomes["on_success"],
        checks=checks,
    )


def _check_passthrough(node: Config, eff: Config, base: str) -> None:
    for key in PASSTHROUGH_EXCLUSIVE:
        if getattr(node, key) is not None:
            raise ConfigError.at(join_path(base, key), "cannot be combined with passthrough: true")
        if getattr(eff, key) is not None:
            raise ConfigError.at(
                join_path(base, "passthrough"), f"passthrough: true cannot be combined with the inherited {key}"
            )


def _check_routing(parser: ConfigParser, node: Config, eff: Config, base: str) -> None:
    strategy, targets = node.strategy, node.targets
    if strategy is None:
        if targets is not None and eff.provider is None and eff.virtual_key is None:
            raise ConfigError.at(join_path(base, "strategy"), "is required with targets when neither provider nor "
                                 "virtual_key is set")
        return
    if not isinstance(strategy, Strategy):
        raise ConfigError.at(join_path(base, "strategy"), "must be an object")
    if not targets:
        raise ConfigError.at(join_path(base, "targets"), "must be a non-empty array when strategy is set")
    at = join_path(base, "strategy")
    if strategy.mode not in STRATEGY_MODES:
        raise ConfigError.at(f"{at}.mode", f"must be one of {', '.join(STRATEGY_MODES)}")
    _status_codes(strategy.on_status_codes, f"{at}.on_status_codes")
    if strategy.mode == "loadbalance":
        # An unset weight counts as 1, so only targets that all say 0 leave nothing to draw.
        if all(isinstance(t, Config) and t.weight is not None and t.weight == 0 for t in targets):
            raise ConfigError.at(join_path(base, "targets"),
                                 "in loadbalance mode at least one target needs a weight > 0")
        return
    if strategy.mode != "conditional":
        return
    if not strategy.conditions:
        raise ConfigError.at(f"{at}.conditions", "is required in conditional mode (a non-empty array)")
    if strategy.default is None:
        raise ConfigError.at(f"{at}.default", "is required in conditional mode")
    names = {t.name for t in targets if isinstance(t, Config) and t.name is not None}
    for i, condition in enumerate(strategy.conditions):
        if condition.then not in names:
            raise ConfigError.at(f"{at}.conditions[{i}].then", _unnamed(condition.then))
    if strategy.default not in names:
        raise ConfigError.at(f"{at}.default", _unnamed(strategy.default))
    parser.compile_conditions(strategy, at)


def _unnamed(name: str) -> str:
    return f"must be the name of one of this config's targets; none is named {name!r}"


def _check_groups(eff: Config, base: str) -> None:
    for group in REQUIRED_KEY_GROUPS:
        for key in group:
            if getattr(eff, key) is None:
                break
        else:
            return
    provider = eff.provider
    if provider is not None and provider.startswith("@"):
        return
    where = base or "config"
    if provider is not None:
        raise ConfigError.at(
            where,
            f"provider {provider!r} needs api_key, custom_host or the provider's cloud credentials "
            f"(a config must set one of: {_GROUPS_TEXT}; a target counts what it inherits)",
        )
    raise ConfigError.at(where, f"must set one of: {_GROUPS_TEXT} (a target counts what it inherits)")
