"""``default.containsCode``: passes when the text holds a fenced code block in a given language (``not`` inverts).

Parameters: ``format`` (string, optional): the language, case-insensitive, one of ``LANGUAGES`` below or an alias
(``py``, ``js``, ``ts``, ``sh``, ``c++``, ``c#``, ``golang``, ``yml``, ...); without it any fenced block counts.
``not`` (boolean, default false). A block is a Markdown fence: a line starting with three backticks (or tildes)
followed by the language tag.
"""

from __future__ import annotations

import re

import msgspec

from gateway.guardrails.checks.base import Check, ParamError, Params, Verdict, inverted, join_path
from gateway.guardrails.text import Subject

#: canonical language -> the fence tags that mean it
LANGUAGES: dict[str, tuple[str, ...]] = {
    "python": ("python", "py", "python3", "py3"),
    "javascript": ("javascript", "js", "node", "nodejs", "jsx", "mjs"),
    "typescript": ("typescript", "ts", "tsx"),
    "sql": ("sql", "mysql", "postgresql", "postgres", "psql", "sqlite", "plsql", "tsql"),
    "java": ("java",),
    "c": ("c", "h"),
    "cpp": ("cpp", "c++", "cc", "cxx", "hpp"),
    "csharp": ("csharp", "cs", "c#"),
    "go": ("go", "golang"),
    "rust": ("rust", "rs"),
    "ruby": ("ruby", "rb"),
    "php": ("php",),
    "shell": ("shell", "sh", "bash", "zsh", "console", "shellscript", "powershell", "ps1"),
    "html": ("html", "htm", "xhtml"),
    "css": ("css", "scss", "sass", "less"),
    "json": ("json", "jsonc"),
    "yaml": ("yaml", "yml"),
    "xml": ("xml",),
    "kotlin": ("kotlin", "kt", "kts"),
    "swift": ("swift",),
    "r": ("r",),
    "scala": ("scala",),
    "perl": ("perl", "pl"),
    "lua": ("lua",),
    "dart": ("dart",),
}
_TAG_TO_LANGUAGE = {tag: name for name, tags in LANGUAGES.items() for tag in tags}
_FENCE = re.compile(r"^[ \t]{0,3}(?:```|~~~)[ \t]*([^\s`]*)", re.M)


class ContainsCodeParams(Params, frozen=True):
    format: str | None = None
    negate: bool = msgspec.field(default=False, name="not")


class ContainsCode(Check):
    id = "default.containsCode"
    params_type = ContainsCodeParams

    def __init__(self, params: ContainsCodeParams, path: str) -> None:
        super().__init__(params, path)
        self.language: str | None = None
        if params.format is not None:
            self.language = _TAG_TO_LANGUAGE.get(params.format.strip().lower())
            if self.language is None:
                raise ParamError(join_path(path, "format"), f"unknown language {params.format!r}; one of "
                                                            f"{', '.join(LANGUAGES)} (or a common alias)")

    def run(self, subject: Subject) -> Verdict:
        # Fences alternate open/close: only the opening ones carry a language tag.
        tags = [m.group(1).lower() for i, m in enumerate(_FENCE.finditer(subject.text)) if i % 2 == 0]
        if self.language is None:
            found = bool(tags)
            what = "a fenced code block"
        else:
            found = any(_TAG_TO_LANGUAGE.get(tag) == self.language for tag in tags)
            what = f"a {self.language} code block"
        return Verdict(inverted(found, self.params.negate), f"the text {'has' if found else 'has no'} {what}")
