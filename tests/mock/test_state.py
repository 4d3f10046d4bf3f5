"""What the mock remembers lives on its app: a fresh MockApp starts empty, and two apps share nothing."""

from __future__ import annotations

from gateway_mock.app import MockApp
from tests.support.asgi import call

AUTH = {"authorization": "Bearer sk"}
UPLOAD = (b'--b\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
          b'--b\r\nContent-Disposition: form-data; name="file"; filename="f.jsonl"\r\n\r\n{}\n\r\n--b--\r\n')


async def test_two_apps_share_no_files_or_scenarios():
    first, second = MockApp(), MockApp()
    made = await call(first, "POST", "/v1/files", UPLOAD, {**AUTH, "content-type": "multipart/form-data; boundary=b"})
    assert made.status == 200
    file_id = made.json()["id"]
    assert (await call(first, "GET", f"/v1/files/{file_id}", headers=AUTH)).status == 200
    assert (await call(second, "GET", f"/v1/files/{file_id}", headers=AUTH)).status == 404
    assert (await call(first, "POST", "/_mock/scenarios/x", {"steps": [{"status": 500}]})).status == 200
    assert (await call(first, "GET", "/_mock/scenarios/x")).status == 200
    assert (await call(second, "GET", "/_mock/scenarios/x")).status == 404
