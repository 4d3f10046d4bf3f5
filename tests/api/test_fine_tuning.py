"""``/v1/fine_tuning/jobs`` forwarded to the provider with the vendorA SDK: the spec's ``fine_tuning.job`` shape
through create, retrieve, list paging and cancel; bad fields refused before anything is sent."""

from __future__ import annotations

import io
import time

import pytest
from openai import BadRequestError, NotFoundError

from tests.support.http import post

JOB_FIELDS = {"id", "created_at", "error", "fine_tuned_model", "finished_at", "hyperparameters", "model", "object",
              "organization_id", "result_files", "status", "trained_tokens", "training_file", "validation_file",
              "seed", "integrations", "estimated_finish"}
STATUSES = {"validating_files", "queued", "running", "succeeded", "failed", "cancelled"}
TRAINING = b'{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}\n' * 10


def training_file(client) -> str:
    return client.files.create(file=("train.jsonl", io.BytesIO(TRAINING)), purpose="fine-tune").id


def test_a_job_is_created_followed_and_listed_in_the_spec_shape(openai_client, mock, gateway):
    base = mock.scenario()
    client = openai_client(base + "/v1")
    job = client.fine_tuning.jobs.create(
        model="gpt-4o-mini", training_file=training_file(client), suffix="support-bot", seed=7,
        method={"type": "supervised", "supervised": {"hyperparameters": {"n_epochs": "auto"}}},
        integrations=[{"type": "wandb", "wandb": {"project": "p", "tags": ["a"]}}])
    raw = job.model_dump()
    assert JOB_FIELDS <= set(raw) and raw["object"] == "fine_tuning.job" and raw["status"] in STATUSES
    assert raw["fine_tuned_model"] is None and raw["hyperparameters"]["n_epochs"] == "auto"
    assert len(raw["integrations"]) == 1 and raw["seed"] == 7
    deadline = time.monotonic() + 20
    while (current := client.fine_tuning.jobs.retrieve(job.id)).status != "succeeded":
        assert current.status in STATUSES and time.monotonic() < deadline
        time.sleep(0.1)
    assert current.fine_tuned_model.startswith("ft:gpt-4o-mini:") and "support-bot" in current.fine_tuned_model
    assert current.finished_at and current.trained_tokens and current.result_files
    assert isinstance(current.hyperparameters.n_epochs, int)
    second = client.fine_tuning.jobs.create(model="gpt-4o-mini", training_file=current.training_file)
    page = client.fine_tuning.jobs.list(limit=1)
    assert page.data[0].id == second.id and page.has_more
    after = client.fine_tuning.jobs.list(limit=1, after=second.id)
    assert after.data[0].id == job.id
    cancelled = client.fine_tuning.jobs.cancel(second.id)
    assert cancelled.status == "cancelled" and cancelled.object == "fine_tuning.job"
    assert client.fine_tuning.jobs.list_events(second.id, limit=5).data
    with pytest.raises(BadRequestError):
        client.fine_tuning.jobs.cancel(job.id)  # the provider refuses to cancel a finished job
    with pytest.raises(NotFoundError):
        client.fine_tuning.jobs.retrieve("ftjob-unknown")


def test_a_failed_job_carries_its_error_object(openai_client, mock):
    client = openai_client(mock.scenario() + "/v1")
    empty = client.files.create(file=("empty.jsonl", io.BytesIO(b"\n")), purpose="fine-tune").id
    job = client.fine_tuning.jobs.create(model="gpt-4o-mini", training_file=empty)
    deadline = time.monotonic() + 20
    while (job := client.fine_tuning.jobs.retrieve(job.id)).status != "failed":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert job.error.code and job.error.message and job.error.param == "training_file"


@pytest.mark.parametrize("body, param", [
    ({"training_file": "file-x"}, "model"),
    ({"model": "gpt-4o-mini"}, "training_file"),
    ({"model": "gpt-4o-mini", "training_file": "file-x", "suffix": "s" * 65}, "suffix"),
    ({"model": "gpt-4o-mini", "training_file": "file-x", "method": {"type": "magic"}}, "method.type"),
    ({"model": "gpt-4o-mini", "training_file": "file-x",
      "integrations": [{"type": "wandb", "wandb": {"project": "p"}}] * 6}, "integrations"),
    ({"model": "gpt-4o-mini", "training_file": "file-x", "integrations": [{"type": "wandb", "wandb": {}}]},
     "integrations[0].wandb.project"),
    ({"model": "gpt-4o-mini", "training_file": "file-x", "hyperparameters": {"n_epochs": 0}},
     "hyperparameters.n_epochs"),
    ({"model": "gpt-4o-mini", "training_file": "file-gw-0123"}, "training_file"),
    ({"model": "gpt-4o-mini", "training_file": "file-x", "metadata": {"k": "v" * 513}}, "metadata.k"),
])
def test_bad_fields_are_400s_naming_them_before_any_upstream_call(gateway, gw_headers, mock, body, param):
    base = mock.scenario()
    resp = post(f"{gateway.url}/v1/fine_tuning/jobs", body, gw_headers(base + "/v1"))
    assert resp.status == 400, resp.text
    assert resp.json()["error"]["param"] == param
    assert mock.calls(base)["calls"] == 0


def test_a_provider_without_fine_tuning_answers_400(openai_client, mock):
    with pytest.raises(BadRequestError) as caught:
        openai_client(mock.url + "/v1", provider="groq").fine_tuning.jobs.list()
    assert caught.value.param == "provider"
