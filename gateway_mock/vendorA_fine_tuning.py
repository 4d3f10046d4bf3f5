"""Mock of vendorA's fine-tuning jobs: create, list (cursor), retrieve, cancel and events; jobs run by the clock.

Like the real API: ``model`` and ``training_file`` are required, the training (and validation) file must be an
uploaded file with purpose ``fine-tune`` (400 naming the field otherwise), ``suffix`` is at most 64 characters and
``integrations`` at most 5; ids look like ``ftjob-<24 alphanumerics>``. A job is ``validating_files``, then
``queued``, ``running`` (with ``estimated_finish``) and ``succeeded`` (``fine_tuned_model``
``ft:<model>:mock-org:<suffix>:<id>``, ``trained_tokens``, a ``fine-tune-results`` file); an empty training file
makes it ``failed`` with ``error: {code, message, param}``. Cancel moves an unfinished job to ``cancelled`` (a
finished one is a 400). Lists are ``{object: "list", data, has_more}``, newest first.
"""

from __future__ import annotations

import re
import time

from gateway_mock.asgi import Send
from gateway_mock.kit import MockRequest, MockState, respond_json
from gateway_mock.vendorA_files import invalid, new_id, page, query, store_file

QUEUE_S = 0.2
RUN_S = 0.4
DONE_S = 0.8
_FINAL = ("succeeded", "failed", "cancelled")


def _event(state: MockState, job: dict, message: str, now: float) -> None:
    state.fine_tuning_events[job["id"]].insert(0, {
        "object": "fine_tuning.job.event", "id": new_id("ftevent-"), "created_at": int(now), "level": "info",
        "message": message, "data": {}, "type": "message"})


def advance(state: MockState, job: dict) -> dict:
    now = time.time()
    age = now - job["created_at_f"]
    if job["status"] == "validating_files" and age >= QUEUE_S:
        if not state.file_content.get(job["training_file"], b"").strip():
            job.update(status="failed", finished_at=int(now), error={
                "code": "invalid_training_file", "message": "The training file has no examples.",
                "param": "training_file"})
            _event(state, job, "Job failed", now)
        else:
            job["status"] = "queued"
            _event(state, job, "Job queued", now)
    if job["status"] == "queued" and age >= RUN_S:
        job.update(status="running", estimated_finish=int(job["created_at_f"] + DONE_S) + 1)
        _event(state, job, "Job started", now)
    if job["status"] == "running" and age >= DONE_S:
        tokens = len(state.file_content.get(job["training_file"], b"")) // 4
        results = store_file(state, b"step,train_loss\n1,0.5\n", "step_metrics.csv", "fine-tune-results")
        job.update(status="succeeded", finished_at=int(now), trained_tokens=tokens, estimated_finish=None,
                   fine_tuned_model=f"ft:{job['model']}:mock-org:{job['user_provided_suffix'] or ''}:{job['id'][6:14]}",
                   result_files=[results["id"]])
        if job["hyperparameters"].get("n_epochs") == "auto":
            job["hyperparameters"]["n_epochs"] = 3
        _event(state, job, "The job has successfully completed", now)
    return {k: v for k, v in job.items() if not k.endswith("_f")}


def _check_file(state: MockState, doc: dict, field: str) -> str | None:
    file_id = doc.get(field)
    if file_id is None and field == "validation_file":
        return None
    if not isinstance(file_id, str) or file_id not in state.files:
        return f"invalid file id for {field}: {file_id!r}"
    if state.files[file_id]["purpose"] != "fine-tune":
        return f"File {file_id} has purpose {state.files[file_id]['purpose']}, not fine-tune."
    return None


