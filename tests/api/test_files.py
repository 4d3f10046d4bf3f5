"""``/v1/files`` through the real gateway with the vendorA SDK: files stored by the gateway (upload, list paging,
retrieve, content, delete) and files forwarded to the provider; every bad field a 400 naming it."""

from __future__ import annotations

import gzip
import io

import pytest
from openai import BadRequestError, NotFoundError, OpenAI

from tests.support.http import request
from tests.support.inprocess import start_in_process
from tests.support.servers import ADMIN_KEY, start_gateway

JSONL = b'{"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": {}}\n'


@pytest.fixture
def plain(gateway) -> OpenAI:
    """A client with only the gateway key (as its bearer token): the gateway's own files."""
    return OpenAI(base_url=f"{gateway.url}/v1", api_key=ADMIN_KEY, max_retries=0, timeout=60,
                  http_client=gateway.http_client())


def upload(client: OpenAI, content: bytes = JSONL, name: str = "in.jsonl", purpose: str = "batch"):
    return client.files.create(file=(name, io.BytesIO(content)), purpose=purpose)


def test_a_file_stored_by_the_gateway_round_trips(plain):
    created = upload(plain, JSONL * 3, "requests.jsonl")
    assert created.id.startswith("file-gw-")
    assert (created.object, created.bytes, created.filename, created.purpose, created.status) == (
        "file", len(JSONL) * 3, "requests.jsonl", "batch", "processed")
    assert plain.files.retrieve(created.id).model_dump() == created.model_dump()
    assert plain.files.content(created.id).content == JSONL * 3
    deleted = plain.files.delete(created.id)
    assert (deleted.id, deleted.deleted, deleted.object) == (created.id, True, "file")
    with pytest.raises(NotFoundError) as caught:
        plain.files.retrieve(created.id)
    assert caught.value.body["param"] == "file_id" and created.id in caught.value.body["message"]
    with pytest.raises(NotFoundError):
        plain.files.delete(created.id)


def test_the_gateways_files_list_in_pages(gateway):
    # a workspace of its own would need a second key; the default one is shared, so page through what is there
    client = OpenAI(base_url=f"{gateway.url}/v1", api_key=ADMIN_KEY, max_retries=0, http_client=gateway.http_client())
    ids = [upload(client, JSONL, f"p{i}.jsonl").id for i in range(3)]
    newest_first = [f.id for f in client.files.list(limit=10_000).data]
    assert newest_first.index(ids[2]) < newest_first.index(ids[1]) < newest_first.index(ids[0])
    page = client.files.list(limit=2)
    assert len(page.data) == 2 and page.has_more
    after = client.files.list(limit=2, after=page.data[-1].id)
    assert after.data[0].id == newest_first[2]
    oldest_first = [f.id for f in client.files.list(order="asc", purpose="batch").data]
    assert oldest_first.index(ids[0]) < oldest_first.index(ids[2])
    assert all(f.purpose == "batch" for f in client.files.list(purpose="batch").data)
    assert client.files.list(purpose="fine-tune").data == []
    all_pages = [f.id for f in client.files.list(limit=1)]  # the SDK follows has_more / after
    assert set(ids) <= set(all_pages)


@pytest.mark.parametrize("fields, param", [
    ({}, "purpose"),
    ({"purpose": "training"}, "purpose"),
    ({"purpose": "fine-tune"}, "purpose"),  # the gateway keeps batch files only
    ({"purpose": "batch", "expires_after[anchor]": "created_at", "expires_after[seconds]": "60"},
     "expires_after.seconds"),
])
def test_bad_upload_fields_are_400s_naming_them(gateway, fields, param):
    boundary = "b0undary"
    parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n' for k, v in fields.items()]
    parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="x.jsonl"\r\n\r\n')
    body = "".join(parts).encode() + JSONL + f"\r\n--{boundary}--\r\n".encode()
    resp = request("POST", f"{gateway.url}/v1/files", body, {
        "x-gateway-api-key": ADMIN_KEY, "content-type": f"multipart/form-data; boundary={boundary}"})
    assert resp.status == 400, resp.text
    assert resp.json()["error"]["param"] == param


