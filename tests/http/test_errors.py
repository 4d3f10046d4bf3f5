"""One error module: every error the gateway answers with (each ``GatewayError`` subclass) is defined in
``gateway.http.errors``, so its status, type and code are read in one place."""

from __future__ import annotations

import importlib
import pkgutil

import gateway
from gateway.http import errors


def every_module() -> list[str]:
    """The gateway's modules, compiled twins and the entry point aside (they define no errors)."""
    names = []
    for info in pkgutil.walk_packages(gateway.__path__, "gateway."):
        if info.name.startswith("gateway._speedups.") or info.name == "gateway.__main__":
            continue
        names.append(info.name)
    return names


def subclasses(cls: type) -> set[type]:
    found = set()
    for sub in cls.__subclasses__():
        found |= {sub, *subclasses(sub)}
    return found


def test_every_gateway_error_is_defined_in_the_errors_module() -> None:
    for name in every_module():
        importlib.import_module(name)
    elsewhere = sorted(f"{cls.__module__}.{cls.__qualname__}" for cls in subclasses(errors.GatewayError)
                       if cls.__module__ != errors.__name__)
    assert elsewhere == []


def test_a_library_message_continues_a_sentence_without_breaking_capitals() -> None:
    assert errors.mid_sentence("Expected `int`, got `str`") == "expected `int`, got `str`"
    assert errors.mid_sentence("A value is needed") == "a value is needed"
    assert errors.mid_sentence("JSON is malformed: invalid character") == "JSON is malformed: invalid character"
    assert errors.mid_sentence("I/O error") == "I/O error"
    assert errors.mid_sentence("URL too long") == "URL too long"
    assert errors.mid_sentence("") == "" and errors.mid_sentence("`x` missing") == "`x` missing"
