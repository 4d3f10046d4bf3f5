"""``default.pii``: fails when the text holds personal data, or (``redact: true``) replaces it and passes.

Parameters: ``categories`` (array, default all of them): ``email``, ``phone``, ``creditCard``, ``ipAddress``;
``redact`` (boolean, default false). Unlike the other checks it reads every text of the request (every message,
not only the last) or of the answer (every choice), so nothing found goes on unnoticed. Without ``redact`` a find
fails the check. With ``redact`` each find is replaced by ``[EMAIL]``, ``[PHONE]``, ``[CREDIT_CARD]`` or
``[IP_ADDRESS]``, the request goes upstream (or the answer goes back) redacted, and the check passes with
``transformed`` set on its hook's result. ``data`` counts the finds per category (never the values).

What is found:
- emails: ``local@domain.tld``;
- card numbers: 13 to 19 digits, optionally grouped by spaces or dashes, that pass the Luhn checksum;
- phone numbers: 10 to 15 digits, optionally starting with ``+`` and grouped by spaces, dots, dashes or a
  parenthesised area code (or 8 to 9 digits after a ``+``), not part of a longer number, not a date or a time;
- IP addresses: dotted IPv4, and IPv6 addresses (with a digit, not glued to a word, so ``std::vector`` is none)
  that parse as such.
When finds overlap, the earlier category in that list wins. Texts over 8 KiB in all are scanned in the guardrail
worker pool, off the event loop.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

from gateway.guardrails.checks.base import Check, ParamError, Params, Verdict, join_path
from gateway.guardrails.text import Subject

Category = Literal["email", "phone", "creditCard", "ipAddress"]
CATEGORIES: tuple[str, ...] = ("email", "creditCard", "ipAddress", "phone")  # overlap priority
PLACEHOLDERS = {"email": "[EMAIL]", "phone": "[PHONE]", "creditCard": "[CREDIT_CARD]", "ipAddress": "[IP_ADDRESS]"}

_EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63})*\.[A-Za-z]{2,24}\b")
_CARD = re.compile(r"(?<![0-9])[0-9](?:[ -]?[0-9]){12,18}(?![0-9])")
_PHONE = re.compile(r"(?<![\w+])(?:\+[0-9]{1,3}[ .-]?)?(?:\([0-9]{1,4}\)[ .-]?)?[0-9]{2,4}(?:[ .-]?[0-9]{2,4}){1,5}"
                    r"(?![0-9]|:[0-9])")
_SEPARATORS = re.compile(r"[ -]")
_DATE = re.compile(r"(?:19|20)[0-9]{2}[-./](?:0[1-9]|1[0-2])[-./][0-9]{2}")
# Patterns start with a character class (not a lookbehind) so the regex engine can skip ahead quickly.
_IPV4 = re.compile(r"[0-9](?<![0-9.][0-9])[0-9]{0,2}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}(?![0-9]|\.[0-9])")
_V6_HINT = re.compile(r":[0-9A-Fa-f]{0,4}:")
_IPV6 = re.compile(r"(?<![\w:])[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?![\w:])")


class PiiParams(Params, frozen=True):
    categories: list[Category] | None = None
    redact: bool = False


def luhn_valid(digits: str) -> bool:
    """The Luhn checksum of a string of digits."""
    total = 0
    for i, char in enumerate(reversed(digits)):
        d = ord(char) - 48
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def _cards(text: str) -> list[tuple[int, int]]:
    spans = []
    for m in _CARD.finditer(text):
        digits = _SEPARATORS.sub("", m.group(0))
        if 13 <= len(digits) <= 19 and luhn_valid(digits):
            spans.append(m.span())
    return spans


def _phones(text: str) -> list[tuple[int, int]]:
    spans = []
    for m in _PHONE.finditer(text):
        found = m.group(0)
        digits = sum(c.isdigit() for c in found)
        if _DATE.match(found):
            continue
        if 10 <= digits <= 15 or (found.startswith("+") and 8 <= digits <= 15):
            spans.append(m.span())
    return spans


def _ips(text: str) -> list[tuple[int, int]]:
    spans = [m.span() for m in _IPV4.finditer(text) if all(int(octet) < 256 for octet in m.group(0).split("."))]
    if _V6_HINT.search(text) is None:  # every IPv6 form with two colons has one
        return spans
    for m in _IPV6.finditer(text):
        found = m.group(0)
        if found.count(":") >= 2 and any(c.isdigit() for c in found):
            try:
                ipaddress.IPv6Address(found)
            except ValueError:
                continue
            spans.append(m.span())
    return spans


_FINDERS = {
    "email": lambda text: [m.span() for m in _EMAIL.finditer(text)],
    "creditCard": _cards,
    "ipAddress": _ips,
    "phone": _phones,
}


def find_pii(text: str, categories: tuple[str, ...]) -> list[tuple[int, int, str]]:
    """Non-overlapping (start, end, category) finds in text order; on overlap the earlier category wins."""
    taken: list[tuple[int, int, str]] = []
    for category in CATEGORIES:
        if category not in categories or ("@" not in text and category == "email"):
            continue
        for start, end in _FINDERS[category](text):
            if all(end <= s or start >= e for s, e, _ in taken):
                taken.append((start, end, category))
    taken.sort()
    return taken


def redact_text(text: str, finds: list[tuple[int, int, str]]) -> str:
    out, last = [], 0
    for start, end, category in finds:
        out.append(text[last:start])
        out.append(PLACEHOLDERS[category])
        last = end
    out.append(text[last:])
    return "".join(out)


class Pii(Check):
    id = "default.pii"
    params_type = PiiParams
    offload_chars = 8 * 1024  # about 0.1 microsecond a character: 8 KiB is under a millisecond on the loop

    def __init__(self, params: PiiParams, path: str) -> None:
        super().__init__(params, path)
        if params.categories is not None and not params.categories:
            raise ParamError(join_path(path, "categories"), f"must name at least one of {', '.join(CATEGORIES)}")
        self.categories = tuple(params.categories or CATEGORIES)
        self.redacts = params.redact

    def offload(self, subject: Subject) -> bool:
        return sum(len(text) for _, text in subject.segments()) > self.offload_chars

    def run(self, subject: Subject) -> Verdict:
        counts: dict[str, int] = {}
        for _, text in subject.segments():
            for _, _, category in find_pii(text, self.categories):
                counts[category] = counts.get(category, 0) + 1
        if not counts:
            return Verdict(True, "no personal data found")
        found = ", ".join(f"{n} {category}" for category, n in counts.items())
        if self.params.redact:
            return Verdict(True, f"redacted {found}", {"redacted": counts})
        return Verdict(False, f"personal data found: {found}", {"found": counts})

    def redact(self, segments: list[str]) -> list[str]:
        return [redact_text(text, find_pii(text, self.categories)) for text in segments]
