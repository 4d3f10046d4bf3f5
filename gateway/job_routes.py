"""Building one worker's files, batches, fine-tuning and stored-responses services from its runtime, and routing
their paths: the one place that knows both the runtime and the route modules (which know only ``Jobs``)."""

from __future__ import annotations

from collections.abc import Collection
from functools import partial

from gateway.api.admin import Caller, Mount, authorize
from gateway.api.batches import BatchRoutes
from gateway.api.files import FileRoutes
from gateway.api.fine_tuning import FineTuningRoutes
from gateway.api.jobs import Jobs
from gateway.api.responses import ResponseRoutes
from gateway.controlplane.secrets import SecretBox
from gateway.http.types import Scope
from gateway.jobs.dispatch import InProcessDispatcher
from gateway.jobs.passthrough import Forwarder
from gateway.pipeline.prompted import resolve as resolve_config
from gateway.runtime import Runtime


def build_jobs(runtime: Runtime, app: Mount) -> Jobs:
    """The services, each given the runtime's objects it uses; batch lines run through ``app`` in process."""

    async def caller(scope: Scope, query: Collection[str] | None) -> Caller:
        return await authorize(runtime.keys, scope, "inference", admin=False, query=query)

    def box() -> SecretBox:
        return runtime.records.box

    forwarder = Forwarder(partial(resolve_config, runtime.resolver, runtime.records), runtime.planner.plan,
                          runtime.exchange, runtime.providers)
    return Jobs(runtime.settings, runtime.store, runtime.keys, box, caller, forwarder,
                InProcessDispatcher(app).call)


def mount_jobs(app: Mount, runtime: Runtime) -> Jobs:
    """Route every files, batches, fine-tuning and responses path on ``app``; the runtime starts and closes the
    services with itself."""
    jobs = build_jobs(runtime, app)
    runtime.lifecycle.add(jobs)
    for routes in (FileRoutes(jobs), BatchRoutes(jobs), FineTuningRoutes(jobs), ResponseRoutes(jobs)):
        for method, path, handler in routes.routes():
            app.add(method, path, handler)
    return jobs
