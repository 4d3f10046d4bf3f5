"""The literal guard of the semantic cache: two prompts may share an answer only if their numbers and quotes agree.

A cosine score cannot tell "Convert 10 USD to EUR" from "Convert 100 USD to EUR" (0.91 with the packaged model)
or "Translate 'good morning'" from "Translate 'good night'". So a semantic hit is served only when both prompts
have the same literals, in the same order:

- numbers: every run of digits, with its decimal part (``3.14``, ``1.2.3``), a leading minus sign when it stands
  before the number, and thousands separators removed (``1,000`` = ``1000``); nothing else is normalised
  (``1.50`` ≠ ``1.5``, ``007`` ≠ ``7``: a miss costs an upstream call, a wrong hit a wrong answer);
- number words (``zero`` … ``twenty``, the tens, ``hundred`` … ``trillion``), as their digits (``ten`` = ``10``);
- quoted strings, case and all: ``"…"``, ``'…'`` (only when the quote marks are not inside a word, so
  ``what's`` quotes nothing), ```…```, `` `…` ``, ``“…”``, ``‘…’``, ``«…»``, ``„…“``.

Numbers inside a quoted string count as part of that string only.
"""

from __future__ import annotations

import re

_QUOTED = re.compile(
    r"```(?P<fence>.+?)```"
    r"|`(?P<tick>[^`\n]+)`"
    r'|"(?P<double>[^"\n]+)"'
    r"|(?<![\w'])'(?P<single>[^'\n]+)'(?![\w'])"
    r"|“(?P<curly>[^”\n]+)”"
    r"|‘(?P<curly1>[^’\n]+)’"
    r"|«(?P<angle>[^»\n]+)»"
    r"|„(?P<low>[^“”\n]+)[“”]",
    re.DOTALL,
)
_NUMBER = re.compile(r"(?:(?<![\w.-])-)?\d+(?:[.,]\d+)*")
_THOUSANDS = re.compile(r"^-?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
_WORDS = {
    **{w: str(i) for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen twenty".split()
    )},
    **{w: str(10 * i) for i, w in enumerate("thirty forty fifty sixty seventy eighty ninety".split(), 3)},
    "hundred": "100", "thousand": "1000", "million": "1000000", "billion": "1000000000", "trillion": "1000000000000",
}
_NUMBER_WORD = re.compile(r"\b(?:" + "|".join(sorted(_WORDS, key=len, reverse=True)) + r")\b", re.IGNORECASE)


def literals(text: str) -> tuple[str, ...]:
    """The text's numbers (``n:…``) and quoted strings (``q:…``) in order of appearance."""
    found: list[tuple[int, str]] = []
    plain: list[tuple[int, str]] = []
    last = 0
    for match in _QUOTED.finditer(text):
        found.append((match.start(), "q:" + next(g for g in match.groups() if g is not None)))
        plain.append((last, text[last : match.start()]))
        last = match.end()
    plain.append((last, text[last:]))
    for offset, part in plain:
        if not part:
            continue
        for match in _NUMBER.finditer(part):
            number = match.group()
            if "," in number and _THOUSANDS.match(number):
                number = number.replace(",", "")
            found.append((offset + match.start(), "n:" + number))
        for match in _NUMBER_WORD.finditer(part):
            found.append((offset + match.start(), "n:" + _WORDS[match.group().lower()]))
    found.sort()
    return tuple(item for _, item in found)


def same_literals(a: str, b: str) -> bool:
    """True when both texts have the same numbers and quoted strings in the same order (see the module)."""
    return literals(a) == literals(b)
