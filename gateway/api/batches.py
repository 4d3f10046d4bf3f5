"""``/v1/batches``: batches the gateway runs (``batch_gw_`` ids) and batches forwarded to a provider.

The body is checked first, every bad field a 400 naming it (``input_file_id`` required; ``completion_window``
``24h`` or ``immediate``; ``endpoint`` one of ``/v1/chat/completions``, ``/v1/completions``, ``/v1/embeddings``;
``metadata`` at most 16 pairs, keys up to 64 and values up to 512 characters; ``output_expires_after`` with anchor
``created_at`` and ``seconds`` 3600 to 2592000; any other field is unknown). Then:

- an input file stored by the gateway (``file-gw-``) makes the gateway run the batch: every line goes through the
  pipeline with this request's provider identification (which must be present) and other gateway headers, as the
  key that created it (by id: rotating the key changes nothing, revoking it stops the batch). Those headers are
  stored sealed (``batch_store.seal_headers``) and never answered. The window is ``GATEWAY_BATCH_WINDOW_S`` for
  ``immediate`` and 24 hours for ``24h``; with ``output_expires_after`` its output and error files expire that many
  seconds after they are written (then they read as missing, as any expired file);
- any other input file is the provider's: the batch is forwarded (``24h`` only: ``immediate`` is for batches the
  gateway runs).

GET and cancel of a ``batch_gw_`` id reach the gateway's store whatever headers they carry; other ids go to the
named provider. ``GET /v1/batches`` lists the provider's batches when the request names one, else the workspace's
gateway-run batches, newest first (``after`` cursor, ``limit`` 1 to 100, default 20; another query name is a 400).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import msgspec

from gateway.api.admin import ADMIN_BODY_LIMIT, int_query
from gateway.api.jobs import Jobs, cursor_page, list_envelope, raw_query
from gateway.http.body import read_request_body
from gateway.http.context import RequestContext
from gateway.http.errors import Conflict, InvalidRequest, NotFound
from gateway.http.respond import gateway_headers, send_json
from gateway.http.types import Receive, Scope, Send
from gateway.jobs.batch_store import PREFIX, BatchRecord, is_gateway_batch, keep_until, seal_headers
from gateway.jobs.files import is_gateway_file
from gateway.jobs.passthrough import names_provider, path_id
from gateway.providers.base import BATCHES
from gateway.schema.batches import Batch, CreateBatch, parse_create_batch

_encode = msgspec.json.encode
DAY_S = 86_400
#: the query of GET /v1/batches (what the openai SDK sends, and the workspace for the root key)
LIST_QUERY = ("after", "limit", "workspace_id")
#: gateway headers a batch's lines do not inherit (each line gets its own trace id)
_NOT_INHERITED = frozenset({"apikey", "traceid", "spanid", "parentspanid"})


def line_headers(ctx: RequestContext, raw_headers: list[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    """The headers every line of a gateway-run batch is sent with: the gateway headers (provider identification,
    config, metadata...), a provider bearer and the headers named in forward_headers. Not the gateway key: the
    lines run as the key that created the batch, by its id."""
    out: list[tuple[str, str]] = []
    forwarded = set(ctx.forward_headers)
    for raw_name, raw_value in raw_headers:
        name = raw_name.decode("latin-1").lower()
        value = raw_value.decode("latin-1")
        if name.startswith("x-gateway-"):
            if name[10:].replace("-", "").replace("_", "") not in _NOT_INHERITED:
                out.append((name, value))
        elif name == "authorization":
            if ctx.bearer:  # absent when the bearer was the gateway key itself
                out.append((name, value))
        elif name == "x-cloudc-llm-request-type" or name in forwarded:
            out.append((name, value))
    return out


def _batch_id(scope: Scope) -> str:
    return path_id(scope["path_params"]["batch_id"], "batch_id", "batch")


def _not_found(batch_id: str) -> NotFound:
    return NotFound(f"no batch with id '{batch_id}' (batches at a provider need that provider's headers)",
                    param="batch_id")


class BatchRoutes:
    def __init__(self, jobs: Jobs) -> None:
        self.jobs = jobs

    def routes(self) -> list[tuple[str, str, Any]]:
        return [
            ("POST", "/v1/batches", self.create),
            ("GET", "/v1/batches", self.list),
            ("GET", "/v1/batches/{batch_id}", self.retrieve),
            ("POST", "/v1/batches/{batch_id}/cancel", self.cancel),
        ]

    async def create(self, scope: Scope, receive: Receive, send: Send) -> None:
        jobs = self.jobs
        caller = await jobs.caller(scope)
        ctx = caller.ctx
        body = await read_request_body(scope, receive, ADMIN_BODY_LIMIT)
        request = parse_create_batch(body)
        if is_gateway_file(request.input_file_id):
            batch = await self._create_gateway_batch(scope, caller.workspace, caller.key.key_id, ctx, request)
            await send_json(send, 200, _encode(batch), gateway_headers(ctx.trace_id))
            return
        if request.completion_window == "immediate":
            raise InvalidRequest(
                "completion_window immediate is for batches the gateway runs: upload the input file to the gateway "
                "(without provider headers) and use its file-gw- id", param="completion_window")
        await jobs.forwarder.relay_json(send, ctx, BATCHES, "POST", "/batches", body=body,
                                        content_type="application/json")

    async def _create_gateway_batch(self, scope: Scope, workspace: str, key_id: str, ctx: RequestContext,
                                    request: CreateBatch) -> Batch:
        jobs = self.jobs
        if not names_provider(ctx):
            raise InvalidRequest(
                "a batch the gateway runs sends every line through the pipeline with this request's provider: send "
                "x-gateway-provider (with Authorization), a provider slug or x-gateway-config",
                param="x-gateway-provider")
        await jobs.forwarder.resolve(ctx)  # a bad one is a 400 now, not per line
        try:
            source = await jobs.files.get(workspace, request.input_file_id)
        except NotFound as error:
            raise NotFound(error.message, param="input_file_id") from None
        if source.purpose != "batch":
            raise InvalidRequest(f"input_file_id names a file with purpose {source.purpose}; batches read files "
                                 "uploaded with purpose batch", param="input_file_id")
        now = int(time.time())
        window = jobs.settings.batch_window_s if request.completion_window == "immediate" else DAY_S
        batch = Batch(id=f"{PREFIX}{uuid.uuid4().hex}", endpoint=request.endpoint,
                      input_file_id=request.input_file_id, completion_window=request.completion_window,
                      created_at=now, expires_at=now + window, metadata=request.metadata)
        sealed = seal_headers(jobs.box(), workspace, batch.id, line_headers(ctx, scope["headers"]))
        expiry = request.output_expires_after
        record = BatchRecord(id=batch.id, workspace_id=workspace, batch=batch, key_id=key_id, sealed_headers=sealed,
                             output_expires_s=expiry.seconds if expiry is not None else None)
        await jobs.batches.create(record)
        jobs.scheduler.poke()
        return batch

    async def list(self, scope: Scope, receive: Receive, send: Send) -> None:
        jobs = self.jobs
        caller = await jobs.caller(scope, LIST_QUERY)
        query = caller.query
        limit = int_query(query, "limit", 20, 1, 100)
        if names_provider(caller.ctx):
            await jobs.forwarder.relay_json(send, caller.ctx, BATCHES, "GET", "/batches", raw_query(scope))
            return
        records = await jobs.batches.list(caller.workspace)
        page, has_more = cursor_page(records, _record_id, query.get("after") or None, limit)
        data = [(await jobs.batches.with_live_counts(r)).batch for r in page]
        await send_json(send, 200, _encode(list_envelope(data, _batch_of, has_more)),
                        gateway_headers(caller.ctx.trace_id))

    async def retrieve(self, scope: Scope, receive: Receive, send: Send) -> None:
        jobs = self.jobs
        caller = await jobs.caller(scope)
        batch_id = _batch_id(scope)
        if is_gateway_batch(batch_id):
            record = await jobs.batches.get(caller.workspace, batch_id)
            await send_json(send, 200, _encode(record.batch), gateway_headers(caller.ctx.trace_id))
        elif names_provider(caller.ctx):
            await jobs.forwarder.relay_json(send, caller.ctx, BATCHES, "GET", f"/batches/{batch_id}")
        else:
            raise _not_found(batch_id)

    async def cancel(self, scope: Scope, receive: Receive, send: Send) -> None:
        jobs = self.jobs
        caller = await jobs.caller(scope)
        batch_id = _batch_id(scope)
        if not is_gateway_batch(batch_id):
            if not names_provider(caller.ctx):
                raise _not_found(batch_id)
            await jobs.forwarder.relay_json(send, caller.ctx, BATCHES, "POST", f"/batches/{batch_id}/cancel")
            return
        record = await jobs.batches.get(caller.workspace, batch_id)
        batch = record.batch
        if batch.status in ("validating", "in_progress"):
            at = await jobs.batches.request_cancel(batch_id, int(time.time()), keep_until(batch))
            batch.status = "cancelling"
            batch.cancelling_at = at
            record = await jobs.batches.save(record)
            jobs.scheduler.poke()
        elif batch.status != "cancelling":
            raise Conflict(f"batch '{batch_id}' is {batch.status} and can no longer be cancelled", param="batch_id")
        await send_json(send, 200, _encode(record.batch), gateway_headers(caller.ctx.trace_id))


def _record_id(record: BatchRecord) -> str:
    return record.id


def _batch_of(batch: Batch) -> str:
    return batch.id
