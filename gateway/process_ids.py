"""Ids unique without a syscall each: a random per-process prefix and a counter, drawn afresh in a forked child.

The one piece of state the package keeps per process on purpose: ``os.register_at_fork`` hooks are process-wide and
can never be unregistered, so the source they re-seed is module-level; an object made after any fork (a batch
runner's ``ResultLines``) keeps an ``IdSource`` of its own instead.
"""

from __future__ import annotations

import itertools
import os


class IdSource:
    """32 hex characters per ``next_hex()``: 16 of a random prefix, 16 of a counter from a random start."""

    __slots__ = ("counter", "prefix")

    def __init__(self) -> None:
        self.prefix = ""
        self.counter = itertools.count()
        self.reseed()

    def reseed(self) -> None:
        self.prefix = os.urandom(8).hex()
        self.counter = itertools.count(int.from_bytes(os.urandom(4), "big"))

    def next_hex(self) -> str:
        return f"{self.prefix}{next(self.counter) & 0xFFFFFFFFFFFFFFFF:016x}"


#: trace ids of requests that bring none
TRACE_IDS = IdSource()
os.register_at_fork(after_in_child=TRACE_IDS.reseed)
