"""The check interface: parameters decoded and validated once, a verdict per request, and the Subject checks read."""

from __future__ import annotations

import abc
from typing import Any, ClassVar

import msgspec

from gateway.guardrails.text import Subject
from gateway.http.fields import join_path as join_path  # the one JSON-path join, as the checks import it
from gateway.http.fields import problem_words, read_fault

#: Input larger than this many characters makes a CPU-bound check run in the guardrail worker pool instead of on
#: the event loop (each check may say otherwise through ``offload_chars``).
OFFLOAD_CHARS = 32 * 1024


class ParamError(ValueError):
    """A check's parameter is not valid. ``param`` is the JSON path of the fault, ``detail`` says what is wrong."""

    def __init__(self, param: str, detail: str) -> None:
        self.param = param
        self.detail = detail
        super().__init__(f"{param}: {detail}")


class Params(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """Base of every check's parameter Struct: frozen, unknown parameters rejected."""


class Verdict(msgspec.Struct, frozen=True, gc=False):
    """What one check says about one request: passed or not, why, and optional details for ``hook_results``."""

    verdict: bool
    explanation: str
    data: Any = None


class Check(abc.ABC):
    """A built-in check: ``id`` (``default.<name>``), its ``Params`` Struct, and ``run`` (or ``run_io``).

    A Check object is built once per config (its parameters validated and anything costly, such as a regex or a
    JSON-schema validator, prepared in ``__init__``) and then only read, from any thread.
    """

    id: ClassVar[str]
    params_type: ClassVar[type[Params]]
    #: True for checks that wait on the network (``run_io`` is awaited; ``run`` is not used); may be set per instance.
    io: bool = False
    #: Subject size (characters) above which ``run`` goes to the worker pool; None keeps it on the event loop.
    offload_chars: ClassVar[int | None] = OFFLOAD_CHARS
    #: True for checks that rewrite what they find (PII with ``redact``): see ``redact``; may be set per instance.
    redacts: bool = False

    def __init__(self, params: Any, path: str) -> None:
        self.params = params
        self.path = path

    @classmethod
    def build(cls, raw: Any, path: str) -> Check:
        """Decode and validate ``raw`` parameters; raise ParamError naming ``path.<parameter>`` when one is bad."""
        return cls(decode_params(cls.params_type, raw, path), path)

    def offload(self, subject: Subject) -> bool:
        """Whether this request's run belongs in the worker pool rather than on the event loop."""
        limit = self.offload_chars
        return limit is not None and subject.size() > limit

    def run(self, subject: Subject) -> Verdict:
        """The verdict for ``subject`` (CPU only; may run in a worker thread)."""
        raise NotImplementedError

    async def run_io(self, subject: Subject, io: Any) -> Verdict:
        """The verdict for checks that wait on the network; ``io`` is the runner's HTTP path (``CheckIO``)."""
        raise NotImplementedError

    def redact(self, segments: list[str]) -> list[str]:
        """The segments with what this check found replaced (only for ``redacts`` checks)."""
        return segments


# --- parameter decoding -----------------------------------------------------------------------------------------

def decode_params(params_type: type[Params], raw: Any, path: str, noun: str = "key") -> Any:
    """``raw`` (a JSON object) as ``params_type``; ParamError naming the parameter's path when it does not fit, in
    a config's words (the parameters are part of one; a body says ``unknown field`` with ``noun="field"``)."""
    if not isinstance(raw, dict):
        raise ParamError(path, "must be an object (the parameters of the check)")
    try:
        return msgspec.convert(raw, params_type)
    except msgspec.ValidationError as exc:
        fault = read_fault(exc, path)
        raise ParamError(fault.path, f"unknown {noun}" if fault.kind == "unknown" else problem_words(fault)) from None


def check_range(low: int | None, high: int | None, path: str, low_name: str, high_name: str) -> None:
    """A (min, max) pair: each >= 0 and min <= max when both are given."""
    if low is not None and high is not None and low > high:
        raise ParamError(join_path(path, high_name), f"must be >= {low_name} ({low})")


def words_list(words: list[str], path: str, name: str) -> tuple[str, ...]:
    """A non-empty list of non-empty strings."""
    if not words:
        raise ParamError(join_path(path, name), "must be a non-empty array of strings")
    for i, word in enumerate(words):
        if not word:
            raise ParamError(f"{join_path(path, name)}[{i}]", "must be a non-empty string")
    return tuple(words)


def inverted(passed: bool, negate: bool) -> bool:
    """``passed``, flipped when the check's ``not`` parameter is true."""
    return passed is not negate