async def create(req: MockRequest, send: Send) -> None:
    doc = req.json()
    if not isinstance(doc.get("model"), str) or not doc["model"]:
        await respond_json(send, 400, invalid("Missing required parameter: 'model'.", "model"))
        return
    for field in ("training_file", "validation_file"):
        problem = _check_file(req.state, doc, field)
        if problem:
            await respond_json(send, 400, invalid(problem, field))
            return
    suffix = doc.get("suffix")
    if suffix is not None and (not isinstance(suffix, str) or len(suffix) > 64):
        await respond_json(send, 400, invalid("suffix must be a string of at most 64 characters.", "suffix"))
        return
    if len(doc.get("integrations") or []) > 5:
        await respond_json(send, 400, invalid("At most 5 integrations are allowed.", "integrations"))
        return
    method = doc.get("method") or {"type": "supervised", "supervised": {"hyperparameters": {}}}
    given = ((method.get(method.get("type")) or {}).get("hyperparameters") or doc.get("hyperparameters") or {})
    hyper = {"n_epochs": given.get("n_epochs", "auto"), "batch_size": given.get("batch_size", "auto"),
             "learning_rate_multiplier": given.get("learning_rate_multiplier", "auto")}
    now = time.time()
    job = {"object": "fine_tuning.job", "id": new_id("ftjob-"), "model": doc["model"], "created_at": int(now),
           "error": None, "fine_tuned_model": None, "finished_at": None, "hyperparameters": hyper,
           "organization_id": "org-mock", "result_files": [], "status": "validating_files",
           "trained_tokens": None, "training_file": doc["training_file"],
           "validation_file": doc.get("validation_file"), "seed": doc.get("seed", 42),
           "integrations": doc.get("integrations") or [], "estimated_finish": None,
           "user_provided_suffix": suffix, "metadata": doc.get("metadata"), "method": method, "created_at_f": now}
    req.state.fine_tuning_jobs[job["id"]] = job
    req.state.fine_tuning_events[job["id"]] = []
    _event(req.state, job, f"Created fine-tuning job: {job['id']}", now)
    await respond_json(send, 200, advance(req.state, job))


async def listing(req: MockRequest, send: Send) -> None:
    jobs = sorted(req.state.fine_tuning_jobs.values(), key=lambda j: j["created_at_f"], reverse=True)
    result = page(jobs, query(req), 20, 100)
    if isinstance(result, str):
        await respond_json(send, 400, invalid(result, "limit"))
        return
    data, has_more = result
    await respond_json(send, 200, {"object": "list", "data": [advance(req.state, j) for j in data],
                                   "has_more": has_more})


async def _job(req: MockRequest, send: Send) -> dict | None:
    job = req.state.fine_tuning_jobs.get(req.match.group("job_id"))
    if job is None:
        await respond_json(send, 404, invalid(f"Could not find fine tune job: {req.match.group('job_id')}.", "id",
                                              "fine_tune_not_found"))
    return job


async def retrieve(req: MockRequest, send: Send) -> None:
    job = await _job(req, send)
    if job is not None:
        await respond_json(send, 200, advance(req.state, job))


async def cancel(req: MockRequest, send: Send) -> None:
    job = await _job(req, send)
    if job is None:
        return
    advance(req.state, job)
    if job["status"] in _FINAL:
        await respond_json(send, 400, invalid(f"Job {job['id']} has already {job['status']}.", None))
        return
    job.update(status="cancelled", finished_at=int(time.time()), estimated_finish=None)
    _event(req.state, job, "Job cancelled", time.time())
    await respond_json(send, 200, advance(req.state, job))


async def events(req: MockRequest, send: Send) -> None:
    job = await _job(req, send)
    if job is None:
        return
    advance(req.state, job)
    result = page(req.state.fine_tuning_events[job["id"]], query(req), 20, 100)
    if isinstance(result, str):
        await respond_json(send, 400, invalid(result, "limit"))
        return
    data, has_more = result
    await respond_json(send, 200, {"object": "list", "data": data, "has_more": has_more})


_ID = r"(?P<job_id>[^/]+)"
ROUTES = [
    ("POST", re.compile(r"^(?:/v1)?/fine_tuning/jobs$"), create),
    ("GET", re.compile(r"^(?:/v1)?/fine_tuning/jobs$"), listing),
    ("GET", re.compile(rf"^(?:/v1)?/fine_tuning/jobs/{_ID}$"), retrieve),
    ("POST", re.compile(rf"^(?:/v1)?/fine_tuning/jobs/{_ID}/cancel$"), cancel),
    ("GET", re.compile(rf"^(?:/v1)?/fine_tuning/jobs/{_ID}/events$"), events),
]
