"""The checks a config parser borrows from routing and the guardrails, built here at the top so that ``config``
imports neither (they sit above it): ``ConfigParser(config_checks())``."""

from __future__ import annotations

from typing import Any, Callable

from gateway.config.validate import ConfigChecks, join_path
from gateway.guardrails.checks import ParamError
from gateway.guardrails.hooks import validate_guardrail, validate_hook
from gateway.http.errors import ConfigError
from gateway.routing.conditions import CompiledQuery, QueryError, compile_query
from gateway.schema.config import Guardrail, Hook


def config_checks() -> ConfigChecks:
    """Routing's condition compiler and the guardrails' parameter checks, each raising ConfigError at its path."""
    return ConfigChecks(
        compile_query=_compile_query,
        validate_hook=_params(validate_hook),
        validate_guardrail=_params(validate_guardrail),
    )


def _compile_query(query: dict[str, Any], where: str) -> CompiledQuery:
    try:
        return compile_query(query)
    except QueryError as exc:
        raise ConfigError.at(join_path(where, exc.path or ""), exc.message) from None


def _params(validate: Callable[[Any, str], None]) -> Callable[[Any, str], None]:
    def check(item: Hook | Guardrail, at: str) -> None:
        try:
            validate(item, at)
        except ParamError as exc:
            raise ConfigError.at(exc.param, exc.detail) from None

    return check
