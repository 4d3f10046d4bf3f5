"""What a translating adapter does with each unified request field: one table per adapter and endpoint.

An adapter that translates the unified (vendorA) body into its provider's own wire format (anthropic, cloudA,
cloudC) cannot send every field. Its ``FieldTable`` says, as data:

- ``taken``: the fields it sends, as they are or translated (``stop`` as ``stop_sequences``...);
- ``refused``: fields it cannot honour, with the values that are a 400 naming the field and the provider because
  leaving them out would change what the client gets back (``logprobs: true`` answered without log probabilities,
  ``n: 2`` answered with one choice). Other values of a refused field mean what the provider does anyway
  (``logprobs: false``, ``n: 1``) and are not reported;
- ``loose_only``: fields taken only when the target's ``strict_vendorA_compliance`` is false;
- every other field present in the body (and not ``null``) is dropped: the upstream never sees it, and the answer
  says so in ``x-gateway-dropped-params`` (comma-separated names, in body order).

vendorA-format providers (vendorA, the vendorA-compatible catalogue, cloudB) forward the client's body and have no
table: nothing is computed for their requests. The dropped list is worked out only for a translating adapter, from
the body's top-level keys (decoded without their values).
"""

from __future__ import annotations

import re
from typing import Any, Callable

import msgspec

from gateway.http.errors import InvalidRequest

#: how many dropped names the header lists at most (a body may hold any number of unknown fields)
MAX_NAMED = 32
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_keys = msgspec.json.Decoder(dict[str, msgspec.Raw])
_NULL = msgspec.Raw(b"null")

Refusal = tuple[Callable[[Any], bool], str]


def above_one(value: Any) -> bool:
    return value is not None and value > 1


def is_true(value: Any) -> bool:
    return bool(value)


def present(value: Any) -> bool:
    return value is not None


class FieldTable:
    """One adapter's table for one endpoint (see the module docstring)."""

    __slots__ = ("taken", "refused", "loose_only", "_skipped")

    def __init__(self, taken: frozenset[str], refused: dict[str, Refusal] | None = None,
                 loose_only: frozenset[str] = frozenset()) -> None:
        self.taken = taken
        self.refused = refused or {}
        self.loose_only = loose_only
        #: names never reported as dropped whatever the target (taken, or refused unless honoured)
        self._skipped = taken | frozenset(self.refused)

    def refuse(self, request: Any) -> None:
        """A 400 naming the first field whose value the provider cannot honour."""
        for field, (refuses, message) in self.refused.items():
            if refuses(getattr(request, field, None)):
                raise InvalidRequest(message, param=field)

    def dropped(self, body: bytes, strict: bool = True) -> bytes | None:
        """The ``x-gateway-dropped-params`` value for a request body (None when nothing is dropped).

        ``strict`` is the target's strict_vendorA_compliance (unset counts as true): ``loose_only`` fields are
        dropped under it."""
        try:
            keys = _keys.decode(body)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None  # the body was decoded once already; nothing to report on one that does not decode here
        skipped = self._skipped if strict or not self.loose_only else self._skipped | self.loose_only
        names = [name for name, raw in keys.items()
                 if name not in skipped and raw != _NULL and _NAME.fullmatch(name)]
        if not names:
            return None
        return ",".join(names[:MAX_NAMED]).encode()
