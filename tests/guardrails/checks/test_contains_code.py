"""default.containsCode: fenced code blocks by language (aliases accepted)."""

from __future__ import annotations

import pytest

from tests.guardrails.checks.subjects import answer, param_fault, passes

PY = "Try this:\n```py\nprint('hi')\n```\nand this:\n```sql\nSELECT 1;\n```\n"


@pytest.mark.parametrize(("language", "expected"), [("python", True), ("SQL", True), ("postgres", True),
                                                     ("javascript", False), ("c++", False)])
def test_blocks_by_language(language, expected):
    assert passes("default.containsCode", {"format": language}, answer(PY)) is expected


def test_any_block_without_format_and_not_inverts():
    assert passes("default.containsCode", {}, answer(PY))
    assert not passes("default.containsCode", {}, answer("plain prose, `inline` only"))
    assert passes("default.containsCode", {"format": "python", "not": True}, answer("no code"))


def test_unknown_language_is_refused():
    fault = param_fault("default.containsCode", {"format": "klingon"})
    assert fault == "input_guardrails[0].default.containsCode.format"
