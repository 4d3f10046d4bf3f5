"""``GET /v1/logs/aggregates?window=15m|1h|1d``: requests per second, p50/p99 latency and gateway-added latency,
errors by status, tokens and cost over the last 15 minutes, hour (the default) or day, as totals, as a series of
time slots (10 s, 1 min, 15 min) and per provider and model; ``provider`` and/or ``model`` narrow it all to them.
Same key rules as ``GET /v1/logs`` (``logscope``); a query name the route does not read, or a ``provider`` that is
no provider's name, is a 400 naming it, as there."""

from __future__ import annotations

from typing import Mapping

import msgspec

from gateway.api.admin import provider_query
from gateway.api.logscope import log_scope
from gateway.controlplane.keys import KeyStore
from gateway.http.errors import InvalidRequest
from gateway.http.respond import send_json
from gateway.http.types import Receive, Scope, Send
from gateway.observability.aggregates import read_report
from gateway.observability.logbackend import LogReader
from gateway.observability.rollups import WINDOWS

DEFAULT_WINDOW = "1h"
#: the query names of the route; any other name is a 400 naming it
QUERY = ("window", "provider", "model", "workspace")
_encode = msgspec.json.encode


def parse_query(query: Mapping[str, str]) -> tuple[str, str | None, str | None]:
    """(window, provider, model) of the query values; 400 naming a bad one."""
    window = DEFAULT_WINDOW
    narrow: dict[str, str | None] = {"provider": None, "model": None}
    for name, raw in query.items():
        if name == "window":
            if raw not in WINDOWS:
                raise InvalidRequest(f"window must be one of {', '.join(WINDOWS)}, got {raw!r}", param="window")
            window = raw
        elif name in narrow:
            if not raw:
                raise InvalidRequest(f"{name} must not be empty", param=name)
            narrow[name] = raw
    return window, narrow["provider"], narrow["model"]


class AggregatesEndpoint:
    def __init__(self, keys: KeyStore, logs: LogReader) -> None:
        """``logs``: the worker's request-log store (embedded or shared), whose rollups this route reads."""
        self.keys = keys
        self.logs = logs

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        reader = await log_scope(self.keys, scope, QUERY)
        window, provider, model = parse_query(reader.query)
        provider_query(reader.query, mcp=True)
        result = await read_report(self.logs, window, reader.workspace, provider, model)
        await send_json(send, 200, _encode(result))
