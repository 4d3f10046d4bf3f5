"""No module of the package keeps mutable state at module level: caches, stores and counters live on the object
that owns them (so a fresh runtime, adapter or test starts clean). The few documented exceptions are library
contracts, listed here with the reason; a new module-level dict, list, set, ``lru_cache`` or ``global`` fails.

A constant table (an UPPER_CASE name, as PEP 8 spells constants) is not state as long as nothing in the package
changes it: one that is assigned into, or has a mutating method called on it anywhere, counts as state."""

from __future__ import annotations

import ast
from pathlib import Path

import gateway

ROOT = Path(gateway.__file__).parent
#: moved out of the package into its own (it keeps its stores on the mock app)
SKIP = ("mock",)
#: "module:name" -> why it may stay. (Not containers, so not listed: gateway/process_ids.py's two IdSource objects
#: and gateway/http/early_stop.py's _PENDING, module-level because the os.register_at_fork hooks that reset them
#: are process-wide and cannot be removed.)
ALLOWED: dict[str, str] = {}
_MUTABLE_CALLS = frozenset({"dict", "list", "set", "defaultdict", "OrderedDict", "deque", "Counter", "BoundedCache",
                            "bytearray", "WeakValueDictionary", "WeakKeyDictionary", "WeakSet"})
_CACHES = frozenset({"lru_cache", "cache"})
_MUTATORS = frozenset({"append", "extend", "insert", "add", "update", "pop", "popitem", "clear", "remove", "discard",
                       "setdefault", "appendleft", "extendleft", "put", "__setitem__", "__delitem__"})


def _call_name(node: ast.expr) -> str:
    func = node.func if isinstance(node, ast.Call) else node
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _mutable(value: ast.expr | None) -> bool:
    if isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)):
        return True
    return isinstance(value, ast.Call) and _call_name(value) in _MUTABLE_CALLS


def _name_of(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else ""


def _mutated(tree: ast.AST) -> set[str]:
    """Names (or attribute names) something is stored into, deleted from or called a mutating method on."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(_name_of(node.value))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _MUTATORS:
            names.add(_name_of(node.func.value))
    return names


def _constant(name: str, mutated: set[str]) -> bool:
    return name.lstrip("_").isupper() and name not in mutated


def _findings(path: Path, module: str, mutated: set[str] | None = None) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    mutated = _mutated(tree) if mutated is None else mutated
    found: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and _mutable(node.value):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found += [f"{module}:{t.id}" for t in targets if isinstance(t, ast.Name) and t.id != "__all__"
                      and not _constant(t.id, mutated)]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if any(_call_name(d) in _CACHES for d in node.decorator_list):
                found.append(f"{module}:{node.name}")
    found += [f"{module}:global {', '.join(n.names)}" for n in ast.walk(tree) if isinstance(n, ast.Global)]
    return found


def test_no_module_keeps_mutable_state_outside_the_documented_contracts():
    paths = [p for p in sorted(ROOT.rglob("*.py")) if p.relative_to(ROOT).parts[0] not in SKIP]
    mutated: set[str] = set()
    for path in paths:
        mutated |= _mutated(ast.parse(path.read_text(), str(path)))
    found: list[str] = []
    for path in paths:
        module = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts)
        found += [f for f in _findings(path, module, mutated) if f not in ALLOWED]
    assert found == []


def test_the_check_sees_each_kind_of_module_state(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("import functools\nA = {}\nB: list = []\nc = set()\nTABLE = {'k': 1}\nKEPT = {}\n"
                      "@functools.lru_cache\ndef d(): pass\ndef e():\n    global A\n    A['x'] = 1\n"
                      "    B.append(1)\n    KEPT.setdefault('k', 2)\n")
    assert _findings(sample, "m") == ["m:A", "m:B", "m:c", "m:KEPT", "m:d", "m:global A"]
