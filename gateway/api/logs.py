"""``GET /v1/logs``: recent request logs the caller may read (``logscope``), newest first, filtered and paged.

Query: ``trace_id``, ``status`` (100..599, or a class: ``2xx`` .. ``5xx``), ``provider``, ``model``, ``from`` /
``to`` (unix seconds or ISO 8601; a time without zone is UTC), ``limit`` (1..100, default 20), ``after`` (the ``id``
of the last item of the previous page), ``workspace`` (or ``workspace_id``; admin keys, see ``logscope``). Answers
``{"object": "list", "data": [...], "has_more": bool}``; a bad parameter, an unknown one or a ``provider`` that is
no provider's name is a 400 naming it.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Mapping
from urllib.parse import parse_qsl

from gateway.api.admin import provider_query
from gateway.api.logscope import log_scope
from gateway.controlplane.keys import KeyStore
from gateway.http.errors import InvalidRequest
from gateway.http.respond import send_json
from gateway.http.types import Receive, Scope, Send
from gateway.observability.logbackend import LogReader
from gateway.observability.logstore import LogFilter

MAX_LIMIT = 100
#: the query names of GET /v1/logs
QUERY = ("trace_id", "status", "provider", "model", "from", "to", "limit", "after", "workspace")
#: the largest log id (a SQLite rowid); a larger ``after`` is a 400, not an integer the store cannot hold
MAX_ID = 2**63 - 1


def _int(name: str, raw: str, low: int, high: int | None = None) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise InvalidRequest(f"{name} must be an integer, got {raw!r}", param=name) from None
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise InvalidRequest(f"{name} must be {bound}, got {value}", param=name)
    return value


def _time(name: str, raw: str) -> float:
    text = raw.strip()
    try:
        value = float(text)
    except ValueError:
        pass
    else:
        if not math.isfinite(value):
            raise InvalidRequest(f"{name} must be a finite time, got {raw!r}", param=name)
        return value
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        try:  # an unencoded "+01:00" offset arrives as " 01:00"
            moment = datetime.fromisoformat(text.replace(" ", "+"))
        except ValueError:
            raise InvalidRequest(
                f"{name} must be unix seconds or an ISO 8601 time, got {raw!r}", param=name
            ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def parse_filter(query: bytes | Mapping[str, str]) -> LogFilter:
    """The filters of a ``/v1/logs`` query (its string, or its values); 400 naming the parameter when one is bad."""
    values: dict[str, object] = {}
    pairs = query.items() if isinstance(query, Mapping) else parse_qsl(query.decode("latin-1"), keep_blank_values=True)
    for name, raw in pairs:
        if name == "trace_id":
            if not raw:
                raise InvalidRequest("trace_id must not be empty", param="trace_id")
            values["trace_id"] = raw
        elif name in ("provider", "model"):
            if not raw:
                raise InvalidRequest(f"{name} must not be empty", param=name)
            values[name] = raw
        elif name == "status":
            text = raw.strip().lower()
            if len(text) == 3 and text.endswith("xx") and text[0] in "12345":
                values["status_class"] = int(text[0])
            else:
                values["status"] = _int("status", raw, 100, 599)
        elif name == "limit":
            values["limit"] = _int("limit", raw, 1, MAX_LIMIT)
        elif name == "after":
            values["after"] = _int("after", raw, 1, MAX_ID)
        elif name == "from":
            values["since"] = _time("from", raw)
        elif name == "to":
            values["until"] = _time("to", raw)
    flt = LogFilter(**values)  # type: ignore[arg-type]
    if flt.since is not None and flt.until is not None and flt.since > flt.until:
        raise InvalidRequest("from must not be later than to", param="from")
    return flt


class LogsEndpoint:
    def __init__(self, keys: KeyStore, logs: LogReader) -> None:
        """``logs``: the worker's request-log store (embedded or shared), which this route reads."""
        self.keys = keys
        self.logs = logs

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        reader = await log_scope(self.keys, scope, QUERY)
        provider_query(reader.query, mcp=True)
        flt = parse_filter(reader.query)
        rows, has_more = await self.logs.query(reader.workspace, flt, reader.every_workspace)
        items = b",".join(b'{"id":"%d",' % row_id + bytes(doc)[1:] for row_id, doc in rows)
        body = b'{"object":"list","data":[' + items + b'],"has_more":' + (b"true" if has_more else b"false") + b"}"
        await send_json(send, 200, body)
