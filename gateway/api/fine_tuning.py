"""``/v1/fine_tuning/jobs``: fine-tuning jobs, forwarded to the provider the request names.

Create checks its body first (``gateway.schema.fine_tuning``: every bad field a 400 naming it, before anything is
sent); a ``training_file`` or ``validation_file`` stored by the gateway (``file-gw-``) is a 400, since the provider
cannot read it. The list takes ``limit`` (>= 1), the ``after`` cursor (the id of the last job of the previous
page) and ``metadata[<key>]`` filters; another query name is a 400 naming it. Answers are the provider's
``fine_tuning.job`` objects and ``{"object": "list", "data", "has_more"}`` envelopes as it sends them; an unknown
job id is the provider's 404.
"""

from __future__ import annotations

from typing import Any

from gateway.api.admin import ADMIN_BODY_LIMIT, int_query
from gateway.api.jobs import Jobs, raw_query
from gateway.http.body import read_request_body
from gateway.http.errors import InvalidRequest
from gateway.http.types import Receive, Scope, Send
from gateway.jobs.files import is_gateway_file
from gateway.jobs.passthrough import path_id
from gateway.providers.base import FINE_TUNING
from gateway.schema.fine_tuning import parse_create_job

#: the query of the job list and of a job's events (what the openai SDK sends: ``metadata[key]`` filters the list)
LIST_QUERY = ("after", "limit", "metadata", "workspace_id")
EVENTS_QUERY = ("after", "limit", "workspace_id")


def _job_id(scope: Scope) -> str:
    return path_id(scope["path_params"]["fine_tuning_job_id"], "fine_tuning_job_id", "fine-tuning job")


class FineTuningRoutes:
    def __init__(self, jobs: Jobs) -> None:
        self.jobs = jobs

    def routes(self) -> list[tuple[str, str, Any]]:
        return [
            ("POST", "/v1/fine_tuning/jobs", self.create),
            ("GET", "/v1/fine_tuning/jobs", self.list),
            ("GET", "/v1/fine_tuning/jobs/{fine_tuning_job_id}", self.retrieve),
            ("POST", "/v1/fine_tuning/jobs/{fine_tuning_job_id}/cancel", self.cancel),
            ("GET", "/v1/fine_tuning/jobs/{fine_tuning_job_id}/events", self.events),
        ]

    async def create(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await self.jobs.caller(scope)
        body = await read_request_body(scope, receive, ADMIN_BODY_LIMIT)
        request = parse_create_job(body)
        for field in ("training_file", "validation_file"):
            value = getattr(request, field)
            if value and is_gateway_file(value):
                raise InvalidRequest(f"{field} '{value}' is stored by the gateway, which the provider cannot read: "
                                     "upload fine-tuning files to the provider (send its provider headers)",
                                     param=field)
        await self.jobs.forwarder.relay_json(send, caller.ctx, FINE_TUNING, "POST", "/fine_tuning/jobs", body=body,
                                             content_type="application/json")

    async def list(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await self.jobs.caller(scope, LIST_QUERY)
        int_query(caller.query, "limit", 20, 1)
        await self.jobs.forwarder.relay_json(send, caller.ctx, FINE_TUNING, "GET", "/fine_tuning/jobs",
                                             raw_query(scope))

    async def retrieve(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await self.jobs.caller(scope)
        await self.jobs.forwarder.relay_json(send, caller.ctx, FINE_TUNING, "GET",
                                             f"/fine_tuning/jobs/{_job_id(scope)}")

    async def cancel(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await self.jobs.caller(scope)
        await self.jobs.forwarder.relay_json(send, caller.ctx, FINE_TUNING, "POST",
                                             f"/fine_tuning/jobs/{_job_id(scope)}/cancel")

    async def events(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = await self.jobs.caller(scope, EVENTS_QUERY)
        int_query(caller.query, "limit", 20, 1)
        await self.jobs.forwarder.relay_json(send, caller.ctx, FINE_TUNING, "GET",
                                             f"/fine_tuning/jobs/{_job_id(scope)}/events", raw_query(scope))
