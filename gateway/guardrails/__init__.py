"""Guardrails and hooks: built-in checks, the runner that applies them before and after a request, and results.

The pipeline builds one ``GuardrailRunner`` per worker and, for a config node with hooks or guardrails, calls
``before`` (with a ``GuardrailRequest``) and ``after`` (with a ``GuardrailAnswer`` too); each returns a
``PhaseOutcome``. ``HookResults`` gathers the phases' results into the response's ``hook_results`` and says the
status (446 deny, 246 failed, 200), ``HookResults.denied()`` is the 446 error, and ``attach_hook_results`` /
``attach_hook_results_to_event`` add ``hook_results`` to a JSON answer / the first chunk of a stream.
"""

from gateway.guardrails.checks import CHECKS, ParamError, build_check
from gateway.guardrails.hooks import validate_guardrail, validate_hook
from gateway.guardrails.results import (
    CheckResult,
    FeedbackRecord,
    HookResult,
    HookResults,
    PhaseOutcome,
    attach_hook_results,
    attach_hook_results_to_event,
)
from gateway.guardrails.runner import GuardrailRunner
from gateway.guardrails.text import GuardrailAnswer, GuardrailRequest

__all__ = [
    "CHECKS", "CheckResult", "FeedbackRecord", "GuardrailAnswer", "GuardrailRequest", "GuardrailRunner",
    "HookResult", "HookResults", "ParamError", "PhaseOutcome", "attach_hook_results",
    "attach_hook_results_to_event", "build_check", "validate_guardrail", "validate_hook",
]
