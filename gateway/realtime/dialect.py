"""What differs between the WebSocket APIs the session machinery relays (``endpoint.py``): the Realtime API
(``/v1/realtime``) and the Responses API's WebSocket mode (``/v1/responses`` upgraded), each forwarded as it is (the
Responses mode's turns for other providers are translated instead: ``translate.py``).

Everything else is shared: authentication, the config, the SSRF-checked connect, the relay's pumps and limits, the
close codes, the shutdown and the one record per session. A dialect names:

- ``api``: the API's name in messages;
- ``endpoint``: the record's ``endpoint`` (``realtime``; ``responses.websocket``);
- ``subprotocol``: the one answered when the client offers it (the Realtime API's ``realtime``; the Responses mode
  uses none);
- ``usage_ends``: the events that end a response and carry its usage (``usage.py``);
- ``target``: the provider's URL and credential for the config's first target, or a translated target
  (``target.py``);
- ``error_event``: the API's ``error`` event, sent before a session whose budget is spent is closed (``budget.py``);
- ``takes_client_secrets``: whether a minted client secret (``secrets.py``: minted for Realtime sessions) opens it.
"""

from __future__ import annotations

from collections.abc import Callable

from gateway.realtime.budget import error_event, responses_error_event
from gateway.realtime.target import RealtimeTarget, realtime_target, responses_target
from gateway.realtime.usage import REALTIME_ENDS, RESPONSES_ENDS
from gateway.schema.config import Config

#: builds a session's target from the leaf config, the model named in the query, the query and the upgrade's headers
TargetBuilder = Callable[[Config, "str | None", dict[str, str], list[tuple[bytes, bytes]]], RealtimeTarget]


class Dialect:
    """One WebSocket API's differences (see the module's docstring)."""

    __slots__ = ("api", "endpoint", "subprotocol", "usage_ends", "target", "error_event", "takes_client_secrets")

    def __init__(self, api: str, endpoint: str, subprotocol: str | None, usage_ends: tuple[str, ...],
                 target: TargetBuilder, event: Callable[[str], str], takes_client_secrets: bool) -> None:
        self.api = api
        self.endpoint = endpoint
        self.subprotocol = subprotocol
        self.usage_ends = usage_ends
        self.target = target
        self.error_event = event
        self.takes_client_secrets = takes_client_secrets


def header(headers: list[tuple[bytes, bytes]], name: bytes) -> str | None:
    """The first value of the header ``name`` (lower case), or None."""
    for key, value in headers:
        if key == name:
            return value.decode("latin-1")
    return None


def _realtime(config: Config, model: str | None, query: dict[str, str],
              headers: list[tuple[bytes, bytes]]) -> RealtimeTarget:
    return realtime_target(config, model, query.get("api-version"), header(headers, b"openai-beta"))


def _responses(config: Config, model: str | None, query: dict[str, str],
               headers: list[tuple[bytes, bytes]]) -> RealtimeTarget:
    return responses_target(config, model)


REALTIME = Dialect("Realtime", "realtime", "realtime", REALTIME_ENDS, _realtime, error_event, True)
RESPONSES = Dialect("Responses WebSocket mode", "responses.websocket", None, RESPONSES_ENDS, _responses,
                    responses_error_event, False)
