"""The checks a config parser borrows from routing and the guardrails, built here at the top so that ``config``
imports neither (they sit above it): ``ConfigParser(config_checks())``. The guardrails package is imported at the
first config that names a hook or guardrail, so a worker that uses none never loads it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.config.validate import ConfigChecks
from gateway.http.errors import ConfigError
from gateway.http.fields import join_path
from gateway.routing.conditions import CompiledQuery, QueryError, compile_query

if TYPE_CHECKING:
    from typing import Any

    from gateway.schema.config import Guardrail, Hook


def config_checks() -> ConfigChecks:
    """Routing's condition compiler and the guardrails' parameter checks, each raising ConfigError at its path."""
    return ConfigChecks(compile_query=_compile_query, validate_hook=_validate_hook,
                        validate_guardrail=_validate_guardrail)


def _compile_query(query: dict[str, Any], where: str) -> CompiledQuery:
    try:
        return compile_query(query)
    except QueryError as exc:
        raise ConfigError.at(join_path(where, exc.path or ""), exc.message) from None


def _validate_hook(hook: Hook, at: str) -> None:
    from gateway.guardrails.checks import ParamError
    from gateway.guardrails.hooks import validate_hook

    try:
        validate_hook(hook, at)
    except ParamError as exc:
        raise ConfigError.at(exc.param, exc.detail) from None


def _validate_guardrail(item: Guardrail, at: str) -> None:
    from gateway.guardrails.checks import ParamError
    from gateway.guardrails.hooks import validate_guardrail

    try:
        validate_guardrail(item, at)
    except ParamError as exc:
        raise ConfigError.at(exc.param, exc.detail) from None
