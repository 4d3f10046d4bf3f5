"""``/v1/responses/{response_id}`` and ``/input_items``: stored responses. A response the gateway translated (see
``gateway.pipeline.dialects.responses``) is served from the state store of the caller's workspace; any other id is
forwarded to the provider the request names. ``DELETE`` removes a translated one, or is forwarded.

Query values are checked before anything is sent: ``include`` (repeated, as ``include`` or ``include[]``) must be
one of the includable fields; the input-item list takes ``limit`` 1 to 100 (default 20), ``order`` ``asc`` (the
default, sent upstream when the client names none) or ``desc``, and ``after`` / ``before`` item ids (another query
name is a 400 naming it). Retrieving as
a stream (``stream=true``) is not offered here. The provider's ``response`` object and ``{"object": "list", "data",
"first_id", "last_id", "has_more"}`` envelope are relayed as it sends them; an unknown id is the provider's 404.

Includable fields (the spec's three and the ones vendorA added since): ``file_search_call.results``,
``message.input_image.image_url``, ``computer_call_output.output.image_url``, ``web_search_call.results``,
``web_search_call.action.sources``, ``code_interpreter_call.outputs``, ``reasoning.encrypted_content``,
``message.output_text.logprobs``.
"""

from __future__ import annotations

from typing import Any

import msgspec

from gateway.api.admin import choice_query, int_query, query_values
from gateway.api.jobs import Jobs, query_pairs, raw_query
from gateway.http.errors import InvalidRequest, NotFound
from gateway.http.respond import send_json
from gateway.http.types import Receive, Scope, Send
from gateway.jobs.passthrough import path_id
from gateway.providers.base import RESPONSES

#: the query of a stored response's input items (what the openai SDK sends, and the workspace for the root key)
ITEMS_QUERY = ("after", "before", "include", "limit", "order", "workspace_id")
INCLUDABLE = (
    "file_search_call.results", "message.input_image.image_url", "computer_call_output.output.image_url",
    "web_search_call.results", "web_search_call.action.sources", "code_interpreter_call.outputs",
    "reasoning.encrypted_content", "message.output_text.logprobs",
)


def check_include(scope: Scope) -> None:
    for name, value in query_pairs(scope):
        if name in ("include", "include[]") and value not in INCLUDABLE:
            raise InvalidRequest(f"include must be one of {', '.join(INCLUDABLE)}, got {value!r}", param="include")


def _response_id(scope: Scope) -> str:
    return path_id(scope["path_params"]["response_id"], "response_id", "response")


class ResponseRoutes:
    def __init__(self, jobs: Jobs) -> None:
        self.jobs = jobs

    def routes(self) -> list[tuple[str, str, Any]]:
        return [
            ("GET", "/v1/responses/{response_id}", self.retrieve),
            ("GET", "/v1/responses/{response_id}/input_items", self.input_items),
            ("DELETE", "/v1/responses/{response_id}", self.delete),
        ]

    async def _stored(self, workspace: str | None, response_id: str) -> dict[str, Any] | None:
        """The response the gateway stored in ``workspace`` under this id; None for any other id (one of a form
        the gateway never makes is not looked up: it could name another workspace's key)."""
        key = _stored_key(workspace, response_id)
        if key is None:
            return None
        data = await self.jobs.store.get(key)
        if data is None:
            return None
        kept: dict[str, Any] = msgspec.json.decode(data)
        return kept

    async def delete(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await self.jobs.caller(scope)
        response_id = _response_id(scope)
        key = _stored_key(caller.workspace, response_id)
        if key is not None and await self._stored(caller.workspace, response_id) is not None:
            await self.jobs.store.delete(key)
            await send_json(send, 200, msgspec.json.encode({"id": response_id, "object": "response",
                                                            "deleted": True}))
            return
        await self._forward(send, caller.ctx, "DELETE", response_id, "", raw_query(scope))

    async def _forward(self, send: Send, ctx: Any, method: str, response_id: str, tail: str, query: str) -> None:
        """A response the gateway did not store, asked of the provider the request names; a provider that keeps no
        responses (the gateway translated for it) means the id is unknown: 404."""
        try:
            await self.jobs.forwarder.relay_json(send, ctx, RESPONSES, method, f"/responses/{response_id}{tail}",
                                                 query)
        except InvalidRequest as error:
            if error.param != "provider":
                raise
            raise NotFound(f"no stored response '{response_id}' ({error.message})", param="response_id") from None

    async def retrieve(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await self.jobs.caller(scope)
        response_id = _response_id(scope)
        check_include(scope)
        if (query_values(scope).get("stream") or "").lower() == "true":
            raise InvalidRequest("retrieving a stored response as a stream is not supported", param="stream")
        kept = await self._stored(caller.workspace, response_id)
        if kept is not None:
            await send_json(send, 200, msgspec.json.encode(kept["response"]))
            return
        await self._forward(send, caller.ctx, "GET", response_id, "", raw_query(scope))

    async def input_items(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await self.jobs.caller(scope, ITEMS_QUERY)
        response_id = _response_id(scope)
        query = caller.query
        int_query(query, "limit", 20, 1, 100)
        choice_query(query, "order", ("asc", "desc"))
        check_include(scope)
        kept = await self._stored(caller.workspace, response_id)
        if kept is not None:
            await send_json(send, 200, msgspec.json.encode(_page(kept["items"], query)))
            return
        forwarded = raw_query(scope)
        if "order" not in query:  # the spec's default is asc; a provider's own default may differ
            forwarded = f"{forwarded}&order=asc" if forwarded else "order=asc"
        await self._forward(send, caller.ctx, "GET", response_id, "/input_items", forwarded)


def _page(items: list[dict[str, Any]], query: dict[str, str]) -> dict[str, Any]:
    """A stored response's input items as the list envelope (``order``, ``after``, ``before``, ``limit``)."""
    if query.get("order") == "desc":
        items = items[::-1]
    ids = [item.get("id") for item in items]
    if query.get("after") in ids:
        items = items[ids.index(query["after"]) + 1:]
        ids = [item.get("id") for item in items]
    if query.get("before") in ids:
        items = items[:ids.index(query["before"])]
    limit = int(query.get("limit") or 20)
    data = items[:limit]
    return {"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None, "has_more": len(items) > limit}


def _stored_key(workspace: str | None, response_id: str) -> str | None:
    """The state-store key of a response the gateway stored, None for an id of another form (the door's module
    loads on its first use)."""
    from gateway.pipeline.dialects.responses import is_stored_id, stored_key

    return stored_key(workspace, response_id) if is_stored_id(response_id) else None
