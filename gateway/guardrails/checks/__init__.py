"""The built-in checks by id (``default.<name>``), and building one from its parameters."""

from __future__ import annotations

from typing import Any

from gateway.guardrails.checks.base import Check, ParamError, Verdict
from gateway.guardrails.checks.character_count import CharacterCount
from gateway.guardrails.checks.contains import Contains
from gateway.guardrails.checks.contains_code import ContainsCode
from gateway.guardrails.checks.ends_with import EndsWith
from gateway.guardrails.checks.json_keys import JsonKeys
from gateway.guardrails.checks.json_schema import JsonSchema
from gateway.guardrails.checks.jwt import Jwt
from gateway.guardrails.checks.lowercase import AllLowercase
from gateway.guardrails.checks.model_whitelist import ModelWhitelist
from gateway.guardrails.checks.pii import Pii
from gateway.guardrails.checks.regex_match import RegexMatch
from gateway.guardrails.checks.request_types import AllowedRequestTypes
from gateway.guardrails.checks.required_metadata import RequiredMetadataKeys
from gateway.guardrails.checks.sentence_count import SentenceCount
from gateway.guardrails.checks.uppercase import AllUppercase
from gateway.guardrails.checks.valid_urls import ValidUrls
from gateway.guardrails.checks.webhook import Webhook
from gateway.guardrails.checks.word_count import WordCount

__all__ = ["CHECKS", "Check", "ParamError", "Verdict", "build_check"]

CHECKS: dict[str, type[Check]] = {
    cls.id: cls
    for cls in (
        RegexMatch, Contains, WordCount, SentenceCount, CharacterCount, JsonSchema, JsonKeys, ValidUrls,
        ContainsCode, AllUppercase, AllLowercase, EndsWith, ModelWhitelist, RequiredMetadataKeys,
        AllowedRequestTypes, Jwt, Pii, Webhook,
    )
}


def build_check(check_id: Any, params: Any, path: str, id_path: str | None = None) -> Check:
    """The check ``check_id`` with validated ``params``. ParamError names ``id_path`` (default ``path``) for an
    unknown id and ``path.<parameter>`` for a bad parameter."""
    cls = CHECKS.get(check_id) if isinstance(check_id, str) else None
    if cls is None:
        raise ParamError(id_path or path, f"unknown check {check_id!r}; the built-in checks are "
                                          f"{', '.join(sorted(CHECKS))}")
    return cls.build(params, path)