def test_an_upload_that_is_not_multipart_or_has_no_file_is_refused(gateway):
    headers = {"x-gateway-api-key": ADMIN_KEY, "content-type": "application/json"}
    resp = request("POST", f"{gateway.url}/v1/files", b"{}", headers)
    assert resp.status == 400 and resp.json()["error"]["param"] == "content-type"
    headers["content-type"] = "multipart/form-data; boundary=zz"
    body = b'--zz\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n--zz--\r\n'
    resp = request("POST", f"{gateway.url}/v1/files", body, headers)
    assert resp.status == 400 and resp.json()["error"]["param"] == "file"


def test_a_compressed_upload_is_a_415_naming_content_encoding_and_stores_nothing(gateway):
    """Multipart bodies are read as sent (only JSON bodies are decompressed)."""
    body = (b'--zz\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n--zz\r\n'
            b'Content-Disposition: form-data; name="file"; filename="x.jsonl"\r\n\r\n' + JSONL + b"\r\n--zz--\r\n")
    headers = {"x-gateway-api-key": ADMIN_KEY, "content-type": "multipart/form-data; boundary=zz"}
    before = request("GET", f"{gateway.url}/v1/files?limit=100", headers={"x-gateway-api-key": ADMIN_KEY}).json()
    resp = request("POST", f"{gateway.url}/v1/files", gzip.compress(body), {**headers, "content-encoding": "gzip"})
    assert resp.status == 415, resp.text
    assert resp.json()["error"]["param"] == "content-encoding"
    after = request("GET", f"{gateway.url}/v1/files?limit=100", headers={"x-gateway-api-key": ADMIN_KEY}).json()
    assert after["data"] == before["data"]
    assert request("POST", f"{gateway.url}/v1/files", body, {**headers, "content-encoding": "identity"}).status == 200


def test_a_file_with_an_expiry_policy_carries_expires_at(plain):
    created = plain.files.create(file=("e.jsonl", io.BytesIO(JSONL)), purpose="batch",
                                 expires_after={"anchor": "created_at", "seconds": 3600})
    assert created.expires_at == created.created_at + 3600


def test_provider_files_are_forwarded_with_its_ids_and_errors(openai_client, mock):
    base = mock.scenario()
    client = openai_client(base + "/v1")
    created = upload(client, b'{"messages": []}\n', "train.jsonl", "fine-tune")
    assert created.id.startswith("file-") and not created.id.startswith("file-gw-")
    assert client.files.retrieve(created.id).purpose == "fine-tune"
    assert client.files.content(created.id).content == b'{"messages": []}\n'
    assert created.id in [f.id for f in client.files.list(purpose="fine-tune").data]
    assert client.files.delete(created.id).deleted
    with pytest.raises(NotFoundError) as caught:
        client.files.retrieve(created.id)
    assert "No such File object" in caught.value.message
    calls = mock.calls(base)["requests"]
    assert [c["method"] + " " + c["path"] for c in calls][:2] == ["POST /v1/files", f"GET /v1/files/{created.id}"]
    assert calls[0]["headers"]["authorization"] == "Bearer sk-provider-token"


def test_a_bad_provider_upload_is_refused_before_it_is_sent(openai_client, mock):
    base = mock.scenario()
    with pytest.raises(BadRequestError) as caught:
        upload(openai_client(base + "/v1"), JSONL, purpose="training")
    assert caught.value.param == "purpose"
    assert mock.calls(base)["calls"] == 0


@pytest.mark.parametrize("bad", ['filename="a\nb.jsonl"',
                                 'filename="a.jsonl"\r\nContent-Type: text/plain\rX-Injected: 1'],
                         ids=["lf-in-filename", "cr-in-content-type"])
@pytest.mark.parametrize("to_provider", [True, False], ids=["provider", "gateway"])
def test_a_line_break_in_the_file_parts_headers_is_a_400_and_nothing_is_sent(gateway, mock, bad, to_provider):
    base = mock.scenario()
    headers = {"x-gateway-api-key": ADMIN_KEY, "content-type": "multipart/form-data; boundary=zz"}
    if to_provider:
        headers.update({"x-gateway-provider": "vendorA", "authorization": "Bearer sk-t",
                        "x-gateway-custom-host": base + "/v1"})
    body = (b'--zz\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
            + f'--zz\r\nContent-Disposition: form-data; name="file"; {bad}\r\n\r\n'.encode() + JSONL
            + b"\r\n--zz--\r\n")
    resp = request("POST", gateway.url + "/v1/files", body=body, headers=headers)
    assert resp.status == 400, resp.text
    error = resp.json()["error"]
    assert error["param"] == "file" and "CR, LF or NUL" in error["message"]
    assert mock.calls(base)["calls"] == 0


