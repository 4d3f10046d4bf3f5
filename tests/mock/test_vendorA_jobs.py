"""The mock's files, batches, fine-tuning and stored-responses endpoints refuse what vendorA refuses (the gateway's
own checks run first, so its tests never reach these), and cloudB's resource form checks its auth and version."""

from __future__ import annotations

from tests.support.http import post, request

AUTH = {"authorization": "Bearer sk"}


def upload(url: str, purpose: str, content: bytes = b"{}\n") -> dict:
    body = (b'--b\r\nContent-Disposition: form-data; name="purpose"\r\n\r\n' + purpose.encode() + b"\r\n"
            b'--b\r\nContent-Disposition: form-data; name="file"; filename="f.jsonl"\r\n\r\n' + content
            + b"\r\n--b--\r\n")
    return request("POST", url + "/v1/files", body, {**AUTH, "content-type": "multipart/form-data; boundary=b"})


def test_files_need_a_known_purpose(mock):
    resp = upload(mock.url, "nonsense")
    assert resp.status == 400 and resp.json()["error"]["param"] == "purpose"
    assert upload(mock.url, "batch").json()["object"] == "file"


def test_batches_and_jobs_check_their_files(mock):
    tuning = upload(mock.url, "fine-tune").json()["id"]
    resp = post(mock.url + "/v1/batches", {"input_file_id": tuning, "endpoint": "/v1/chat/completions",
                                           "completion_window": "24h"}, AUTH)
    assert resp.status == 400 and resp.json()["error"]["param"] == "input_file_id"
    batch_file = upload(mock.url, "batch").json()["id"]
    resp = post(mock.url + "/v1/batches", {"input_file_id": batch_file, "endpoint": "/v1/chat/completions",
                                           "completion_window": "1h"}, AUTH)
    assert resp.status == 400 and resp.json()["error"]["param"] == "completion_window"
    resp = post(mock.url + "/v1/fine_tuning/jobs", {"model": "gpt-4o-mini", "training_file": batch_file}, AUTH)
    assert resp.status == 400 and resp.json()["error"]["param"] == "training_file"


def test_stored_responses_refuse_unknown_includes(mock):
    created = post(mock.url + "/v1/responses", {"model": "m", "input": "hi"}, AUTH).json()
    resp = request("GET", f"{mock.url}/v1/responses/{created['id']}?include=bogus", headers=AUTH)
    assert resp.status == 400 and resp.json()["error"]["param"] == "include"
    items = request("GET", f"{mock.url}/v1/responses/{created['id']}/input_items", headers=AUTH).json()
    assert items["data"][0]["content"] == [{"type": "input_text", "text": "hi"}]


def test_cloudB_resource_paths_need_api_key_and_api_version(mock):
    assert request("GET", mock.url + "/openai/files?api-version=2024-10-21").status == 401
    assert request("GET", mock.url + "/openai/files", headers={"api-key": "k"}).status == 404
    resp = request("GET", mock.url + "/openai/files?api-version=2024-10-21", headers={"api-key": "k"})
    assert resp.status == 200 and resp.json()["object"] == "list"
