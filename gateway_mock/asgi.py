"""The ASGI types the mock's handlers use: a scope, the messages, and the receive and send callables.

Defined here rather than imported from the gateway so the mock stays a separate package (see the import-linter
contract in ``pyproject.toml``).
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, MutableMapping

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
