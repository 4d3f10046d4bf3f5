"""``POST /v1/configs/validate``: a config checked by the gateway's own validator, without sending anything.

The body is the config's JSON text. A valid config answers 200 ``{"object": "config.validation", "valid": true,
"tree": ...}`` with its routing tree (``gateway.routing.describe``); an invalid one answers the same 400 a request
carrying it in ``x-gateway-config`` gets, whose ``param`` is the JSON path of the fault (``targets[1].retry``).
Any gateway key with the ``inference`` scope may validate (any key that may send a config). Provider slugs are
looked up in the caller's workspace, as are saved guardrails (in the config's root and every target): an unknown
slug or guardrail id (or another workspace's), or a slug's secrets pointed at another host, is the same 400, its
``param`` the item's path in the whole config (``targets[1].input_guardrails[0]``). Nothing is cached: validating
as someone types does not push the data plane's parsed configs out of their cache.
"""

from __future__ import annotations

from typing import Any, Callable

import msgspec

from gateway.api.guardrails import check_saved_guardrails
from gateway.config.references import ConfigReferences
from gateway.config.validate import ConfigChecks, ConfigParser, decode_config
from gateway.controlplane.auth import authenticate
from gateway.controlplane.directory import RecordCache, RecordsNeeded
from gateway.controlplane.keys import KeyStore
from gateway.http.body import read_request_body
from gateway.http.context import build_context
from gateway.http.respond import send_json
from gateway.http.types import Receive, Scope, Send
from gateway.pipeline.prompted import loaded
from gateway.routing.describe import TargetTree, describe
from gateway.routing.plan import Planner


class Validation(msgspec.Struct):
    tree: TargetTree
    valid: bool = True
    object: str = "config.validation"


_encode = msgspec.json.encode


class ValidateConfigEndpoint:
    def __init__(self, keys: KeyStore, records: RecordCache, checks: ConfigChecks, max_body_bytes: int,
                 runner: Callable[[], Any]) -> None:
        """``checks``: the config parser's validators; ``runner``: the worker's guardrail runner (made on first use)."""
        self.keys = keys
        self.records = records
        self.checks = checks
        self.max_body_bytes = max_body_bytes
        self.runner = runner

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        workspace = (await authenticate(self.keys, build_context(scope["headers"]), "inference")).workspace
        body = await read_request_body(scope, receive, self.max_body_bytes)
        # its own caches, thrown away: the worker's parsed configs stay as they are
        parser = ConfigParser(self.checks)
        config = parser.validate(decode_config(body))
        records, check = self.records, ConfigReferences.check
        try:
            check(config, workspace, records)
        except RecordsNeeded as needed:
            await loaded(records, needed, check, config, workspace, records)
        await check_saved_guardrails(self.runner, config, workspace)
        await send_json(send, 200, _encode(Validation(describe(config, Planner(parser)))))