def test_a_provider_file_id_without_provider_headers_is_unknown(plain):
    with pytest.raises(NotFoundError) as caught:
        plain.files.retrieve("file-abc123")
    assert caught.value.body["param"] == "file_id"


def test_a_provider_without_files_is_a_400_naming_it(openai_client, mock):
    with pytest.raises(BadRequestError) as caught:
        openai_client(mock.url + "/v1", provider="anthropic").files.list()
    assert caught.value.param == "provider"


@pytest.fixture(scope="module")
def small_limit_gateway(mock_server):
    server = start_in_process({"GATEWAY_FILE_MAX_BYTES": "65536"})
    yield server
    server.stop()


def test_a_file_over_the_limit_is_a_413_and_leaves_nothing(small_limit_gateway):
    client = OpenAI(base_url=f"{small_limit_gateway.url}/v1", api_key=ADMIN_KEY, max_retries=0,
                    http_client=small_limit_gateway.http_client())
    with pytest.raises(Exception) as caught:
        upload(client, b"x" * 70_000)
    assert getattr(caught.value, "status_code", None) == 413
    assert client.files.list().data == []
    assert upload(client, b"x" * 60_000).bytes == 60_000


@pytest.fixture(scope="module")
def own_gateway(mock_server):
    server = start_gateway()
    yield server
    server.stop()


def test_a_large_upload_streams_to_disk_instead_of_memory(own_gateway):
    from tests.support.processes import peak_rss_kb

    size = 64 * 1024 * 1024
    before = peak_rss_kb(own_gateway.proc.pid)
    chunk = (JSONL * (65536 // len(JSONL) + 1))[:65536]

    def body():
        yield b'--zz\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
        yield b'--zz\r\nContent-Disposition: form-data; name="file"; filename="big.jsonl"\r\n\r\n'
        for _ in range(size // len(chunk)):
            yield chunk
        yield b"\r\n--zz--\r\n"

    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", own_gateway.port, timeout=120)
    try:
        conn.request("POST", "/v1/files", body=body(), encode_chunked=True, headers={
            "x-gateway-api-key": ADMIN_KEY, "content-type": "multipart/form-data; boundary=zz"})
        resp = conn.getresponse()
        answer = resp.read()
    finally:
        conn.close()
    assert resp.status == 200, answer
    assert b'"bytes":67108864' in answer
    grew_mb = (peak_rss_kb(own_gateway.proc.pid) - before) / 1024
    assert grew_mb < 24, f"peak memory grew by {grew_mb:.0f} MB while a 64 MB file was uploaded"


def test_a_slug_is_the_calling_keys_workspaces(gateway, mock):
    """Files forwarded with a provider slug: the slug of the key's own workspace (its credentials and host), in
    every spelling; another workspace's slug of that name is unknown."""
    from tests.support.controlplane import api, create_key

    owner, stranger = create_key(gateway, role="member"), create_key(gateway)
    admin_of_owner = create_key(gateway, workspace=owner["workspace_id"])
    base = mock.scenario()
    slug = {"slug": "files-slug", "provider": "vendorA", "api_key": "sk-files-slug-0123456789",
            "custom_host": base + "/v1"}
    assert api(gateway, "POST", "/v1/providers", slug, admin_of_owner["key"]).status == 201
    spellings = [{"x-gateway-provider": "@files-slug"}, {"x-gateway-virtual-key": "files-slug"},
                 {"x-gateway-config": '{"provider": "@files-slug"}'}]
    for headers in spellings:
        resp = request("GET", f"{gateway.url}/v1/files", headers={"x-gateway-api-key": owner["key"], **headers})
        assert resp.status == 200, (headers, resp.text)
        assert resp.json()["object"] == "list" and resp.headers["x-gateway-provider"] == "vendorA"
        assert mock.calls(base)["requests"][-1]["headers"]["authorization"] == "Bearer sk-files-slug-0123456789"
    calls = mock.calls(base)["calls"]
    for headers, param in zip(spellings, ("x-gateway-provider", "x-gateway-virtual-key", "provider")):
        resp = request("GET", f"{gateway.url}/v1/files", headers={"x-gateway-api-key": stranger["key"], **headers})
        assert resp.status == 400, resp.text
        assert resp.json()["error"]["param"] == param and "@files-slug" in resp.json()["error"]["message"]
    assert mock.calls(base)["calls"] == calls
