"""Mock of vendorA's batches API: create, retrieve, list (paged), cancel; batches run by the clock.

Like the real API: ``input_file_id`` must name an uploaded file with purpose ``batch``, ``completion_window`` must
be ``24h`` and ``endpoint`` a batch endpoint (400 naming the field otherwise); ids look like ``batch_<hex>``. A
batch is ``validating`` at first, ``in_progress`` after ``VALIDATE_S``, then ``finalizing`` and ``completed`` after
``RUN_S`` with an output file (purpose ``batch_output``) holding one vendorA batch output line per input line, each
answer made by the mock's own handlers' shapes. Cancel moves an unfinished batch to ``cancelling`` and, after
``CANCEL_S``, to ``cancelled``; cancelling a finished batch is a 409. The list is newest first, ``limit`` 1 to 100
(default 20), ``after`` a batch id. ``output_expires_after`` (``anchor`` ``created_at``, ``seconds`` 3600 to
2592000, else a 400 naming it) sets the output file's ``expires_at`` to its creation time plus ``seconds``; the
Batch object does not echo it.
"""

from __future__ import annotations

import re
import time
import uuid

import msgspec

from gateway_mock.asgi import Send
from gateway_mock.kit import DEFAULT_REPLY, MockRequest, MockState, count_tokens, respond_json
from gateway_mock.vendorA_files import envelope, invalid, page, query, store_file

VALIDATE_S = 0.2
RUN_S = 1.0
CANCEL_S = 0.3
ENDPOINTS = ("/v1/responses", "/v1/chat/completions", "/v1/embeddings", "/v1/completions", "/v1/moderations")
_encode = msgspec.json.encode


def _answer(line: dict) -> dict:
    body = line.get("body") or {}
    text = " ".join(str(m.get("content", "")) for m in body.get("messages", []) if isinstance(m, dict))
    prompt, completion = count_tokens(text or "x"), count_tokens(DEFAULT_REPLY)
    return {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", "mock-model"), "system_fingerprint": "fp_mock",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": DEFAULT_REPLY, "refusal": None},
                         "logprobs": None, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}}


def _finish(state: MockState, batch: dict, now: int) -> None:
    content = state.file_content.get(batch["input_file_id"], b"")
    lines = [msgspec.json.decode(raw) for raw in content.splitlines() if raw.strip()]
    out = b"".join(_encode({"id": f"batch_req_{uuid.uuid4().hex}", "custom_id": line.get("custom_id"),
                            "response": {"status_code": 200, "request_id": uuid.uuid4().hex, "body": _answer(line)},
                            "error": None}) + b"\n" for line in lines)
    stored = store_file(state, out, f"{batch['id']}_output.jsonl", "batch_output")
    if batch.get("output_expires_f"):
        stored["expires_at"] = stored["created_at"] + batch["output_expires_f"]
    batch.update(status="completed", finalizing_at=now, completed_at=now, output_file_id=stored["id"],
                 request_counts={"total": len(lines), "completed": len(lines), "failed": 0})


def advance(state: MockState, batch: dict) -> dict:
    """Move the batch along by the time elapsed since it was created (or cancelled)."""
    now = time.time()
    status = batch["status"]
    if status == "cancelling" and now - batch["cancelling_at_f"] >= CANCEL_S:
        batch.update(status="cancelled", cancelled_at=int(now))
    elif status == "validating" and now - batch["created_at_f"] >= VALIDATE_S:
        batch.update(status="in_progress", in_progress_at=int(now))
        status = "in_progress"
    if status == "in_progress" and now - batch["created_at_f"] >= RUN_S:
        _finish(state, batch, int(now))
    return {k: v for k, v in batch.items() if not k.endswith("_f")}


