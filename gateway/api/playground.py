"""``POST /v1/configs/validate``: a config checked by the gateway's own validator, without sending anything.

The body is the config's JSON text. A valid config answers 200 ``{"object": "config.validation", "valid": true,
"tree": ...}`` with its routing tree (``gateway.routing.describe``); an invalid one answers the same 400 a request
carrying it in ``x-gateway-config`` gets, whose ``param`` is the JSON path of the fault (``targets[1].retry``).
Any gateway key may validate (any key may send a config). Provider slugs are looked up in the caller's workspace,
as are saved guardrails (in the config's root and every target): an unknown slug or guardrail id (or another
workspace's), or a slug's secrets pointed at another host, is the same 400, its ``param`` the item's path in the
whole config (``targets[1].input_guardrails[0]``). Nothing is cached:
validating as someone types does not push the data plane's parsed configs out of their cache.
"""

from __future__ import annotations

import msgspec

from gateway.api.guardrails import check_saved_guardrails
from gateway.api.inference import authenticate
from gateway.api.prompted import loaded
from gateway.api.runtime import Runtime
from gateway.config.references import ConfigReferences
from gateway.config.validate import ConfigParser, decode_config
from gateway.controlplane.directory import RecordsNeeded
from gateway.http.body import read_request_body
from gateway.http.context import build_context
from gateway.http.respond import send_json
from gateway.http.types import Receive, Scope, Send
from gateway.routing.describe import TargetTree, describe
from gateway.routing.plan import Planner


class Validation(msgspec.Struct):
    tree: TargetTree
    valid: bool = True
    object: str = "config.validation"


_encode = msgspec.json.encode


class ValidateConfigEndpoint:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        runtime = self.runtime
        workspace = (await authenticate(runtime, build_context(scope["headers"]))).workspace
        body = await read_request_body(scope, receive, runtime.settings.max_body_bytes)
        # its own caches, thrown away: the runtime's parsed configs stay as they are
        parser = ConfigParser(runtime.configs.checks)
        config = parser.validate(decode_config(body))
        records, check = runtime.records, ConfigReferences.check
        try:
            check(config, workspace, records)
        except RecordsNeeded as needed:
            await loaded(records, needed, check, config, workspace, records)
        await check_saved_guardrails(lambda: runtime.steps.runner, config, workspace)
        await send_json(send, 200, _encode(Validation(describe(config, Planner(parser)))))