async def create(req: MockRequest, send: Send) -> None:
    try:
        doc = req.json()
    except msgspec.DecodeError:
        await respond_json(send, 400, invalid("We could not parse the JSON body of your request.", None))
        return
    file_id = doc.get("input_file_id")
    if not isinstance(file_id, str) or file_id not in req.state.files:
        await respond_json(send, 400, invalid(f"Invalid 'input_file_id': {file_id!r}.", "input_file_id"))
        return
    if req.state.files[file_id]["purpose"] != "batch":
        await respond_json(send, 400, invalid("The input file must have purpose 'batch'.", "input_file_id"))
        return
    if doc.get("completion_window") != "24h":
        await respond_json(send, 400, invalid("Invalid value for 'completion_window'.", "completion_window"))
        return
    if doc.get("endpoint") not in ENDPOINTS:
        await respond_json(send, 400, invalid("Invalid value for 'endpoint'.", "endpoint"))
        return
    expiry = doc.get("output_expires_after")
    if expiry is not None:
        seconds = expiry.get("seconds") if isinstance(expiry, dict) else None
        if not isinstance(expiry, dict) or expiry.get("anchor") != "created_at":
            await respond_json(send, 400, invalid("Invalid value for 'output_expires_after.anchor'.",
                                                  "output_expires_after.anchor"))
            return
        if not isinstance(seconds, int) or not 3600 <= seconds <= 2_592_000:
            await respond_json(send, 400, invalid("Invalid value for 'output_expires_after.seconds'.",
                                                  "output_expires_after.seconds"))
            return
    now = time.time()
    batch = {"id": f"batch_{uuid.uuid4().hex}", "object": "batch", "endpoint": doc["endpoint"], "errors": None,
             "input_file_id": file_id, "completion_window": "24h", "status": "validating", "output_file_id": None,
             "error_file_id": None, "created_at": int(now), "in_progress_at": None, "expires_at": int(now) + 86400,
             "finalizing_at": None, "completed_at": None, "failed_at": None, "expired_at": None,
             "cancelling_at": None, "cancelled_at": None,
             "request_counts": {"total": 0, "completed": 0, "failed": 0}, "metadata": doc.get("metadata"),
             "created_at_f": now, "output_expires_f": (expiry or {}).get("seconds")}
    req.state.batches[batch["id"]] = batch
    await respond_json(send, 200, advance(req.state, batch))


async def retrieve(req: MockRequest, send: Send) -> None:
    batch = req.state.batches.get(req.match.group("batch_id"))
    if batch is None:
        await respond_json(send, 404, invalid(f"No batch found with id '{req.match.group('batch_id')}'.", "id"))
        return
    await respond_json(send, 200, advance(req.state, batch))


async def listing(req: MockRequest, send: Send) -> None:
    batches = sorted(req.state.batches.values(), key=lambda b: b["created_at_f"], reverse=True)
    result = page(batches, query(req), 20, 100)
    if isinstance(result, str):
        await respond_json(send, 400, invalid(result, "limit"))
        return
    data, has_more = result
    await respond_json(send, 200, envelope([advance(req.state, b) for b in data], has_more))


async def cancel(req: MockRequest, send: Send) -> None:
    batch = req.state.batches.get(req.match.group("batch_id"))
    if batch is None:
        await respond_json(send, 404, invalid(f"No batch found with id '{req.match.group('batch_id')}'.", "id"))
        return
    advance(req.state, batch)
    if batch["status"] in ("validating", "in_progress"):
        now = time.time()
        batch.update(status="cancelling", cancelling_at=int(now), cancelling_at_f=now)
    elif batch["status"] != "cancelling":
        await respond_json(send, 409, invalid(f"Cannot cancel a batch with status '{batch['status']}'.", None))
        return
    await respond_json(send, 200, advance(req.state, batch))


_ID = r"(?P<batch_id>[^/]+)"
ROUTES = [
    ("POST", re.compile(r"^(?:/v1)?/batches$"), create),
    ("GET", re.compile(r"^(?:/v1)?/batches$"), listing),
    ("GET", re.compile(rf"^(?:/v1)?/batches/{_ID}$"), retrieve),
    ("POST", re.compile(rf"^(?:/v1)?/batches/{_ID}/cancel$"), cancel),
]
